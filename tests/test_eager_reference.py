"""The eager reference (aoti_debug.eager_log: reference.py, runtime/eager.py) and `aoti-debug diff` against it.

Crafted logs check the pairing: each output an AOTI launch holds is compared with the eager
record of that FX node, in the eager run's order.  One real run checks the whole way: the
`scaled` model's eager log against its AOTI artifact, clean and with its custom op swapped."""

import re

import pytest

from aoti_debug.analysis import diff, records
from aoti_debug.cli import main
from conftest import TESTS, clean_env, run_package, run_python
from test_analysis_dumps import LEVEL10
from test_analysis_logs import SRC, LogWriter, T, write_log

# the eager graph comes from Inductor's own front end (lowered_graph.lowered_graph): every release
pytestmark = pytest.mark.torch_matrix


def eager_log(nodes, change=None):
    """An eager reference: one record per node (name, op, line, (min, max, mean))."""
    w = LogWriter(1)
    w.record("run", 1, "eager thread=7 reference=eager", w.items([("in x", T(-1.0, 1.0, 0.0))]))
    for k, (node, op, line, stats) in enumerate(nodes, 1):
        stats = (change or {}).get(node, stats)
        w.record("launch", f"eager:1.{k}", op, [f"  origin: nodes={node} source={SRC}:{line}",
                                                f"  source-line: {SRC}:{line} nodes={node}",
                                                f"  holds: {node}={node}"])
        w.record("launch-end", f"eager:1.{k}", op, w.items([(f"out {node}", T(*stats))]))
    w.run_end(1, "eager", [("out sub", T(*nodes[-1][3]))])
    return w


def aoti_log(launches, end):
    """A build's log: (kernel, nodes, line, {buffer: (held node or "", stats)})."""
    w = LogWriter(2)
    w.record("run", 1, "m thread=8", w.items([("in x", T(-1.0, 1.0, 0.0))]))
    for k, (kernel, nodes, line, outs) in enumerate(launches, 1):
        held = " ".join(f"{buf}={node}" for buf, (node, _) in outs.items() if node)
        w.record("launch", f"m:1.{k}", kernel, [f"  origin: nodes={nodes} source={SRC}:{line}"]
                 + ([f"  holds: {held}"] if held else []))
        w.record("launch-end", f"m:1.{k}", kernel,
                 w.items([(f"out {buf}", T(*stats)) for buf, (_, stats) in outs.items()]))
    w.run_end(1, "m", [("out buf4", T(*end))])
    return w


TANH, ADD, MUL, RELU, SUB = ((-0.5, 0.5, 0.0), (0.5, 1.5, 1.0), (1.5, 4.5, 3.0), (0.0, 4.5, 2.0),
                             (-1.0, 3.5, 1.0))
EAGER = [("tanh", "aten.tanh.default", 11, TANH), ("add", "aten.add.Tensor", 11, ADD),
         ("mul", "aten.mul.Tensor", 12, MUL), ("relu", "aten.relu.default", 13, RELU),
         ("sub", "aten.sub.Tensor", 14, SUB)]


def build(mul=MUL, sub=SUB, relu_first=False, scratch=False):
    """tanh+add fused (holds add), mul an extern kernel, relu and sub fused (each held);
    `relu_first`: the build runs the relu+sub kernel's launch first; `scratch`: a first
    launch whose output holds no node."""
    launches = [("cpp_fused_add_tanh_0", "tanh,add", 11, {"buf0": ("add", ADD)}),
                ("aoti_torch_cpu_mul", "mul", 12, {"buf1": ("mul", mul)}),
                ("cpp_fused_relu_sub_1", "relu,sub", 14, {"buf2": ("relu", RELU), "buf4": ("sub", sub)})]
    if relu_first:
        launches = [launches[2], launches[0], launches[1]]
    if scratch:
        launches.insert(0, ("cpp_fused_copy_2", "-", 10, {"buf9": ("", (0.0, 1.0, 0.5))}))
    return aoti_log(launches, sub)


