"""On a real NVIDIA GPU only (scripts/gpu-check.sh): an instrumented CUDA
package (tests/gpu_models.py: an extern mm and Triton kernels) compiled and
run for real, from Python and from the C++ runner.

Everywhere else each test is skipped, saying why.  CI has no GPU: what it
verifies for CUDA is the generated code (tests/test_cuda_codegen.py) and
torch.compile's CUDA wrapper through Triton's interpreter
(tests/test_interpreter.py), and nothing it runs is called GPU-tested
(docs/gpu.md).  Written without a GPU: until a report from
scripts/gpu-check.sh exists, none has run on one.  The cost of device
statistics is measured by bench/bench_device_stats.py (the script runs it
after these tests), not here.

The tests run in the order written, the most telling first: the GPU check has
one limit for all of them (docs/gpu.md).  Every child process has a timeout
below the check's per-test one."""

import re
import shutil

import pytest
import torch

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, records, run_python


def _why_not() -> str:
    if not torch.cuda.is_available():
        return (f"no CUDA device (torch {torch.__version__}): these tests run only on an NVIDIA GPU "
                f"(scripts/gpu-check.sh)")
    return ""


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "a GPU")]

COMPILE_TIMEOUT = 240      # seconds: one package, on the GPU machine (docs/gpu.md)
RUN_TIMEOUT = 120

# CUDA graph capture needs the package loaded single-threaded: the default
# container queries a CUDA event during the run, which a capturing stream forbids
# (torch's AOTI docs).  tests/test_gpu_scripts.py runs this load on a CPU package.
LOAD = "torch._inductor.aoti_load_package({pt2!r}, run_single_threaded=True)"

COMPILE = """
    import sys; sys.path.insert(0, {tests!r})
    import torch, gpu_models
    ep = torch.export.export(gpu_models.model().cuda(), gpu_models.inputs())
    torch._inductor.aoti_compile_and_package(ep, package_path={out!r})
    from aoti_debug.runner import save_inputs
    save_inputs({clean!r}, gpu_models.inputs(device="cpu"))
    save_inputs({planted!r}, gpu_models.inputs(bias=-1.0, device="cpu"))
"""

RUN = """
    import sys; sys.path.insert(0, {tests!r})
    import torch
    m = torch._inductor.aoti_load_package({pt2!r})
    args = [t.to({device!r}) for t in torch.load({inputs!r})]
    try:
        out = m(*args)
    except RuntimeError as exc:
        print("RAISED: " + str(exc), flush=True)
    else:
        print("OUTPUT", repr(out[0].double().sum().item()) if isinstance(out, (list, tuple)) else out, flush=True)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(package, clean inputs, planted inputs), compiled with everything in."""
    root = tmp_path_factory.mktemp("gpu")
    paths = {k: str(root / n) for k, n in (("out", "scorer.pt2"), ("clean", "clean.pt"), ("planted", "planted.pt"))}
    run_python(COMPILE.format(tests=TESTS, **paths), env=clean_env(AOTI_DEBUG_COMPILE="all"),
               timeout=COMPILE_TIMEOUT)
    return paths["out"], paths["clean"], paths["planted"]


@pytest.fixture(scope="module")
def built_cpu(tmp_path_factory):
    """The same model's package for the CPU, which a GPU run is diffed against."""
    out = str(tmp_path_factory.mktemp("gpu-cpu") / "scorer.pt2")
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, gpu_models
        ep = torch.export.export(gpu_models.model(), gpu_models.inputs(device="cpu"))
        torch._inductor.aoti_compile_and_package(ep, package_path={out!r})
    """, env=clean_env(AOTI_DEBUG_COMPILE="all"), timeout=COMPILE_TIMEOUT)
    return out


def python_run(pt2, inputs, device="cuda", **env):
    return run_python(RUN.format(tests=TESTS, pt2=pt2, inputs=inputs, device=device), env=clean_env(**env),
                      check=False, timeout=RUN_TIMEOUT)


def cpp_run(pt2, inputs, **env):
    """The C++ runner's run (built on first use with CMake, which a machine may lack)."""
    if shutil.which("cmake") is None:
        pytest.skip("no cmake on PATH: the C++ runner (aoti-debug-run) cannot be built here")
    return runner.run_package(pt2, inputs, env=clean_env(**env), timeout=RUN_TIMEOUT)


def launches(text):
    """(kernel, origin line) of each launch record."""
    return re.findall(r"\] launch \S+ (\S+)\n  origin: (.*)\n", text)


