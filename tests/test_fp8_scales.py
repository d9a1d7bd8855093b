"""Scales (docs/log-format.md 3.2, docs/checks.md "Bad scales"): a tensor a kernel reads as
its op's scale (_scaled_mm's scale_a, scale_b, scale_result) gets zero and subnormal counts
at level 5, written alike by both runtimes, and the NaN check names a zero, NaN or Inf one
at the launch that reads it; tests/models.py's Fp8Linear compiled with AOTI (the shared
package) and with torch.compile."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from aoti_debug.analysis import load
from aoti_debug.native import core as _native
from aoti_debug.runtime import format as pyfmt
from aoti_debug.analysis.mask import mask
from conftest import PLANTED, TESTS, WRITER, clean_env, raised, records, run_package, run_python
from models import fp8_inputs, line_of, seeded
from test_eager_reference import diff_cli

SCALED_MM = "aoti_torch_cpu__scaled_mm_out"


@pytest.fixture(scope="module")
def native():
    assert _native.lib() is not None
    return _native


@pytest.fixture(scope="module")
def fp8(packages):
    return packages.get("fp8", **PLANTED)


def scale_corpus():
    tiny32 = torch.finfo(torch.float32).smallest_normal
    yield torch.tensor(0.05)
    yield torch.tensor([0.0, -0.0, 1e-40, -1e-39, tiny32, math.nan, math.inf, 2.0])
    yield torch.tensor([[0.0, 3e-45], [1.0, -math.inf]]).t()          # strided
    yield torch.tensor([0.0, 1e-5, 6.2e-5, 1.0, math.nan]).half()      # 1e-5: subnormal in float16
    yield torch.tensor([0.0, 1e-39, 1.0]).bfloat16()
    yield torch.tensor([0.0, 1e-310, 1.0], dtype=torch.float64)
    yield torch.tensor([0.0, 0.001953125, 0.015625, 448.0, math.nan]).to(torch.float8_e4m3fn)
    yield torch.tensor([0.0, 1.5e-5, 1.0, math.inf]).to(torch.float8_e5m2)[::2]
    yield torch.tensor([2.0 ** -127, 1.0, math.nan]).to(torch.float8_e8m0fnu)
    yield torch.zeros(0)
    yield torch.tensor([0, 3], dtype=torch.int32)


def test_scale_lines_match_between_runtimes(native):
    """The zero and subnormal counts of scales of every floating format, strided views,
    NaN and Inf beside them (neither a zero nor a subnormal): format.scale_lines and the
    C++ shim's scale_lines write the same lines; no counts for an empty or integer tensor."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensors = list(scale_corpus())
    got = [native.render_scale_lines(t, "scale_b", 6) for t in tensors]
    assert got == ["\n".join(pyfmt.scale_lines(t, "scale_b", 3)) + "\n" for t in tensors]
    counts = [tuple(int(line.rpartition("=")[2]) for line in text.splitlines()[1:]) for text in got]
    assert counts == [(0, 0), (2, 2), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 0), (0, 0), (), ()]
    assert got[0] == "      scale=scale_b\n      zero_count=0\n      subnormal_count=0\n"


def scale_block(t, scale):
    """A scale's Tensor block at level 5 as format.py writes it, its scale lines before `)`."""
    lines = pyfmt.tensor_block(t, 5, 2)
    return "\n".join(lines[:-1] + pyfmt.scale_lines(t, scale, 3) + lines[-1:]) + "\n"