def cli(capsys, *argv):
    code = main(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


NOTE = ("A is an eager reference: each output is compared with the eager value of the FX node it holds, "
        "in execution order; 1 of its 5 node(s) have no output of the other side holding their value "
        "(fused away inside a kernel, kept in a scratch buffer, or filtered out): not compared")


def test_fused_kernels_pair_with_the_eager_records_of_the_nodes_they_hold(tmp_path, capsys):
    a = write_log(tmp_path, "eager.log", eager_log(EAGER))
    b = write_log(tmp_path, "aoti.log", build())
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (0, "")
    assert out[2:] == [
        "A          B      kernel                                    status  largest delta",
        "eager:1.2  m:1.1  aten.add.Tensor / cpp_fused_add_tanh_0    ok      0",
        "eager:1.3  m:1.2  aten.mul.Tensor / aoti_torch_cpu_mul      ok      0",
        "eager:1.4  m:1.3  aten.relu.default / cpp_fused_relu_sub_1  ok      0",
        "eager:1.5  m:1.3  aten.sub.Tensor / cpp_fused_relu_sub_1    ok      0",
        "end        end    eager / m                                 ok      0",
        NOTE,
        "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"]


def test_the_first_node_in_execution_order_is_named_whatever_order_the_build_ran(tmp_path, capsys):
    # the build runs relu+sub before mul; mul and sub both differ: mul comes first in eager
    a = write_log(tmp_path, "eager.log", eager_log(EAGER))
    b = write_log(tmp_path, "aoti.log", build(mul=(1.5, 4.5, 3.5), sub=(-1.0, 3.5, 1.5), relu_first=True))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (1, "")
    first = out.index("first divergence: node mul: A eager:1.3 aten.mul.Tensor / B m:1.3 aoti_torch_cpu_mul")
    assert out[first + 1:first + 4] == [f"  source: {SRC}:12", "  nodes:  mul",
                                         "  out mul/buf1 mean 3.000000 vs 3.500000 (delta 0.5), allowed 0.00351"]
    assert [line.split()[:3] for line in out[3:8]] == [
        ["eager:1.2", "m:1.2", "aten.add.Tensor"], ["eager:1.3", "m:1.3", "aten.mul.Tensor"],
        ["eager:1.4", "m:1.1", "aten.relu.default"], ["eager:1.5", "m:1.1", "aten.sub.Tensor"],
        ["end", "end", "eager"]]


def test_the_eager_reference_may_be_either_side(tmp_path, capsys):
    a = write_log(tmp_path, "aoti.log", build(sub=(-1.0, 3.5, 1.5)))
    b = write_log(tmp_path, "eager.log", eager_log(EAGER))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (1, "")
    assert "first divergence: node sub: A m:1.3 cpp_fused_relu_sub_1 / B eager:1.5 aten.sub.Tensor" in out
    assert NOTE.replace("A is", "B is") in out


def test_a_launch_holding_no_node_is_left_uncompared_not_blamed(tmp_path, capsys):
    a = write_log(tmp_path, "eager.log", eager_log(EAGER))
    b = write_log(tmp_path, "aoti.log", build(scratch=True))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (0, "")
    assert out[3] == "-          m:1.1  cpp_fused_copy_2                          only in B  -"
    assert "0 launch(es) only in A, 1 only in B (not compared)" in out
    assert out[-1] == "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"


def test_the_run_header_says_reference_eager():
    log = records.parse(eager_log(EAGER).text(), "eager.log")
    run = next(r for r in log.records if r.kind == "run")
    assert (run.name, run.thread, run.reference) == ("eager", 7, "eager")
    plain = records.parse(build().text(), "aoti.log")
    run = next(r for r in plain.records if r.kind == "run")
    assert (run.name, run.thread, run.reference) == ("m", 8, None)
    assert diff.is_reference(log, log.launches) and not diff.is_reference(plain, plain.launches)


# -- the real thing: tests/models.py's `scaled` (tanh+add, a custom op, exp-sub) -----------

@pytest.fixture(scope="module")
def scaled_logs(packages, tmp_path_factory):
    """(eager log, AOTI log, AOTI log with the custom op swapped for a wrong one)."""
    root = tmp_path_factory.mktemp("eager-reference")
    eager = str(root / "eager.log")
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import aoti_debug, models
        model, args, dynamic = models.seeded("scaled")
        aoti_debug.eager_log(model, args, dynamic_shapes=dynamic)
    """, env=clean_env(AOTI_DEBUG_LOGDEST=eager, AOTI_DEBUG_LOGLEVEL="5"))
    pt2 = packages.get("scaled", **LEVEL10)
    clean, swapped = str(root / "aoti.log"), str(root / "swapped.log")
    run_package(pt2, "scaled", AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=clean)
    # the artifact calls the op through the proxy executor: the process's kernel for it runs
    run_package(pt2, "scaled", inputs="(models.fast_scale.register_kernel('cpu')(lambda x: x * 3.5), "
                "models.example({model!r})[1])[1]", AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=swapped)
    return eager, clean, swapped


def diff_cli(*argv):
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main({list(argv)!r}))
    """, env=clean_env(PYTHONPATH=TESTS), check=False)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