def test_gpu_nan_check_and_nan_origin_name_the_triton_kernel_and_the_line_of_the_log(built, tmp_path):
    import gpu_models
    pt2, _, planted = built
    log = tmp_path / "log"
    out = python_run(pt2, planted, AOTI_DEBUG_NAN_CHECK="warn", AOTI_DEBUG_LOGLEVEL="5",
                     AOTI_DEBUG_LOGDEST=str(log))
    assert out.returncode == 0 and "RAISED" not in out.stdout, out.stdout + out.stderr
    line = re.escape(gpu_models.line_of("gpu.log"))
    notes = [r for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert notes and re.search(rf"launch scorer:1\.\d+ triton_\S+ \(source {line}\) wrote \d+ NaN", notes[0]), notes
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main(["nan-origin", {str(log)!r}]))
    """, check=False, timeout=RUN_TIMEOUT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"^NaN/Inf origin: launch scorer:1\.\d+ triton_\S+ .*\n  source: {line}$", proc.stdout, re.M), \
        proc.stdout


@pytest.mark.parametrize("level", ["1", "3", "5"])
def test_gpu_python_and_the_cpp_runner_write_the_same_records(built, tmp_path, level):
    pt2, clean, _ = built
    py_log, cpp_log = tmp_path / "python.log", tmp_path / "cpp.log"
    py = python_run(pt2, clean, AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=str(py_log))
    cpp = cpp_run(pt2, clean, AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=str(cpp_log))
    assert py.returncode == 0 and "RAISED" not in py.stdout, py.stdout + py.stderr
    assert cpp.returncode == 0, cpp.stderr
    assert mask(py_log.read_text()) == mask(cpp_log.read_text())
    kernels = re.findall(r"\] launch \S+ (\S+)\n", py_log.read_text())
    assert any(k.startswith("triton_") for k in kernels), kernels
    if level != "1":
        # every launch names its FX nodes and the user's line (no "-")
        for kernel, origin in launches(py_log.read_text()):
            assert re.fullmatch(r"nodes=\S+ source=\S+gpu_models\.py:\d+", origin), (kernel, origin)


def test_gpu_statistics_are_torchs_of_the_outputs(built, tmp_path):
    pt2, clean, _ = built
    log = tmp_path / "log"
    out = python_run(pt2, clean, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(log))
    assert out.returncode == 0, out.stderr
    end = next(r for r in records(log.read_text()) if "] run-end " in r)
    stats = {k: float(v) for k, v in re.findall(r"^      (min|max|mean)=(\S+)$", end, re.M)}
    import gpu_models
    m = gpu_models.model().cuda()
    with torch.no_grad():
        ref = m(*gpu_models.inputs())
    assert stats["min"] == pytest.approx(ref.min().item(), rel=1e-5)
    assert stats["max"] == pytest.approx(ref.max().item(), rel=1e-5)
    assert stats["mean"] == pytest.approx(ref.double().mean().item(), rel=1e-4)


FAULTY = """
    import sys; sys.path.insert(0, {tests!r})
    import torch, gpu_models
    ep = torch.export.export(gpu_models.faulty(), gpu_models.faulty_inputs())
    torch._inductor.aoti_compile_and_package(ep, package_path={out!r})
    from aoti_debug.runner import save_inputs
    save_inputs({inputs!r}, gpu_models.faulty_inputs(gpu_models.FAR, device="cpu"))
"""


def test_gpu_sync_pins_an_illegal_memory_access_to_the_launch_of_the_line(tmp_path):
    """A user-defined Triton kernel stores far out of bounds (by an offset its input gives at run
    time): with AOTI_DEBUG_SYNC=1 the error is raised by that launch, naming its kernel and line, and
    the log ends with its crash trailer, from Python and from the C++ runner alike."""
    import gpu_models
    pt2, inputs = str(tmp_path / "faulty.pt2"), str(tmp_path / "x.pt")
    run_python(FAULTY.format(tests=TESTS, out=pt2, inputs=inputs), env=clean_env(AOTI_DEBUG_COMPILE="all"),
               timeout=COMPILE_TIMEOUT)
    line = re.escape(gpu_models.line_of("gpu.oob"))
    py_log, cpp_log = tmp_path / "python.log", tmp_path / "cpp.log"
    py = python_run(pt2, inputs, AOTI_DEBUG_SYNC="1", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(py_log))
    cpp = cpp_run(pt2, inputs, AOTI_DEBUG_SYNC="1", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(cpp_log))
    error = (rf"aoti-debug: launch faulty:1\.(\d+) (\S*shifted_store\S*) \(source: {line}\) failed on the "
             r"device: CUDA error: an illegal memory access was encountered")
    found = re.search(error, py.stdout)
    assert found, py.stdout + py.stderr
    assert re.search(error, cpp.stderr), cpp.stderr
    ident, kernel = f"faulty:1.{found.group(1)}", found.group(2)
    for log in (py_log, cpp_log):
        last = records(mask(log.read_text()))[-1]
        assert last == (f"[TIMESTAMP] [pid PID] crash {ident} {kernel}\n"
                        "  error: CUDA error: an illegal memory access was encountered\n"
                        f"  raised-by: {ident}\n"), last


CAPTURE = """
    import sys; sys.path.insert(0, {tests!r})
    import torch
    m = """ + LOAD + """
    args = [t.cuda() for t in torch.load({inputs!r})]
    eager = m(*args)[0].clone()                   # a run outside capture, for the outputs
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        m(*args)                                  # warm-up on the capture's stream
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g):
        out = m(*args)[0]
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    print("REPLAYED", bool(torch.equal(out, eager)), flush=True)
"""


@pytest.mark.parametrize("level", ["1", "3", "5", "10"])
def test_gpu_graph_capture_and_replay_at_each_level(built, tmp_path, level):
    """A package captured into a CUDA graph and replayed: the outputs are a plain run's, and
    nothing was read from the device during capture (level 5's statistics say so)."""
    pt2, clean, _ = built
    log = tmp_path / "log"
    proc = run_python(CAPTURE.format(tests=TESTS, pt2=pt2, inputs=clean),
                      env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=str(log),
                                    AOTI_DEBUG_DUMP_DIR=str(tmp_path / "dumps")), check=False,
                      timeout=RUN_TIMEOUT)
    assert proc.returncode == 0 and "REPLAYED True" in proc.stdout, proc.stdout + proc.stderr
    runs = [r for r in records(log.read_text()) if re.search(r"\] run \d+ scorer", r)]
    assert len(runs) == 3, runs                   # plain, warm-up, capture; replays run no host code
    if int(level) >= 5:
        captured = log.read_text().split(runs[2], 1)[1]
        stats = re.findall(r"^ +(min=\S+|stats=skipped \(.*\))$", captured, re.M)
        assert stats and set(stats) == {"stats=skipped (CUDA graph capture in progress)"}, stats