def test_level_5_shows_each_scaled_mm_scale_with_its_counts(fp8, tmp_path):
    """Each _scaled_mm launch's scales (fc1's static input scale and weight scale, both
    constants; fc2's per-row activation scale written by the launch before, its per-row
    weight scale) are marked with the schema argument they are passed as and their zero and
    subnormal counts, each block as format.py writes the eager tensor; nothing else is."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="models.fp8_inputs()", AOTI_DEBUG_LOGDEST=str(log))
    assert "OUTPUT" in proc.stdout
    text = log.read_text()
    launches = [la for la in load.read(str(log)).launches if la.start.name == SCALED_MM]
    assert [[(i.name, i.value.scale, i.value.scale_counts()) for i in la.inputs if i.value.scale]
            for la in launches] == [
        [("constant3", "scale_a", {"zero_count": 0, "subnormal_count": 0}),
         ("constant4", "scale_b", {"zero_count": 0, "subnormal_count": 0})],
        [("buf4", "scale_a", {"zero_count": 0, "subnormal_count": 0}),
         ("w2_scale", "scale_b", {"zero_count": 0, "subnormal_count": 0})]]
    m, _, _ = seeded("fp8")
    (x,) = fp8_inputs()
    h = torch.relu(torch._scaled_mm((x / m.x_scale).to(torch.float8_e4m3fn), m.w1, scale_a=m.x_scale,
                                    scale_b=m.w1_scale, out_dtype=torch.float32))
    h_scale = h.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448
    for name, t, scale in [("constant3", m.x_scale, "scale_a"), ("constant4", m.w1_scale, "scale_b"),
                           ("buf4", h_scale, "scale_a"), ("w2_scale", m.w2_scale, "scale_b")]:
        assert f"  in {name}:\n{scale_block(t, scale)}" in text
    assert text.count("      scale=") == 4 and text.count("      zero_count=") == 4


# the package keeps fc1's weight scale as its constant `constant4`
ZEROED_W1_SCALE = ("(m.load_constants({{'constant4': torch.zeros(())}}, check_full_update=False), "
                   "models.fp8_inputs())[1]")


def test_a_zeroed_weight_scale_shows_as_a_zero_scale_not_as_nan(fp8, tmp_path):
    """fc1's weight scale zeroed through the package's constants, the NaN check off: no NaN
    or Inf anywhere and the output is all zeros; the record of the launch that reads it says
    which scale it is and that it is zero."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs=ZEROED_W1_SCALE, AOTI_DEBUG_LOGDEST=str(log),
                       AOTI_DEBUG_NAN_CHECK="off")
    assert "RAISED" not in proc.stdout and "OUTPUT (4, 8) 0.0 " in proc.stdout
    fc1 = next(la for la in load.read(str(log)).launches if la.start.name == SCALED_MM)
    got = {i.name: (i.value.scale, i.value.scale_counts()) for i in fc1.inputs if i.value.scale}
    assert got == {"constant3": ("scale_a", {"zero_count": 0, "subnormal_count": 0}),
                   "constant4": ("scale_b", {"zero_count": 1, "subnormal_count": 0})}
    assert f"  in constant4:\n{scale_block(torch.zeros(()), 'scale_b')}" in log.read_text()
    assert scale_origin("fp8", log, "scale_b", "constant4", line_of("fp8.fc1"), None, []) == 1


def scale_origin(model, log, scale, name, where, writer, notes):
    """`aoti-debug nan-origin LOG` on a level-5 log whose only finding is a zero scale read by
    launch 2: the finding, named at the launch, kernel, line (and module), the scale argument,
    the launch that wrote it (`writer`, as the NaN check's note says) and the check's `notes`,
    never "no NaN/Inf" alone; returns the exit status."""
    parsed = load.read(str(log))
    launch = next(la for la in parsed.launches if la.ident == f"{model}:1.2")
    [tensor] = [i.value for i in launch.inputs if i.name == name]
    code, out, err = diff_cli("nan-origin", str(log))
    assert err == ""
    assert out == ([
        f"bad scale: launch {model}:1.2 {SCALED_MM} (pid {launch.start.pid}, {launch.start.where})",
        f"  source: {where}",
        f"  nodes:  {', '.join(launch.start.origin.nodes)}",
        f"  scale:  {scale} {name} holding 1 zero, 0 NaN and 0 Inf: {tensor.summary()}"]
        + ([f"  written by: {writer}"] if writer else []) + [f"  runtime note: {n}" for n in notes] + [
        "a bad scale is the origin of what this launch writes, not its arithmetic (a zero turns it into "
        f"zeros); no launch wrote NaN/Inf ({len(parsed.launches)} launches in the log)"]), out
    return code


