"""An fp8 model (tests/models.py's Fp8Linear: two torch._scaled_mm linears, per-tensor and
per-row scales) compiled with AOTI and with torch.compile: the float8 operands' statistics
with sat_count (docs/log-format.md 3), and a planted overflow, which float8_e4m3fn
saturates silently, named by the NaN check under AOTI_DEBUG_NAN_CHECK_SAT=1
(docs/checks.md)."""

import re

import pytest
import torch

from aoti_debug.analysis import load
from aoti_debug.analysis.mask import mask
from aoti_debug.runtime import format as pyfmt
from conftest import PLANTED, TESTS, clean_env, raised, records, run_package, run_python
from models import fp8_inputs, line_of, seeded
from test_eager_reference import diff_cli

SCALED_MM = "aoti_torch_cpu__scaled_mm_out"


@pytest.fixture(scope="module")
def fp8(packages):
    return packages.get("fp8", **PLANTED)


def eager_operands(overflow=False):
    """What each _scaled_mm reads, computed eagerly: {label: tensor} of fc1's and fc2's."""
    m, _, _ = seeded("fp8")
    (x,) = fp8_inputs(overflow)
    x8 = (x / m.x_scale).to(torch.float8_e4m3fn)
    h = torch.relu(torch._scaled_mm(x8, m.w1, scale_a=m.x_scale, scale_b=m.w1_scale, out_dtype=torch.float32))
    h8 = (h / (h.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448)).to(torch.float8_e4m3fn)
    return {"buf0": x8, "w1": m.w1}, {"buf3": h8, "w2": m.w2}


def saturated(t):
    return int((t.to(torch.float32).abs() == 448).sum())