@pytest.mark.isa_sensitive    # compiled kernels against eager (within the tolerances)
def test_the_eager_reference_agrees_with_the_artifact(scaled_logs):
    eager, clean, _ = scaled_logs
    text = open(eager).read()
    assert re.search(r"\] run 1 eager thread=\d+ reference=eager\n  in x:\n", text)
    assert [m for m in re.findall(r"\] launch (eager:1\.\d) (\S+)\n  origin: nodes=(\w+)", text)] == [
        ("eager:1.1", "aten.tanh.default", "tanh"), ("eager:1.2", "aten.add.Tensor", "add"),
        ("eager:1.3", "aotid_test.fast_scale.default", "fast_scale"),
        ("eager:1.4", "aten.exp.default", "exp"), ("eager:1.5", "aten.sub.Tensor", "sub")]
    code, out, err = diff_cli("diff", eager, clean)
    assert (code, err) == (0, ""), out
    assert out[-1] == "the logs agree: 2 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"
    assert [line.split()[:3] for line in out[2:7]] == [
        ["A", "B", "kernel"], ["-", "scaled:1.1", "cpp_fused_add_fast_scale_tanh_0"],
        ["eager:1.3", "scaled:1.2", "aotid_test.fast_scale.default"],
        ["eager:1.5", "scaled:1.3", "aten.sub.Tensor"], ["end", "end", "eager"]]


@pytest.mark.isa_sensitive
def test_a_swapped_custom_op_is_the_node_diff_names(scaled_logs):
    import models
    eager, _, swapped = scaled_logs
    code, out, err = diff_cli("diff", eager, swapped)
    assert (code, err) == (1, "")
    first = out.index("first divergence: node fast_scale: A eager:1.3 aotid_test.fast_scale.default / "
                      "B scaled:1.2 aotid_test.fast_scale.default")
    assert out[first + 1:first + 3] == [f"  source: {models.line_of('scaled.op')}", "  nodes:  fast_scale"]


def test_an_eager_record_names_its_module_as_the_artifacts_records_do(tmp_path):
    """The body lines come from the rule the artifact's records use (plan.Site.record_lines):
    `module:` before the source lines, so diff's finding names the layer on either side."""
    import models
    log = tmp_path / "eager.log"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import aoti_debug, models
        model, args, _ = models.seeded("mlp")
        aoti_debug.eager_log(model, args)
    """, env=clean_env(AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_LOGLEVEL="3"))
    heads = re.findall(r"\] launch eager:1\.\d+ aten\.addmm\.default\n((?:  [a-z-]+: .*\n)+)", log.read_text())
    assert heads[0] == ("  origin: nodes=addmm source=" + models.line_of("mlp.fc1") + "\n"
                        "  module: fc1\n"
                        f"  source-line: {models.line_of('mlp.fc1')} nodes=addmm\n"
                        "  holds: addmm=addmm\n"), heads
