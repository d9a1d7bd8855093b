"""A debugger that never points at the wrong place: buffer roles from data
flow (nothing is read before something wrote it), every user line of a fused
kernel, and a launch's nodes being the ops it computes."""

import re
import subprocess
import sys

import pytest

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from conftest import FULL, PLANTED, clean_env, raised, records, run_package, saved_inputs

pytestmark = [pytest.mark.slow, pytest.mark.torch_matrix]


def log_of(tmp_path, pt2, model, name, **env):
    log = tmp_path / name
    run_package(pt2, model, AOTI_DEBUG_LOGDEST=str(log), **env)
    return mask(log.read_text())


def launches(text):
    """[(R.K, kernel, record text)] of the launch records."""
    out = []
    for r in records(text):
        _, _, _, kind, ident, kernel = r.splitlines()[0].split()[:6]
        if kind == "launch":
            out.append((ident, kernel, r))
    return out


def buffers_with_roles(record):
    return re.findall(r"^  (in|out|inout) (buf\d+):", record, re.M)


@pytest.fixture(scope="module")
def block(packages):
    return packages.get("block", **FULL)


@pytest.fixture(scope="module")
def exe():
    return str(runner.build_runner())


# -- roles from data flow ---------------------------------------------------------

_REUSE = re.compile(r"auto (buf\d+) = .*\b(buf\d+)\b.*// reuse$")
_ARGS = re.compile(r"static const aoti_debug::ArgSpec aotid_args_\d+\[\] = \{(.*)\};$")
_SPEC = re.compile(r'\{"(\w+)", aoti_debug::Role::(In|Out|InOut)\}')


def wrapper_source(pt2):
    import zipfile
    with zipfile.ZipFile(pt2) as z:
        name = next(n for n in z.namelist() if n.endswith(".wrapper.cpp"))
        return z.read(name).decode()


@pytest.mark.parametrize("model", ["block", "mlp", "ranked", "mullog"])
def test_no_launch_reads_a_buffer_that_holds_no_value(packages, model):
    """Walk the generated wrapper: a buffer holds a value once a launch wrote it
    (Out/InOut), and a reused buffer holds what the buffer it reuses held; no
    launch may read (In/InOut) a buffer that holds nothing."""
    pt2 = packages.get(model, **(PLANTED if model == "mullog" else FULL))
    holds, reads = set(), 0
    for line in wrapper_source(pt2).splitlines():
        line = line.strip()
        reuse, args = _REUSE.match(line), _ARGS.match(line)
        if reuse:
            new, old = reuse.groups()
            (holds.add if old in holds else holds.discard)(new)
        elif args:
            specs = _SPEC.findall(args.group(1))
            for name, role in specs:
                if name.startswith("buf") and role != "Out":
                    # a second view of one buffer is recorded as buf4_view2 (hooks.record_names)
                    base = re.sub(r"_view\d+$", "", name)
                    assert base in holds, f"{name} is read ({role}) but holds no value: {line}"
                    reads += 1
            holds.update(name for name, role in specs if role != "In")
    assert reads >= 2 and len(holds) >= 3


def test_layer_norm_scratch_buffer_is_an_output_and_records_repeat(tmp_path, block, exe):
    """Inductor's layer-norm kernel stores its row statistics into a buffer and
    reads them back (in_out_ptr); that buffer was written by no earlier launch."""
    first = log_of(tmp_path, block, "block", "one.log", AOTI_DEBUG_LOGLEVEL="5")
    second = log_of(tmp_path, block, "block", "two.log", AOTI_DEBUG_LOGLEVEL="5")
    norm = [r for _, kernel, r in launches(first) if "layer_norm" in kernel]
    assert len(norm) == 2
    for r in norm:
        assert "  inout " not in r and re.search(r"^  out ", r, re.M) is None, r
    assert first == second
    inputs = saved_inputs(tmp_path, "models.example('block')[1]")
    cpp_log = tmp_path / "cpp.log"
    cpp = runner.run_package(block, inputs, env=clean_env(AOTI_DEBUG_LOGDEST=str(cpp_log), AOTI_DEBUG_LOGLEVEL="5"))
    assert cpp.returncode == 0, cpp.stderr
    assert mask(cpp_log.read_text()) == first


def test_an_in_place_update_of_a_written_buffer_stays_inout(tmp_path, packages):
    """mullog's relu and log kernels update addmm's outputs in place: those
    buffers do hold values before the launch."""
    text = log_of(tmp_path, packages.get("mullog", **PLANTED), "mullog", "log.txt",
                  AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_NAN_CHECK="off")
    roles = {kernel: buffers_with_roles(r) for _, kernel, r in launches(text) if kernel.startswith("cpp_fused")}
    assert [[role for role, _ in v] for v in roles.values()] == [["inout"], ["inout"]], roles