def test_level_5_shows_each_scaled_mm_operands_saturation(fp8, tmp_path):
    """Both extern _scaled_mm launches log their float8 operands with sat_count: the weights
    and the per-row activations scaled to their largest magnitude hold their clamps, fc1's
    input none; each block is the one format.py writes for the eager tensor."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="models.fp8_inputs()", AOTI_DEBUG_LOGDEST=str(log))
    assert "RAISED" not in proc.stdout
    launches = [la for la in load.read(str(log)).launches if la.start.name == SCALED_MM]
    assert len(launches) == 2
    text = log.read_text()
    for launch, operands in zip(launches, eager_operands()):
        got = {i.name: i.value for i in launch.inputs if i.value.dtype == "torch.float8_e4m3fn"}
        assert set(got) == set(operands)
        for name, t in operands.items():
            assert got[name].stats["sat_count"] == saturated(t)
            # the eager tensor's block, then its dequantized lines (test_fp8_scales.py checks those)
            block = "\n".join(pyfmt.tensor_block(t, 5, 2)[:-1]) + "\n      scaled_by="
            assert f"  in {name}:\n{block}" in text
    counts = [saturated(t) for ops in eager_operands() for t in ops.values()]
    assert counts[0] == 0 and all(c > 0 for c in counts[1:]), counts


def overflow_message(model, kernel):
    return (f"launch {model}:1.1 {kernel} (source {line_of('fp8.quantize')}) wrote 0 NaN, 0 Inf and 1 "
            "saturated into buf0 (first at flat index 37); its inputs were finite and unsaturated, so "
            "this launch is where they first appear")


def test_a_saturating_overflow_is_named_at_its_launch_and_line_only_when_asked(fp8, tmp_path):
    """x[1, 5] = 40 is 800 in fc1's input scale: float8_e4m3fn makes it 448 with no NaN or Inf.
    AOTI_DEBUG_NAN_CHECK_SAT=1 names the quantizing launch (flat index 1 * 32 + 5); unset,
    the run passes as before."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="models.fp8_inputs(overflow=True)", AOTI_DEBUG_NAN_CHECK_SAT="1",
                       AOTI_DEBUG_LOGDEST=str(log))
    kernel = next(la.start.name for la in load.read(str(log)).launches if la.ident == "fp8:1.1")
    assert kernel.startswith("cpp_fused_")
    assert raised(proc) == "aoti-debug NaN check: " + overflow_message("fp8", kernel)
    notes = [r for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert notes == [f"[TIMESTAMP] [pid PID] note - nan-check\n  {overflow_message('fp8', kernel)}\n"]
    quiet = run_package(fp8, "fp8", inputs="models.fp8_inputs(overflow=True)", AOTI_DEBUG_LOGLEVEL="0")
    assert "RAISED" not in quiet.stdout and quiet.stdout.count("OUTPUT") == 1


def saturation_origin(model, log):
    """`aoti-debug nan-origin LOG` on a level-5 log of the planted overflow, checked under
    AOTI_DEBUG_NAN_CHECK_SAT=1 (warn): no NaN/Inf, so the finding is the saturation, named at
    the quantizing launch, its line and output, never "no NaN/Inf" alone; exit status 1."""
    parsed = load.read(str(log))
    first = next(la for la in parsed.launches if la.ident == f"{model}:1.1")
    [buf0] = [o.value for o in first.outputs if o.name == "buf0"]
    code, out, err = diff_cli("nan-origin", str(log))
    assert (code, err) == (1, ""), out
    assert out == [
        f"saturated float8 origin: launch {model}:1.1 {first.start.name} (pid {first.start.pid}, "
        f"{first.end.where})",
        f"  source: {line_of('fp8.quantize')}",
        f"  nodes:  {', '.join(first.start.origin.nodes)}",
        "  outputs (saturated):",
        f"    out buf0: {buf0.summary()}",
        f"  runtime note: {overflow_message(model, first.start.name)}",
        "1 saturated float8 value (the format's largest finite magnitude): an overflow the cast saturated "
        "silently; "
        f"no launch wrote NaN/Inf ({len(parsed.launches)} launches in the log)",
        f"1 other launch wrote saturated values too: {model}:1.3 "
        + next(la.start.name for la in parsed.launches if la.ident == f"{model}:1.3")]
    assert "sat_count=1" in out[4]


def test_warn_sums_up_saturation_and_nan_origin_names_it(fp8, tmp_path):
    """The package (the C++ shim) under warn:naninf with AOTI_DEBUG_NAN_CHECK_SAT=1 on the
    planted overflow: the quantizing launch's note, then fc2's per-row quantization (one 448
    a row, docs/checks.md), and a summary that names saturated float8, not NaN/Inf; the
    level-5 log's nan-origin names the saturation (saturation_origin)."""
    log = tmp_path / "log.txt"
    proc = run_package(fp8, "fp8", inputs="models.fp8_inputs(overflow=True)", AOTI_DEBUG_NAN_CHECK_SAT="1",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGDEST=str(log))
    assert "RAISED" not in proc.stdout
    kernels = {la.ident: la.start.name for la in load.read(str(log)).launches}
    notes = [r.split("\n", 1)[1] for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert notes[0] == f"  {overflow_message('fp8', kernels['fp8:1.1'])}\n"
    assert notes[1].startswith(f"  launch fp8:1.3 {kernels['fp8:1.3']} (source {line_of('fp8.quantize_rows')}) "
                               "wrote 0 NaN, 0 Inf and "), notes
    assert notes[2:] == [f"  run 1: saturated float8 in 2 launches: {kernels['fp8:1.1']} x1, "
                         f"{kernels['fp8:1.3']} x1\n"]
    saturation_origin("fp8", log)
    page = tmp_path / "report.html"
    code, out, err = diff_cli("report", str(log), "-o", str(page))
    assert (code, out, err) == (0, [f"wrote {page}: 4 launches/calls; saturated float8: fp8:1.1 {kernels['fp8:1.1']}"],
                                "")
    assert '<div class="finding" id="nan-summary"><p>No NaN/Inf, but saturated float8 from ' in page.read_text()
    # a job: this process and a clean one run after it; each process's line says what it holds
    clean = tmp_path / "clean.txt"
    run_package(fp8, "fp8", inputs="models.fp8_inputs()", AOTI_DEBUG_LOGDEST=str(clean))
    code, out, err = diff_cli("nan-origin", str(clean), str(log))
    first = load.read(str(log)).launches[0]
    pid = load.read(str(clean)).launches[0].start.pid
    assert (code, err) == (1, ""), out
    assert out[0].startswith(f"saturated float8 origin: launch fp8:1.1 {kernels['fp8:1.1']} (pid {first.start.pid}, ")
    listed = out.index("2 processes, in the order NaN/Inf appeared (timestamps as written: clocks of one machine):")
    assert out[listed + 1:] == [
        f"  pid {first.start.pid}: no NaN/Inf, but saturated float8 from launch fp8:1.1 {kernels['fp8:1.1']} "
        f"at [{first.end.timestamp}]", f"  pid {pid}: no NaN/Inf in 4 launches"], out


@pytest.mark.python_writer
def test_torch_compile_counts_and_names_saturation_as_aoti_does(aoti_cache, tmp_path):
    """The Python runtime (torch.compile's wrapper), warn mode: the overflow named with the
    AOTI run's words; then fc2's input, quantized per row by its own largest magnitude, holds
    one 448 per row, which the check names too, at the line of its cast into float8: a
    legitimate clamp (docs/checks.md)."""
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, _, _ = models.seeded("fp8")
        with torch.no_grad():
            print("SUM", float(torch.compile(model)(*models.fp8_inputs(overflow=True)).sum()))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="5",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_NAN_CHECK_SAT="1",
                       AOTI_DEBUG_LOGDEST=str(log)))
    assert "SUM" in proc.stdout
    parsed = load.read(str(log))
    kernel = next(la.start.name for la in parsed.launches if la.ident == "model:1.1")
    fc1, fc2 = eager_operands(overflow=True)
    rows = fc2["buf3"].to(torch.float32).abs().reshape(-1) == 448
    scaled = [la for la in parsed.launches if "scaled_mm" in la.start.name and not la.start.name.startswith("cpp_")]
    assert len(scaled) == 2
    got = {i.name: i.value.stats.get("sat_count") for i in scaled[0].inputs}
    assert (got["buf0"], got["w1"]) == (1, saturated(fc1["w1"]))
    quantize_rows = next(la for la in parsed.launches if la.ident == "model:1.3")
    notes = [r.split("\n", 1)[1] for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert notes == [
        f"  {overflow_message('model', kernel)}\n",
        f"  launch model:1.3 {quantize_rows.start.name} (source {line_of('fp8.quantize_rows')}) wrote "
        f"0 NaN, 0 Inf and {int(rows.sum())} saturated into buf3 (first at flat index "
        f"{int(rows.to(torch.uint8).argmax())}); its inputs were finite and unsaturated, so this launch "
        "is where they first appear\n",
        "  run 1: saturated float8 in 2 launches: " + f"{kernel} x1, {quantize_rows.start.name} x1\n"]
    # the launch's line: the division that makes the row scale, the most telling op it fused;
    # its saturated output is named at its own cast into float8 (docs/checks.md)
    assert quantize_rows.start.origin.source == line_of("fp8.row_scale")
    saturation_origin("model", log)


# -- diff against the eager reference (docs/analysis.md, "Values that went through fp8") --

@pytest.fixture(scope="module")
def fp8_logs(fp8, tmp_path_factory):
    """(the package's level-5 log, the eager reference's, the eager reference's of the model
    with fc2's weight scales on the wrong rows)."""
    root = tmp_path_factory.mktemp("fp8-diff")
    aoti, eager, wrong = (str(root / name) for name in ("aoti.log", "eager.log", "wrong.log"))
    run_package(fp8, "fp8", inputs="models.fp8_inputs()", AOTI_DEBUG_LOGDEST=aoti)
    for path, flip in ((eager, False), (wrong, True)):
        run_python(f"""
            import sys; sys.path.insert(0, {TESTS!r})
            import aoti_debug, models
            model, _, _ = models.seeded("fp8")
            if {flip}:
                model.w2_scale.copy_(model.w2_scale.flip(1))
            aoti_debug.eager_log(model, models.fp8_inputs())
        """, env=clean_env(AOTI_DEBUG_LOGDEST=path, AOTI_DEBUG_LOGLEVEL="5"))
    return aoti, eager, wrong


def test_diff_against_the_eager_reference_agrees_bit_for_bit(fp8_logs):
    aoti, eager, _ = fp8_logs
    code, out, err = diff_cli("diff", eager, aoti)
    assert (code, err) == (0, ""), out
    assert [line.split()[:4] for line in out[3:8]] == [
        ["-", "fp8:1.1", "cpp_fused__scaled_mm__to_copy_div_0", "only"],
        ["eager:1.3", "fp8:1.2", "aten._scaled_mm.default", "/"],
        ["eager:1.6", "fp8:1.3", "aten.amax.default", "/"],
        ["eager:1.11", "fp8:1.4", "aten._scaled_mm.default", "/"],
        ["end", "end", "eager", "/"]]
    # bit for bit on the machines tried; within the tolerances on any
    assert all(re.search(r" (identical|ok) +\S", line) for line in out[4:8]), out
    assert out[-1] == "the logs agree: 3 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"
    # its operands hold their 448s on purpose (sat_count > 0) and no check named them: clean
    assert diff_cli("nan-origin", aoti) == (0, ["no NaN/Inf in the 4 launches of the log"], "")


def test_diff_names_the_matmul_whose_weight_scales_are_on_the_wrong_rows(fp8_logs):
    """fc2's fp8 operands are the same on both sides (equal hashes), so its output is judged
    at the tolerances asked for, not at float8_e4m3fn's precision: the scales on the wrong
    rows make fc2 the first divergence, at its line."""
    aoti, _, wrong = fp8_logs
    code, out, err = diff_cli("diff", wrong, aoti)
    assert (code, err) == (1, "")
    first = out.index("first divergence: node _scaled_mm_1: A eager:1.11 aten._scaled_mm.default / "
                      "B fp8:1.4 aoti_torch_cpu__scaled_mm_out")
    assert out[first + 1:first + 3] == [f"  source: {line_of('fp8.fc2')}", "  nodes:  _scaled_mm_1"]
    assert out[first + 3].startswith("  out _scaled_mm_1/buf5 min ")
    assert not any("judged at its precision" in line for line in out), out