@pytest.mark.python_writer
def test_torch_compile_writes_the_scales_blocks_as_aoti_does(fp8, aoti_cache, tmp_path):
    """The Python runtime (torch.compile's wrapper), fc1's weight scale zeroed: each scale's
    block is the AOTI run's, byte for byte (the model's names for its buffers, the package's
    constant names aside), and so is each operand's with its dequantized statistics: fc1's
    weight all zero once scaled, and so fc2's input."""
    aoti_log, py_log = tmp_path / "aoti.txt", tmp_path / "py.txt"
    run_package(fp8, "fp8", inputs=ZEROED_W1_SCALE, AOTI_DEBUG_LOGDEST=str(aoti_log), AOTI_DEBUG_NAN_CHECK="off")
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, _, _ = models.seeded("fp8")
        model.w1_scale.zero_()
        with torch.no_grad():
            print("SUM", float(torch.compile(model)(*models.fp8_inputs()).sum()))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="5",
                       AOTI_DEBUG_LOGDEST=str(py_log)))
    assert "SUM 0.0" in proc.stdout

    def scales(path, names):
        blocks = []
        for la in load.read(str(path)).launches:
            blocks += [(names.get(i.name, i.name), i.value.fields) for i in la.inputs if i.value.scale]
        return blocks
    py = scales(py_log, {})
    assert py == scales(aoti_log, {"constant3": "x_scale", "constant4": "w1_scale"})
    assert [(name, f["scale"], f["zero_count"]) for name, f in py] == [
        ("x_scale", "scale_a", "0"), ("w1_scale", "scale_b", "1"), ("buf4", "scale_a", "0"),
        ("w2_scale", "scale_b", "0")]

    def operands(path):
        return [i.value.fields for la in load.read(str(path)).launches for i in la.inputs if i.value.scaled_by]
    aoti_operands = operands(aoti_log)
    assert [(f["scaled_by"], f["dequant_max"]) for f in aoti_operands] == [
        ("scale_a (tensorwise)", "2.800000"), ("scale_b (tensorwise)", "0.000000"),
        ("scale_a (rowwise)", "0.000000"), ("scale_b (rowwise)", "0.757535")]
    if WRITER == "python":
        # the pure-Python writer has no dequantized pass: it says so in their place (section 3.3)
        aoti_operands = [{**{k: v for k, v in f.items() if not k.startswith("dequant_")},
                          "dequant": "skipped (no compiled core)"} for f in aoti_operands]
    # each operand's block, its dequantized statistics included (section 3.3), as AOTI's
    assert operands(py_log) == aoti_operands


def zero_scale_message(model, source, name, constant):
    return (f"launch {model}:1.2 {SCALED_MM} (source {source}) read scale_b {name} holding 1 zero, 0 NaN and "
            "0 Inf (first at flat index 0); a bad scale is the origin of what this launch writes, not its "
            "arithmetic" + (f"; {name} is one of the artifact's constants" if constant else ""))