# -- every line of a fused kernel ---------------------------------------------------

@pytest.fixture(scope="module")
def mullog(packages):
    return packages.get("mullog", **PLANTED)


def test_fused_kernel_names_the_log_line_and_lists_both_lines(tmp_path, mullog):
    from models import line_of
    text = log_of(tmp_path, mullog, "mullog", "log.txt", AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_NAN_CHECK="off")
    fused = [r for _, kernel, r in launches(text) if "log" in kernel]
    assert len(fused) == 1
    body = fused[0].splitlines()[1:4]
    assert body == [f"  origin: nodes=mul,sub,log source={line_of('mullog.log')}",
                    f"  source-line: {line_of('mullog.mulsub')} nodes=mul,sub",
                    f"  source-line: {line_of('mullog.log')} nodes=log"]


def test_raising_nan_check_and_nan_origin_name_the_log_line(tmp_path, mullog):
    from models import line_of
    proc = run_package(mullog, "mullog")
    message = raised(proc)
    assert re.fullmatch(rf"aoti-debug NaN check: launch mullog:1\.4 cpp_fused_\w+ \(source {re.escape(line_of('mullog.log'))}\) "
                        r"wrote \d+ NaN and \d+ Inf into buf\d+ \(first at flat index \d+\); its inputs were finite, "
                        r"so this launch is where they first appear", message), message
    log = tmp_path / "nan.log"
    run_package(mullog, "mullog", AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_NAN_CHECK="off")
    proc = subprocess.run([sys.executable, "-m", "aoti_debug", "nan-origin", str(log)],
                          capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"NaN/Inf origin: launch mullog:1\.4 cpp_fused_\w+ \(pid \d+, nan\.log:\d+\)", lines[0]), lines
    assert lines[1:4] == [f"  source: {line_of('mullog.log')}", "  nodes:  mul, sub, log",
                          "  candidate ops: log (can make NaN/Inf); then mul, sub"]


# -- a launch's nodes are the ops it computes ----------------------------------------

def test_extern_kernels_list_their_own_op_only(tmp_path, packages):
    text = log_of(tmp_path, packages.get("ranked", **FULL), "ranked", "ranked.log", AOTI_DEBUG_LOGLEVEL="3")
    origins = {kernel: re.search(r"^  origin: nodes=(\S+) ", r, re.M).group(1) for _, kernel, r in launches(text)}
    assert origins["aoti_torch_cpu_cumsum"] == "cumsum"
    assert origins["aoti_torch_cpu_sort_stable"] == "sort"
    text = log_of(tmp_path, packages.get("mullog", **PLANTED), "mullog", "mullog.log", AOTI_DEBUG_LOGLEVEL="3",
                  AOTI_DEBUG_NAN_CHECK="off")
    assert [re.search(r"^  origin: nodes=(\S+) ", r, re.M).group(1) for _, kernel, r in launches(text)
            if kernel == "aoti_torch_cpu_addmm_out"] == ["addmm", "addmm_1"]
    text = log_of(tmp_path, packages.get("block", **FULL), "block", "block.log", AOTI_DEBUG_LOGLEVEL="3")
    sdpa = [r for _, kernel, r in launches(text) if "scaled_dot_product" in kernel]
    assert len(sdpa) == 1
    assert re.search(r"^  origin: nodes=_scaled_dot_product_\w+ source=", sdpa[0], re.M), sdpa[0]



def nodes_per_launch(text):
    return [re.search(r"^  origin: nodes=(\S+) ", r, re.M).group(1) for _, _, r in launches(text)]


def test_each_launch_of_the_tutorial_models_lists_exactly_the_ops_it_computes(tmp_path, packages, mylib_so):
    """Ranked and Gather are the tutorial's two models: every op is listed by
    the one launch that computes it, as nan-origin and the kernel filter need."""
    text = log_of(tmp_path, packages.get("ranked", **FULL), "ranked", "ranked.log", AOTI_DEBUG_LOGLEVEL="3")
    assert nodes_per_launch(text) == ["sigmoid,log", "cumsum", "sort", "mean,sub"]
    # lowering the custom op, Inductor copies relu's result into the layout the
    # op requires and counts the op among that copy's origins (and in its kernel's
    # name); the op runs in the next launch
    gather = packages.get("gather", MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="5")    # test_custom_op's build
    text = log_of(tmp_path, gather, "gather", "gather.log", AOTI_DEBUG_LOGLEVEL="3", MYLIB_SO=mylib_so)
    assert [kernel for _, kernel, _ in launches(text)][2:4] == ["cpp_fused_gather_rows_relu_1",
                                                                "mylib.gather_rows.default"]
    assert nodes_per_launch(text) == ["fc_bias", "addmm", "relu", "gather_rows", "mul,sum_1"]


