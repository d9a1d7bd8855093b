"""torch.compile's CUDA wrapper run end to end through Triton's interpreter (docs/gpu.md).

tests/cuda_harness.py fakes an sm_90 device so that Inductor generates its
CUDA Python wrapper and Triton kernels for tests/cuda_models.py's Small;
install(interpret=True) then runs that wrapper on CPU tensors, each Triton
kernel through Triton's interpreter (TRITON_INTERPRET=1).  The kernels' math
and the instrumented wrapper are real; nothing here runs on a GPU, so the
records say device=cpu.  The same model's CPU AOTI log is what `diff`
compares the interpreted run with.
"""

import os
import re

import pytest

import cuda_harness
from cuda_harness import model_line
from conftest import TESTS, clean_env, records, run_python
from test_cli import aoti_debug as aoti_debug_cli

pytestmark = [pytest.mark.torch_matrix, pytest.mark.slow]

SKIP = cuda_harness.skip_reason()

# name -> (aoti_debug.instrument() arguments or None, plant a NaN in the input?)
CONFIGS = {
    "plain": (None, False),
    "level1": (dict(level=1), False),
    "level3": (dict(level=3), False),
    "level5": (dict(level=5), False),
    "planted5": (dict(level=5), True),
    "nan_check": (dict(nan_check="raise"), True),
}

# Small's launches in order, by kind, and the output of the model each Triton kernel writes
LAUNCHES = [
    ("mm", r"aoti_torch_cuda_mm_out", "scores = x @ weight.t()", None),
    ("persistent", r"triton_per_fused__softmax\w*_\d+", "attention = torch.softmax(", 0),
    ("reduction", r"triton_red_fused_abs_add_log_sum_\d+", "row_sums = torch.log(", 1),
    ("pointwise", r"triton_poi_fused_add_mul_sqrt_\d+", "root = torch.sqrt(", 2),
]


class Interpreted:
    def __init__(self, root):
        self.root = root

    def path(self, name):
        return os.path.join(self.root, name)

    def log(self, name):
        with open(self.path(name + ".log")) as f:
            return f.read()

    def result(self, name):
        import torch
        return torch.load(self.path(name + ".pt"))


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory, aoti_cache):
    if SKIP:
        pytest.skip(SKIP)
    root = tmp_path_factory.mktemp("interpreter")
    env = clean_env(CUDA_HOME=cuda_harness.CUDA_HOME, TORCHINDUCTOR_CACHE_DIR=aoti_cache, TRITON_INTERPRET="1",
                    TRITON_CACHE_DIR=os.path.join(aoti_cache, "triton-interpreter"))
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import cuda_harness; cuda_harness.install(interpret=True)
        import cuda_models
        cuda_models.interpret({str(root)!r}, {CONFIGS!r})
    """, env=env, timeout=600)
    # the same model compiled by AOTI for the CPU, its level-5 run on the same inputs
    run_python(f"""
        import torch
        import sys; sys.path.insert(0, {TESTS!r})
        import aoti_debug, cuda_models
        ep = torch.export.export(cuda_models.Small(), cuda_models.small_inputs())
        with aoti_debug.instrument(level=5):
            pt2 = torch._inductor.aoti_compile_and_package(ep, package_path={str(root / "small.pt2")!r})
        torch._inductor.aoti_load_package(pt2)(*cuda_models.small_inputs())
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGDEST=str(root / "cpu.log")), timeout=600)
    return Interpreted(str(root))


def launch_records(text):
    """[(event, model, kernel, record)] of the launch and launch-end records."""
    out = []
    for record in records(text):
        m = re.match(r"\[[^]]*\] \[pid \d+\] (launch|launch-end) (\S+):1\.\d+ (\S+)\n", record)
        if m:
            out.append((m.group(1), m.group(2), m.group(3), record))
    return out


def tensor_blocks(record):
    """{'role name': {field: value}} of a record's Tensor blocks."""
    out = {}
    for m in re.finditer(r"^  (\w+ \w+):\n    Tensor\(\n((?:      \w+=.*\n)*)    \)", record, re.M):
        out[m.group(1)] = dict(line.strip().split("=", 1) for line in m.group(2).splitlines())
    return out


def test_interpreter_runs_the_cuda_wrapper_as_eager_does(interpreted):
    import torch
    wrapper = open(interpreted.path("plain.py")).read()
    assert "empty_strided_cuda((" in wrapper and "get_raw_stream(0)" in wrapper
    assert len(re.findall(r"^\s*triton_\w+\.run\(", wrapper, re.M)) == 3
    assert "aoti_debug" not in wrapper
    eager, _ = interpreted.result("eager")
    plain = interpreted.result("plain")
    assert [t.device.type for t in plain] == ["cpu"] * 3
    for got, want in zip(plain, eager):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # instrumentation changes no output, bit for bit
    for name in ("level1", "level3", "level5"):
        assert all(torch.equal(a, b) for a, b in zip(interpreted.result(name), plain)), name