def test_the_nan_check_names_a_zero_scale_at_the_launch_that_reads_it(fp8, tmp_path):
    """The package's NaN check (raise:naninf) with fc1's weight scale zeroed: nothing turns
    NaN, yet the check raises at the _scaled_mm launch that reads the scale, naming it, the
    schema argument and that it is one of the artifact's constants; the same package with its
    scales intact passes."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs=ZEROED_W1_SCALE, AOTI_DEBUG_LOGDEST=str(log))
    source = next(la.start.origin.source for la in load.read(str(log)).launches if la.ident == "fp8:1.2")
    assert source == line_of("fp8.fc1")      # the line the call starts on
    assert raised(proc) == "aoti-debug NaN check: " + zero_scale_message("fp8", source, "constant4", True)
    assert "OUTPUT" in run_package(fp8, "fp8", inputs="models.fp8_inputs()").stdout


@pytest.mark.python_writer
def test_torch_compile_names_a_zero_scale_in_the_aoti_runs_words(aoti_cache, tmp_path):
    """The Python runtime's NaN check (warn:naninf), fc1's weight scale zeroed: one note at
    the _scaled_mm launch naming w1_scale (a model buffer passed in, not a constant) in the
    words of the C++ shim's message above, then the run's summary, which says a zero scale
    was found (not NaN/Inf); the output is all zeros."""
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, _, _ = models.seeded("fp8")
        model.w1_scale.zero_()
        with torch.no_grad():
            print("SUM", float(torch.compile(model)(*models.fp8_inputs()).sum()))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="3",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGDEST=str(log)))
    assert "SUM 0.0" in proc.stdout
    notes = [r.split("\n", 1)[1] for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert notes == [f"  {zero_scale_message('model', line_of('fp8.fc1'), 'w1_scale', False)}\n",
                     f"  run 1: zero scales in 1 launch: {SCALED_MM} x1\n"]


class _Buffer:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class _ExternNode:
    """What scale_buffers reads of an extern kernel's IR node: its op, FX node and inputs."""

    def __init__(self, op, args, kwargs, inputs):
        import types
        self.op_overload = op
        self.origin_node = types.SimpleNamespace(args=args, kwargs=kwargs)
        self.inputs = [_Buffer(n) for n in inputs]


def test_scale_buffers_follow_the_schema_with_absent_optionals_left_out():
    """The scales of _scaled_mm (bias present or not, scale_result given), of the block-scaled
    _scaled_mm_v2 (a list of scales per operand) and of _scaled_grouped_mm (offs before them
    in its inputs only when given); an IR node whose inputs outnumber what the FX node passes
    is not guessed at; an op without scale arguments has none."""
    from aoti_debug.codegen_patches.ir_plan import scale_buffers
    aten = torch.ops.aten
    mm = aten._scaled_mm.out
    assert scale_buffers(_ExternNode(mm, ("a", "b"), {"scale_a": "sa", "scale_b": "sb"},
                                     ["buf0", "w", "c3", "c4"])) == {"c3": "scale_a", "c4": "scale_b"}
    assert scale_buffers(_ExternNode(mm, ("a", "b", "sa", "sb", None, "sr"), {},
                                     ["buf0", "w", "c3", "c4", "buf9"])) == {
        "c3": "scale_a", "c4": "scale_b", "buf9": "scale_result"}
    # tuned _scaled_mm's inputs stop at bias: scale_result is not among them
    assert scale_buffers(_ExternNode(mm, ("a", "b", "sa", "sb", "bias", "sr"), {},
                                     ["buf0", "w", "c3", "c4", "c5"])) == {"c3": "scale_a", "c4": "scale_b"}
    v2 = aten._scaled_mm_v2.default
    assert scale_buffers(_ExternNode(v2, ("a", "b", ["sa0", "sa1"]), {"scale_b": ["sb0"]},
                                     ["x", "w", "s0", "s1", "t0"])) == {"s0": "scale_a", "s1": "scale_a",
                                                                        "t0": "scale_b"}
    grouped = aten._scaled_grouped_mm.default
    assert scale_buffers(_ExternNode(grouped, ("a", "b", "sa", "sb", "offs"), {},
                                     ["x", "w", "s", "t", "o"])) == {"s": "scale_a", "t": "scale_b"}
    assert scale_buffers(_ExternNode(mm, ("a", "b", "sa", "sb"), {}, ["x", "w", "s", "t", "extra"])) == {}
    assert scale_buffers(_ExternNode(aten.mm.out, ("a", "b"), {}, ["x", "w"])) == {}


