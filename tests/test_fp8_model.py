"""A transformers model converted to fp8 by hand, as a user would (tests/fp8_transformers.py:
corpus.py's tiny Llama, every nn.Linear an fp8 linear through torch._scaled_mm), compiled with
AOTI as docs/tutorial.md says (AOTI_DEBUG_COMPILE=all, static input scales calibrated once) and
with torch.compile (dynamic input scales, amax / 448 computed in the graph).  Planted faults
are named by the NaN check, and by `triage`, at the launch, kernel, line and layer (module
path): a zeroed weight scale, an activation that saturates float8_e4m3fn (docs/checks.md,
"fp8 models").  One AOTI compile per session; one torch.compile per test."""

import re
import sys

import pytest

from aoti_debug.analysis import load
from aoti_debug.analysis.mask import mask
from conftest import TESTS, Packages, clean_env, records, run_python, shared_dir
from fp8_transformers import line_of

pytestmark = [pytest.mark.slow, pytest.mark.corpus]

SCALED_MM = "aoti_torch_cpu__scaled_mm_out"
Q_PROJ = "model.model.layers.0.self_attn.q_proj"

# Loads the package, plants a fault through load_constants (`zero`: a weight scale zeroed;
# `scaled`: a weight scale multiplied by 100), runs it on corpus inputs.
RUN = r"""
import sys; sys.path.insert(0, {tests!r})
import torch, corpus, fp8_transformers
m = torch._inductor.aoti_load_package({pt2!r})
model = fp8_transformers.build(static=True)
for key, factor in {faults!r}.items():
    m.load_constants({{key: model.get_buffer(key) * factor}}, check_full_update=False)
try:
    print("OUT", float(m(*corpus.inputs("llama"))[0].abs().sum()))
except RuntimeError as exc:
    print("RAISED: " + str(exc))
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory, aoti_cache):
    packages = Packages(str(shared_dir(tmp_path_factory, "fp8-model-packages")), aoti_cache,
                        module="fp8_transformers")
    return packages.get("llama_fp8_static", AOTI_DEBUG_COMPILE="all")


def script(tmp_path, pt2, faults):
    path = tmp_path / "serve.py"
    path.write_text(RUN.format(tests=TESTS, pt2=pt2, faults=faults))
    return str(path)


def run(tmp_path, pt2, faults, **env):
    proc = run_python(open(script(tmp_path, pt2, faults)).read(), env=clean_env(**env))
    return proc.stdout


def launches(log):
    return {la.ident: la for la in load.read(str(log)).launches}


def zero_scale_message(ident, name, constant):
    return (f"launch {ident} {SCALED_MM} (source {line_of('fp8_transformers.mm')}, module {Q_PROJ}) read scale_b "
            f"{name} holding 64 zero, 0 NaN and 0 Inf (first at flat index 0); a bad scale is the origin of what "
            "this launch writes, not its arithmetic" + (f"; {name} is one of the artifact's constants" if constant else ""))


def test_a_zeroed_weight_scale_is_named_at_its_layer(package, tmp_path):
    """Layer 0's q_proj weight scale zeroed through the package's constants: no NaN anywhere,
    yet the NaN check raises at the _scaled_mm launch of q_proj (the first _scaled_mm of the
    run), naming its line in the conversion, the layer and the constant; unplanted, the run
    passes."""
    log = tmp_path / "log.txt"
    out = run(tmp_path, package, {f"{Q_PROJ}.weight_scale": 0.0}, AOTI_DEBUG_NAN_CHECK="raise:naninf",
              AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log))
    first = next(la.ident for la in launches(log).values() if la.start.name == SCALED_MM)
    assert out.splitlines()[-1] == "RAISED: aoti-debug NaN check: " + zero_scale_message(
        first, "model_model_layers_0_self_attn_q_proj_weight_scale", True)
    assert run(tmp_path, package, {}, AOTI_DEBUG_NAN_CHECK="raise:naninf",
               AOTI_DEBUG_NAN_CHECK_SAT="1").startswith("OUT ")


def test_triage_names_the_zeroed_scale(package, tmp_path):
    """`aoti-debug triage -- python serve.py` on the same fault: the verdict is the bad scale
    (not nan-origin's "no NaN/Inf"), the finding and the run's summary, exit status 1; nan-origin
    on a level-5 log of the same run names the same launch and scale."""
    from test_triage import triage
    code, lines, _ = triage("--out", str(tmp_path / "t"), "--", sys.executable,
                            script(tmp_path, package, {f"{Q_PROJ}.weight_scale": 0.0}))
    assert code == 1
    first = re.search(r"launch (\S+) ", lines[1]).group(1)
    assert lines[:3] == [
        "a bad scale: a launch read a scale holding a zero, NaN or Inf; what it writes is wrong, NaN or not "
        "(docs/checks.md, Bad scales)",
        "  " + zero_scale_message(first, "model_model_layers_0_self_attn_q_proj_weight_scale", True),
        f"  run 1: zero scales in 1 launch: {SCALED_MM} x1"]
    # nan-origin on a level-5 log of the same fault, the check off: the same launch and scale
    from test_eager_reference import diff_cli
    log = tmp_path / "log.txt"
    run(tmp_path, package, {f"{Q_PROJ}.weight_scale": 0.0}, AOTI_DEBUG_NAN_CHECK="off", AOTI_DEBUG_LOGLEVEL="5",
        AOTI_DEBUG_LOGDEST=str(log))
    code, out, err = diff_cli("nan-origin", str(log))
    assert (code, err) == (1, "")
    assert out[0].startswith(f"bad scale: launch {first} {SCALED_MM} (pid "), out
    assert out[1:4:2] == [f"  source: {line_of('fp8_transformers.mm')}, module {Q_PROJ}",
                          "  scale:  scale_b model_model_layers_0_self_attn_q_proj_weight_scale holding 64 zero, "
                          "0 NaN and 0 Inf: " + out[3].split(" Inf: ", 1)[1]], out


def test_a_saturating_activation_is_named_at_its_quantization(package, tmp_path):
    """Layer 1's up_proj weight scale 100 times too large: down_proj's input, quantized with
    its calibrated static scale, saturates float8_e4m3fn (no NaN, no Inf).  With
    AOTI_DEBUG_NAN_CHECK_SAT=1 the check raises at the fused kernel that quantizes it, named at
    the quantizing line and down_proj's module (not at the silu fused before it); without it
    the run passes."""
    faults = {"model.model.layers.1.mlp.up_proj.weight_scale": 100.0}
    log = tmp_path / "log.txt"
    out = run(tmp_path, package, faults, AOTI_DEBUG_NAN_CHECK="raise:naninf", AOTI_DEBUG_NAN_CHECK_SAT="1",
              AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log))
    last = list(launches(log).values())[-1]
    assert last.start.name.startswith("cpp_fused_")
    message = out.splitlines()[-1]
    counts = re.search(r" wrote 0 NaN, 0 Inf and \d+ saturated into buf\d+ \(first at flat index \d+\); ", message)
    assert counts is not None, message
    assert message.replace(counts.group(), " wrote ... ; ") == (
        f"RAISED: aoti-debug NaN check: launch {last.ident} {last.start.name} (source "
        f"{line_of('fp8_transformers.quantize')}, module model.model.layers.1.mlp.down_proj) wrote ... ; "
        "its inputs were finite and unsaturated, so this launch is where they first appear")
    assert run(tmp_path, package, faults, AOTI_DEBUG_NAN_CHECK="raise:naninf").startswith("OUT ")


def test_triage_and_nan_origin_name_the_saturating_activation(package, tmp_path):
    """The saturating fault under `AOTI_DEBUG_NAN_CHECK_SAT=1 aoti-debug triage -- python
    serve.py`: no NaN/Inf, so the verdict is the saturation (not a level-5 run's "no
    NaN/Inf"): the finding, the run's summary naming saturated float8, exit status 1, after
    one run; nan-origin on a level-5 log of the same run names the same launch."""
    from test_triage import triage
    from test_eager_reference import diff_cli
    faults = {"model.model.layers.1.mlp.up_proj.weight_scale": 100.0}
    code, lines, _ = triage("--out", str(tmp_path / "t"), "--", sys.executable, script(tmp_path, package, faults),
                            AOTI_DEBUG_NAN_CHECK_SAT="1")
    assert code == 1, lines
    launch = re.fullmatch(r"  launch (\S+) (cpp_fused_\S+) \(source [^)]*\) wrote 0 NaN, 0 Inf and \d+ saturated into "
                          r"buf\d+ \(first at flat index \d+\); its inputs were finite and unsaturated, so this launch "
                          r"is where they first appear", lines[1])
    assert launch is not None, lines
    assert lines[0] == ("saturated float8: a launch wrote float8 values at the format's largest finite value where "
                        "its inputs held none, an overflow the cast saturated silently; no NaN/Inf (docs/checks.md, "
                        "fp8 models)")
    assert lines[2:4] == [f"  run 1: saturated float8 in 1 launch: {launch.group(2)} x1",
                          f"  more: {tmp_path / 't' / '1-first.log'}"]
    assert sorted(f for f in (tmp_path / "t").iterdir() if f.name.endswith(".cmd.json")) == [
        tmp_path / "t" / "1-first.cmd.json"]
    log = tmp_path / "log.txt"
    run(tmp_path, package, faults, AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_NAN_CHECK_SAT="1",
        AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(log))
    code, out, err = diff_cli("nan-origin", str(log))
    assert (code, err) == (1, "")
    assert out[0].startswith(f"saturated float8 origin: launch {launch.group(1)} {launch.group(2)} (pid "), out
    assert out[1] == f"  source: {line_of('fp8_transformers.quantize')}, module model.model.layers.1.mlp.down_proj"
    assert re.fullmatch(r"\d+ saturated float8 values \(the format's largest finite magnitude\): an overflow the "
                        r"cast saturated silently; no launch wrote NaN/Inf \(\d+ launches in the log\)", out[-1]), out


@pytest.mark.python_writer
def test_torch_compile_names_a_zero_scale_and_the_launch_that_computed_the_next(aoti_cache, tmp_path):
    """torch.compile of the model with dynamic input scales, layer 0's v_proj weight scale
    zeroed (its module buffer), warn:naninf: v_proj's launch is named for its zero weight
    scale; v_proj then writes zeros, so o_proj's input scale, amax / 448 computed in the
    graph, is zero too, and o_proj's launch names the launch that computed it, its line and
    module; the summary counts both kinds of finding.  A second call with layer 0's
    input_layernorm weight zeroed too: q_proj's input scale, computed in the kernel that
    fuses the RMSNorm before it, is zero, and its writer is named at the scale's line and
    q_proj's module, not at the RMSNorm's line that names the fused kernel."""
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, corpus, fp8_transformers
        model = fp8_transformers.build()
        model.get_buffer("model.model.layers.0.self_attn.v_proj.weight_scale").zero_()
        with torch.no_grad():
            compiled = torch.compile(model)
            print("SUM", float(compiled(*corpus.inputs("llama"))[0].abs().sum()))
            model.get_parameter("model.model.layers.0.input_layernorm.weight").zero_()
            compiled(*corpus.inputs("llama"))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="5",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGDEST=str(log)))
    assert "SUM" in proc.stdout
    texts = records(mask(log.read_text()))
    second = next(k for k, r in enumerate(texts) if re.match(r"\[TIMESTAMP\] \[pid PID\] run 2 ", r))
    notes, notes2 = ([r.split("\n", 1)[1][2:-1] for r in part if " note - nan-check" in r]
                     for part in (texts[:second], texts[second:]))
    by_id = launches(log)

    def scale_of(ident, which):
        [name] = [i.name for i in by_id[ident].inputs if i.value.scale == which]
        return name
    q_proj = next(la.ident for la in by_id.values() if la.start.name == SCALED_MM and la.ident.startswith("model:2.")
                  and la.start.origin.module == "model.model.layers.0.self_attn.q_proj")
    assert q_proj == "model:2.2"
    fused = by_id["model:2.1"]
    assert fused.start.origin.module == "model.model.layers.0.input_layernorm"
    assert (f"launch {q_proj} {SCALED_MM} (source {line_of('fp8_transformers.mm')}, module "
            f"model.model.layers.0.self_attn.q_proj) read scale_a {scale_of(q_proj, 'scale_a')} holding 16 zero, "
            "0 NaN and 0 Inf (first at flat index 0); a bad scale is the origin of what this launch writes, not its "
            f"arithmetic; {scale_of(q_proj, 'scale_a')} was last written by launch model:2.1 {fused.start.name} "
            f"(source {line_of('fp8_transformers.scale')}, module model.model.layers.0.self_attn.q_proj)") in notes2

    v_proj = next(la.ident for la in by_id.values() if la.start.name == SCALED_MM
                  and la.start.origin.module == "model.model.layers.0.self_attn.v_proj")
    weight_scale = scale_of(v_proj, "scale_b")
    assert notes[0] == (
        f"launch {v_proj} {SCALED_MM} (source {line_of('fp8_transformers.mm')}, module "
        f"model.model.layers.0.self_attn.v_proj) read scale_b {weight_scale} holding 32 zero, 0 NaN and 0 Inf "
        "(first at flat index 0); a bad scale is the origin of what this launch writes, not its arithmetic")
    o_proj = next(la.ident for la in by_id.values() if la.start.name == SCALED_MM
                  and la.start.origin.module == "model.model.layers.0.self_attn.o_proj")
    rows = scale_of(o_proj, "scale_a")
    writer = f"model:1.{int(o_proj.rpartition('.')[2]) - 1}"
    assert by_id[writer].start.name.startswith("cpp_fused_")
    assert (f"launch {o_proj} {SCALED_MM} (source {line_of('fp8_transformers.mm')}, module "
            f"model.model.layers.0.self_attn.o_proj) read scale_a {rows} holding 16 zero, 0 NaN and 0 Inf "
            "(first at flat index 0); a bad scale is the origin of what this launch writes, not its arithmetic; "
            f"{rows} was last written by launch {writer} {by_id[writer].start.name} (source "
            f"{line_of('fp8_transformers.scale')}, module model.model.layers.0.self_attn.o_proj)") in notes
    assert re.fullmatch(rf"run 1: NaN/Inf in \d+ launches: .*; zero/NaN scales in \d+ launches: {SCALED_MM} x\d+",
                        notes[-1]), notes[-1]