def test_plan_credits_each_op_to_the_launch_that_runs_it():
    """The rules on Inductor's origins, on a real FX graph: a fused kernel leaves
    out the ops extern launches run; an extern kernel whose op Inductor does not
    name lists the origin nothing else reads, not the producers it inlined."""
    import types
    import torch
    from aoti_debug.codegen_patches import ir_plan as plan

    def f(s):
        return torch.cumsum(torch.log(torch.sigmoid(s)), 1)
    node = {n.name: n for n in torch.fx.symbolic_trace(f).graph.nodes}
    origins = [node["cumsum"], node["log"], node["sigmoid"]]
    copy = types.SimpleNamespace(node=types.SimpleNamespace(origins=origins))
    assert plan.provenance_of_schedule([copy], {node["cumsum"]}).nodes == ("sigmoid", "log")
    assert plan.provenance_of_schedule([copy]).nodes == ("sigmoid", "log", "cumsum")
    unnamed = types.SimpleNamespace(origin_node=None, op_overload=None, origins=origins)
    assert plan.own_fx_nodes(unnamed) == []
    assert plan.provenance_of_ir_node(unnamed).nodes == ("cumsum",)
    named = types.SimpleNamespace(origin_node=node["cumsum"], origins=origins)
    assert plan.own_fx_nodes(named) == [node["cumsum"]]

def test_kernel_filter_follows_the_nodes_a_launch_computes(tmp_path, packages):
    """Selecting by an op selects the launches that compute it, not those fed by it."""
    text = log_of(tmp_path, packages.get("ranked", **FULL), "ranked", "log.txt",
                  AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_KERNELS="sigmoid")
    assert [kernel for _, kernel, _ in launches(text)] == ["cpp_fused_log_sigmoid_0"]


# -- diff compares like with like ------------------------------------------------------

TORCH_COMPILE_LOG = """
import sys; sys.path.insert(0, {tests!r})
import torch, models
model, args, _ = models.seeded({model!r})
torch.compile(model)(*args)     # with autograd on, as in training: the graph keeps what backward needs
"""


def torch_compile_log(tmp_path, model):
    from conftest import TESTS, run_python
    log = tmp_path / f"{model}-compile.log"
    run_python(TORCH_COMPILE_LOG.format(tests=TESTS, model=model), timeout=600,
               env=clean_env(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=log, TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    return log


def cli(*args):
    return subprocess.run([sys.executable, "-m", "aoti_debug", *map(str, args)],
                          capture_output=True, text=True, env=clean_env())


def test_diff_of_torch_compile_and_aoti_pairs_buffers_by_value(tmp_path, block):
    """One build keeps the layer norm's variance in a scratch buffer, the other its
    reciprocal square root: they are not compared with each other."""
    aoti = tmp_path / "aoti.log"
    run_package(block, "block", AOTI_DEBUG_LOGDEST=str(aoti), AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="off")
    compiled = torch_compile_log(tmp_path, "block")
    proc = cli("diff", compiled, aoti)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout.splitlines()
    norm = [r for r in rows if "native_layer_norm" in r]
    assert len(norm) == 2 and all(re.search(r"\bok\b", r) and "not comparable: " in r for r in norm), rows
    assert re.match(r"^end\s+end\s+model / block\s+ok\b", next(r for r in rows if r.startswith("end "))), rows
    assert re.match(r"^(the logs agree|no aligned launch diverges): \d+ aligned launch\(es\) compared", rows[-1]), rows


def test_diff_names_a_perturbed_launch_as_the_first_divergence(tmp_path, block):
    aoti = tmp_path / "aoti.log"
    run_package(block, "block", AOTI_DEBUG_LOGDEST=str(aoti), AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="off")
    text = aoti.read_text()
    heads = [i for i, line in enumerate(text.splitlines()) if " launch-end block:1.4 " in line]
    assert len(heads) == 1
    lines = text.splitlines()
    k = next(i for i in range(heads[0], len(lines)) if lines[i].strip().startswith("mean="))
    lines[k] = lines[k].split("=")[0] + "=123.000000"
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(lines) + "\n")
    proc = cli("diff", aoti, bad)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^first divergence: A block:1\.4 aoti_torch_cpu_addmm_out / B block:1\.4 ", proc.stdout, re.M), proc.stdout