# -- a scale computed in the model (docs/checks.md "Bad scales") ----------------------------

@pytest.fixture(scope="module")
def fp8_dynamic(packages):
    return packages.get("fp8_dynamic", **PLANTED)


ZERO_INPUT = "(torch.zeros(4, 32),)"


def computed_scale_message(model, log):
    """The finding at fp8_dynamic's _scaled_mm (launch 2) of an all-zero input: its scale_a,
    amax / 448 computed by launch 1, is zero; the message names launch 1 as its writer, with
    the line and module of the scale, in the words of `log`'s launches."""
    launches = {la.ident: la for la in load.read(str(log)).launches}
    writer = launches[f"{model}:1.1"].start.name
    [scale] = [i.name for i in launches[f"{model}:1.2"].inputs if i.value.scale == "scale_a"]
    assert writer.startswith("cpp_fused_") and launches[f"{model}:1.2"].start.name == SCALED_MM
    return (f"launch {model}:1.2 {SCALED_MM} (source {line_of('fp8_dynamic.mm')}, module proj) read scale_a "
            f"{scale} holding 1 zero, 0 NaN and 0 Inf (first at flat index 0); a bad scale is the origin of what "
            f"this launch writes, not its arithmetic; {scale} was last written by launch {model}:1.1 {writer} "
            f"(source {line_of('fp8_dynamic.scale')}, module proj)")


def computed_scale_origin(model, log, message):
    """nan-origin on a level-5 log of fp8_dynamic's computed zero scale (`message`, the NaN
    check's note): the scale, proj's line and module, and the launch that wrote it."""
    scale = message.split(" read scale_a ")[1].split()[0]
    return scale_origin(model, log, "scale_a", scale, f"{line_of('fp8_dynamic.mm')}, module proj",
                        message.rpartition(" was last written by ")[2], [message])


def nan_notes(log):
    return [r.split("\n", 1)[1] for r in records(mask(log.read_text())) if " note - nan-check" in r]


def test_a_computed_zero_scale_names_the_launch_that_wrote_it(fp8_dynamic, tmp_path):
    """The package (raise:naninf) on an all-zero input: the per-tensor activation scale
    amax / 448 is zero; the check raises at the _scaled_mm launch that reads it, names the
    module, and names the launch, kernel, line and module that computed it.  Under warn the
    same note, then a summary that says a zero scale was found, not NaN/Inf.  With the
    check off no note names the writer, and nan-origin names it from the level-5 records
    (the launch before whose launch-end holds the buffer), in the check's own words; where
    the log lacks a launch between the two (renumbered here, as a kernel filter leaves a
    gap), that launch may have written it: no writer named."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8_dynamic, "fp8_dynamic", inputs=ZERO_INPUT, AOTI_DEBUG_LOGDEST=str(log))
    message = computed_scale_message("fp8_dynamic", log)
    assert raised(proc) == "aoti-debug NaN check: " + message
    warned = tmp_path / "warn.txt"
    proc = run_package(fp8_dynamic, "fp8_dynamic", inputs=ZERO_INPUT, AOTI_DEBUG_LOGDEST=str(warned),
                       AOTI_DEBUG_NAN_CHECK="warn:naninf")
    assert "OUTPUT (4, 8) 0.0 " in proc.stdout
    assert nan_notes(warned) == [f"  {message}\n", f"  run 1: zero scales in 1 launch: {SCALED_MM} x1\n"]
    assert computed_scale_origin("fp8_dynamic", warned, message) == 1
    unchecked = tmp_path / "off.txt"
    proc = run_package(fp8_dynamic, "fp8_dynamic", inputs=ZERO_INPUT, AOTI_DEBUG_LOGDEST=str(unchecked),
                       AOTI_DEBUG_NAN_CHECK="off")
    assert "OUTPUT (4, 8) 0.0 " in proc.stdout and nan_notes(unchecked) == []
    scale = message.split(" read scale_a ")[1].split()[0]
    where = f"{line_of('fp8_dynamic.mm')}, module proj"
    writer = message.rpartition(" was last written by ")[2]
    assert scale_origin("fp8_dynamic", unchecked, "scale_a", scale, where, writer, []) == 1
    gap = tmp_path / "gap.txt"
    gap.write_text(unchecked.read_text().replace("fp8_dynamic:1.1 ", "fp8_dynamic:1.0 "))
    assert scale_origin("fp8_dynamic", gap, "scale_a", scale, where, None, []) == 1
    assert "OUTPUT" in run_package(fp8_dynamic, "fp8_dynamic").stdout


@pytest.mark.python_writer
def test_torch_compile_names_the_launch_that_wrote_a_computed_scale(aoti_cache, tmp_path):
    """The Python runtime, the same model and all-zero input under torch.compile (warn:naninf):
    the same note in the same words as the C++ shim's, and the same summary."""
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, _, _ = models.seeded("fp8_dynamic")
        with torch.no_grad():
            print("SUM", float(torch.compile(model)(torch.zeros(4, 32)).sum()))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="5",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGDEST=str(log)))
    assert "SUM 0.0" in proc.stdout
    assert nan_notes(log) == [f"  {computed_scale_message('model', log)}\n",
                              f"  run 1: zero scales in 1 launch: {SCALED_MM} x1\n"]
    assert computed_scale_origin("model", log, computed_scale_message("model", log)) == 1