def test_gpu_inputs_on_the_wrong_device_are_named(built):
    pt2, clean, _ = built
    proc = run_python(f"""
        import torch
        m = torch._inductor.aoti_load_package({pt2!r})
        try:
            m(*torch.load({clean!r}))          # CPU tensors for a CUDA package
        except RuntimeError as exc:
            print("RAISED: " + str(exc))
    """, env=clean_env(AOTI_DEBUG_CHECK_INPUTS="1"), check=False, timeout=RUN_TIMEOUT)
    assert "RAISED: " in proc.stdout, proc.stdout + proc.stderr
    problems = proc.stdout.split("RAISED: ", 1)[1].rstrip("\n").split("\n")
    assert problems[0] == "aoti-debug: the inputs of model 'scorer' do not match what it was compiled for:"
    assert [re.sub(r"cuda:0\b", "cuda", p) for p in problems[1:]] == [
        "  x.device is cpu, expected cuda", "  bias.device is cpu, expected cuda"], problems


def test_gpu_log_agrees_with_the_cpu_log_of_the_same_model(built, built_cpu, tmp_path):
    """aoti-debug diff of a level-5 GPU run against the same model's CPU package: Triton
    kernels against C++ ones, no false alarm."""
    pt2, clean, _ = built
    gpu_log, cpu_log = tmp_path / "gpu.log", tmp_path / "cpu.log"
    assert python_run(pt2, clean, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(gpu_log)).returncode == 0
    cpu = python_run(built_cpu, clean, device="cpu", AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(cpu_log))
    assert cpu.returncode == 0 and "RAISED" not in cpu.stdout, cpu.stdout + cpu.stderr
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main(["diff", {str(cpu_log)!r}, {str(gpu_log)!r}]))
    """, check=False, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DIFFERS" not in proc.stdout
    assert re.search(r"^the logs agree: \d+ aligned launch\(es\) compared", proc.stdout, re.M), proc.stdout


def _dequant_cases(device: str):
    """(operand, the launch's values, dequant spec) on `device`: fp8 scaled per row, and a
    float4 view (its bytes moved as uint8: torch copies no float4) scaled per 16 values."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(64, 32, generator=g) * 40).to(torch.float8_e4m3fn)
    sa = torch.rand(64, 1, generator=g)
    fp4 = torch.randint(0, 256, (16, 16), generator=g, dtype=torch.uint8)
    sb = (torch.rand(16, 1, generator=g) * 4).to(torch.float8_e4m3fn)
    fp4 = fp4.to(device).view(torch.float4_e2m1fn_x2)[:, 2:10]   # 16 values a row: one block
    a, sa, sb = a.to(device), sa.to(device), sb.to(device)
    return [(a, [a, sa], "1 -1 rowwise 0 0 1 scale_a (rowwise)"),
            (fp4, [fp4, sb], "1 -1 block 16 0 1 scale_a (block 1x16)")]


def test_gpu_dequantized_statistics_of_device_operands_are_the_cpus():
    """The Python runtime's dequantized lines of CUDA operands and scales (read from their
    host views, stats.host_view) are those of the same tensors on the CPU, line for line."""
    from aoti_debug.runtime import format as fmt
    for (t, values, spec), (ct, cvalues, _) in zip(_dequant_cases("cuda"), _dequant_cases("cpu")):
        cpu = fmt.dequant_lines(ct, spec, cvalues, 3)
        assert [line.split("=")[0].strip() for line in cpu] == [
            "scaled_by", "dequant_min", "dequant_max", "dequant_mean", "dequant_nan_count", "dequant_inf_count"]
        assert fmt.dequant_lines(t, spec, values, 3) == cpu