@pytest.mark.parametrize("level", [1, 3, 5])
def test_interpreter_records_each_triton_launch_with_its_lines(interpreted, level):
    found = launch_records(interpreted.log(f"level{level}"))
    events = ["launch"] if level == 1 else ["launch", "launch-end"]
    assert [e for e, *_ in found] == events * len(LAUNCHES)
    for (kind, kernel, line, _), group in zip(LAUNCHES, zip(*[iter(found)] * len(events))):
        for event, _model, name, record in group:
            assert re.fullmatch(kernel, name), (kind, name)
        begin = group[0][3]
        if level == 1:          # the launch's name alone
            assert begin.count("\n") == 1, begin
            continue
        source = model_line(line)
        assert re.search(rf"^  origin: nodes=\S+ source={re.escape(source)}$", begin, re.M), begin
        assert re.search(rf"^  source-line: {re.escape(source)} nodes=\S+$", begin, re.M), begin
        blocks = tensor_blocks(begin)
        if level == 3:
            assert blocks and all("min" not in b and b["device"] == "cpu" for b in blocks.values()), begin
        else:
            assert blocks and all({"min", "max", "mean", "nan_count", "hash"} <= set(b) for b in blocks.values())


def test_interpreter_level5_statistics_are_the_outputs(interpreted):
    """Each Triton kernel's record after its launch describes what the model returned."""
    outputs = interpreted.result("level5")
    ends = [rec for event, _, _, rec in launch_records(interpreted.log("level5")) if event == "launch-end"]
    for (kind, _, _, index), record in zip(LAUNCHES, ends):
        if index is None:
            continue
        (role, block), = tensor_blocks(record).items()
        value = outputs[index]
        assert role.split()[0] in ("out", "inout"), record
        assert block["shape"] == str(tuple(value.shape)), kind
        for stat in ("min", "max", "mean"):      # the mean is taken in double
            assert float(block[stat]) == pytest.approx(float(getattr(value.double(), stat)()), rel=1e-6,
                                                       abs=1e-6), (kind, stat)
        assert (block["nan_count"], block["inf_count"]) == ("0", "0")


def test_interpreter_nan_check_names_the_triton_kernel_and_line(interpreted):
    message = interpreted.result("nan_check")
    assert re.fullmatch(
        r"NanCheckError: aoti-debug NaN check: launch model(?:#\d+)?:1\.4 triton_poi_fused_add_mul_sqrt_\d+ "
        rf"\(source {re.escape(model_line('root = torch.sqrt('))}\) wrote 1 NaN into buf\d+ "
        r"\(first at flat index 53\); its inputs held no NaN, so this launch is where NaN first appears",
        message), message


def test_interpreter_nan_origin_names_the_triton_kernel_and_line(interpreted):
    proc = aoti_debug_cli("nan-origin", interpreted.path("planted5.log"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"NaN/Inf origin: launch model(?:#\d+)?:1\.4 triton_poi_fused_add_mul_sqrt_\d+ "
                        r"\(pid \d+, planted5\.log:\d+\)", lines[0]), proc.stdout
    assert lines[1:4] == [f"  source: {model_line('root = torch.sqrt(')}", "  nodes:  add_1, sqrt, mul",
                          "  candidate ops: sqrt (can make NaN/Inf); then add_1, mul"], proc.stdout
    assert "  inputs (all finite):" in lines


def test_interpreter_log_agrees_with_the_cpu_aoti_log(interpreted):
    proc = aoti_debug_cli("diff", interpreted.path("cpu.log"), interpreted.path("level5.log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if re.match(r"\S+:1\.\d|end ", line)}
    # the kernels differ by name and fusion; the mm pairs, the outputs agree
    assert re.search(r"aoti_torch_cpu_mm_out / aoti_torch_cuda_mm_out +identical", proc.stdout), proc.stdout
    assert re.search(r"^end +end +small / model(?:#\d+)? +ok ", proc.stdout, re.M), proc.stdout
    assert "DIFFERS" not in proc.stdout and rows
    assert re.search(r"^the logs agree: \d+ aligned launch\(es\) compared", proc.stdout, re.M), proc.stdout
    # and the same comparison finds the planted NaN's run different
    planted = aoti_debug_cli("diff", interpreted.path("cpu.log"), interpreted.path("planted5.log"))
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert re.search(r"^first divergence: A small:1\.1 aoti_torch_cpu_mm_out / B model(?:#\d+)?:1\.1 "
                     r"aoti_torch_cuda_mm_out$", planted.stdout, re.M), planted.stdout


def test_interpreter_hooks_are_named_when_missing(monkeypatch):
    if SKIP:
        pytest.skip(SKIP)
    import torch
    from triton.runtime import interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delattr(interpreter, "TensorHandle")
    assert cuda_harness.missing_hooks(interpret=True) == ["triton.runtime.interpreter.TensorHandle"]
    assert cuda_harness.missing_hooks() == []          # code generation alone does not need it
    with pytest.raises(cuda_harness.HarnessUnsupported) as raised:
        cuda_harness.install(interpret=True)
    assert str(raised.value) == (
        f"cuda_harness: torch {torch.__version__} no longer has triton.runtime.interpreter.TensorHandle, "
        "which the GPU-less CUDA harness hooks into")
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(cuda_harness.HarnessUnsupported, match="needs TRITON_INTERPRET=1 in the environment"):
        cuda_harness.install(interpret=True)