def test_a_nan_amax_names_the_launch_that_computed_the_scale_and_the_summary_both_kinds(fp8, tmp_path):
    """tests/models.py's Fp8Linear with a NaN in its input (the guard off, warn:naninf): the
    NaN spreads through fc1 into fc2's per-row scale, amax / 448 of a row holding NaN.  fc2's
    launch names its NaN scale and the launch that computed it; the summary counts the
    launches that wrote NaN/Inf and, apart, the one that read a NaN scale."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="(models.fp8_inputs()[0].index_put_((torch.tensor(1), torch.tensor(5)), "
                       "torch.tensor(float('nan'))),)", AOTI_DEBUG_LOGDEST=str(log),
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_CHECK_INPUTS="0")
    assert "RAISED" not in proc.stdout
    launches = {la.ident: la.start.name for la in load.read(str(log)).launches}
    assert launches["fp8:1.4"] == SCALED_MM
    scale = next(n for n in nan_notes(log) if " read scale_a " in n)
    assert scale == (f"  launch fp8:1.4 {SCALED_MM} (source {line_of('fp8.fc2')}) read scale_a buf4 holding 0 zero, "
                     "1 NaN and 0 Inf (first at flat index 1); a bad scale is the origin of what this launch writes, "
                     f"not its arithmetic; buf4 was last written by launch fp8:1.3 {launches['fp8:1.3']} "
                     f"(source {line_of('fp8.row_scale')})\n")
    nan_kernels = [launches[f"fp8:1.{k}"] for k in (1, 2, 3, 4)]
    assert nan_notes(log)[-1] == (f"  run 1: NaN/Inf in 4 launches: {nan_kernels[0]} x1, {SCALED_MM} x2, "
                                  f"{nan_kernels[2]} x1; NaN scales in 1 launch: {SCALED_MM} x1\n")


def operand_block(t, scale, layout, kdim, label):
    """An operand's Tensor block at level 5 as format.py writes it, its dequant lines
    (section 3.3) before `)`."""
    lines = pyfmt.tensor_block(t, 5, 2)
    spec = f"1 -1 {layout} 0 0 {kdim} {label}"
    return "\n".join(lines[:-1] + pyfmt.dequant_lines(t, spec, [t, scale], 3) + lines[-1:]) + "\n"


def test_level_5_shows_each_operand_dequantized(fp8, tmp_path):
    """Each _scaled_mm operand of the package (C++ shim) says which scale multiplies it and
    how -- fc1 tensorwise, fc2 rowwise: per row of its input, per column of its (in, out)
    weight -- and the statistics of its values times their scales, each block byte for byte
    as the Python runtime writes the eager tensors, the figures those of the product in
    float64."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="models.fp8_inputs()", AOTI_DEBUG_LOGDEST=str(log))
    assert "OUTPUT" in proc.stdout
    text = log.read_text()
    launches = [la for la in load.read(str(log)).launches if la.start.name == SCALED_MM]
    assert [[(i.name, i.value.scaled_by) for i in la.inputs if i.value.scaled_by] for la in launches] == [
        [("buf0", "scale_a (tensorwise)"), ("w1", "scale_b (tensorwise)")],
        [("buf3", "scale_a (rowwise)"), ("w2", "scale_b (rowwise)")]]
    m, _, _ = seeded("fp8")
    (x,) = fp8_inputs()
    x8 = (x / m.x_scale).to(torch.float8_e4m3fn)
    h = torch.relu(torch._scaled_mm(x8, m.w1, scale_a=m.x_scale, scale_b=m.w1_scale, out_dtype=torch.float32))
    h_scale = h.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448
    h8 = (h / h_scale).to(torch.float8_e4m3fn)
    operands = [("buf0", x8, m.x_scale, "tensorwise", 1, "scale_a (tensorwise)"),
                ("w1", m.w1, m.w1_scale, "tensorwise", 0, "scale_b (tensorwise)"),
                ("buf3", h8, h_scale, "rowwise", 1, "scale_a (rowwise)"),
                ("w2", m.w2, m.w2_scale, "rowwise", 0, "scale_b (rowwise)")]
    for name, t, scale, layout, kdim, label in operands:
        assert f"  in {name}:\n{operand_block(t, scale, layout, kdim, label)}" in text
    got = [i.value.dequant() for la in launches for i in la.inputs if i.value.scaled_by]
    for (name, t, scale, *_), figures in zip(operands, got):
        product = t.double() * scale.double()          # exact: e4m3 times float32
        assert figures == {"dequant_min": float(pyfmt.number(product.min())),
                           "dequant_max": float(pyfmt.number(product.max())),
                           "dequant_mean": float(pyfmt.number(product.mean())),
                           "dequant_nan_count": 0, "dequant_inf_count": 0}, name
    assert got[3]["dequant_max"] != got[2]["dequant_max"]


class _Fx:
    """An FX node argument as dequant_operands reads it: its fake value."""

    def __init__(self, value):
        self.meta = {"val": value}


def _v2(a, b, sa, ra, wa, sb, rb, wb, inputs, contraction=()):
    return _ExternNode(torch.ops.aten._scaled_mm_v2.default,
                       (_Fx(a), _Fx(b), [_Fx(t) for t in sa], ra, wa, [_Fx(t) for t in sb], rb, wb, None, None,
                        list(contraction)), {}, inputs)


def test_dequant_operands_read_each_operands_scale_and_layout():
    """Which scale multiplies each operand and how, from the op's fakes: _scaled_mm
    tensorwise, rowwise and block-scaled (e8m0: 1x32, e4m3: 1x16, both in cuBLAS's tiles,
    sized as torch checks), _scaled_mm_v2 by its recipes and swizzles (NVFP4's tensor-wide
    second scale named); the 1x128 recipes, a swizzled scale of the wrong size, a
    transposed contraction and _scaled_grouped_mm get none."""
    from aoti_debug.codegen_patches.ir_plan import dequant_operands
    from aoti_debug.plan import Dequant
    e4m3, e8m0, fp4 = torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2
    mm = torch.ops.aten._scaled_mm.out
    x, w = torch.empty(256, 64, dtype=e4m3), torch.empty(64, 32, dtype=e4m3)
    one = torch.empty(())

    def v1(sa, sb):
        return dequant_operands(_ExternNode(mm, (_Fx(x), _Fx(w), _Fx(sa), _Fx(sb)), {}, ["x", "w", "sa", "sb"]))
    assert v1(one, one) == {"x": Dequant("sa", "tensorwise", "scale_a (tensorwise)", 1),
                            "w": Dequant("sb", "tensorwise", "scale_b (tensorwise)", 0)}
    assert v1(torch.empty(256, 1), torch.empty(1, 32)) == {
        "x": Dequant("sa", "rowwise", "scale_a (rowwise)", 1), "w": Dequant("sb", "rowwise", "scale_b (rowwise)", 0)}
    # MXFP8: K = 64 -> 2 blocks of 32, padded to 4 columns; rows padded to 128
    assert v1(torch.empty(256 * 4, dtype=e8m0), torch.empty(128 * 4, dtype=e8m0)) == {
        "x": Dequant("sa", "block", "scale_a (block 1x32, swizzled)", 1, 32, True),
        "w": Dequant("sb", "block", "scale_b (block 1x32, swizzled)", 0, 32, True)}
    assert v1(torch.empty(256 * 2, dtype=e8m0), torch.empty(128 * 4, dtype=e8m0)) == {}
    assert v1(torch.empty(256, 1), torch.empty(1, 1)) == {}          # 1x128 / 128x128 and odd: none
    # _scaled_mm_v2, NVFP4: packed (256, 32) bytes = K 64 -> 4 blocks of 16
    a4, b4 = torch.empty(256, 32, dtype=fp4), torch.empty(32, 32, dtype=fp4)
    got = dequant_operands(_v2(a4, b4, [torch.empty(256 * 4, dtype=e4m3), one], [2, 0], [1, 0],
                               [torch.empty(128 * 4, dtype=e4m3), one], [2, 0], [1, 0],
                               ["a", "b", "sa0", "sa1", "sb0", "sb1"]))
    assert got == {"a": Dequant("sa0", "block", "scale_a[0] (block 1x16, swizzled) * scale_a[1] (tensorwise)", 1,
                                16, True, "sa1"),
                   "b": Dequant("sb0", "block", "scale_b[0] (block 1x16, swizzled) * scale_b[1] (tensorwise)", 0,
                                16, True, "sb1")}
    # _scaled_mm_v2, MXFP8 unswizzled: the plain (outer, K / 32) matrix
    got = dequant_operands(_v2(x, w, [torch.empty(256, 2, dtype=e8m0)], [3], [0],
                               [torch.empty(32, 2, dtype=e8m0)], [3], [0], ["x", "w", "sa", "sb"]))
    assert got == {"x": Dequant("sa", "block", "scale_a[0] (block 1x32)", 1, 32, False),
                   "w": Dequant("sb", "block", "scale_b[0] (block 1x32)", 0, 32, False)}
    assert dequant_operands(_v2(x, w, [torch.empty(256, 1)], [1], [], [torch.empty(1, 32)], [1], [],
                                ["x", "w", "sa", "sb"])) == {
        "x": Dequant("sa", "rowwise", "scale_a[0] (rowwise)", 1), "w": Dequant("sb", "rowwise", "scale_b[0] (rowwise)", 0)}
    assert dequant_operands(_v2(x, w, [torch.empty(256, 1)], [4], [], [torch.empty(1, 32)], [4], [],
                                ["x", "w", "sa", "sb"])) == {}           # BlockWise1x128
    assert dequant_operands(_v2(x, w, [one], [0], [], [one], [0], [], ["x", "w", "sa", "sb"],
                                contraction=(0, 1))) == {}
    grouped = torch.ops.aten._scaled_grouped_mm.default
    assert dequant_operands(_ExternNode(grouped, (_Fx(x), _Fx(w), _Fx(one), _Fx(one)), {}, ["x", "w", "s", "t"])) == {}
