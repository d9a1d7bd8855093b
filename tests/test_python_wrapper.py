"""torch.compile (Inductor's Python wrapper) instrumented like the AOTI wrapper:
the same records from the Python runtime (aoti_debug/runtime/launches.py), the same
generated code as upstream when nothing is on, bit-identical outputs, and
the compile-time settings in Inductor's FX graph cache key."""

import dataclasses
import json
import re

import pytest

from aoti_debug.analysis.mask import mask
from conftest import LAUNCH, TESTS, WRITER, clean_env, records, run_package, run_python
from textmatch import matches

pytestmark = pytest.mark.torch_matrix
# `python_writer`: the tests that read records and notes the Python runtime wrote, which
# .ci/run runs once more on the pure-Python writer (conftest's AOTID_TEST_WRITER); not
# those of the generated code, the outputs, the dumps, the FX graph cache's key, nor
# those that compare the two writers or need the compiled core.  `launch_path`: the
# tests of the records torch.compile's launch functions write, which .ci/run runs
# once more on launches.py's own (conftest's AOTID_TEST_LAUNCH).

# Compiles a model of models.py (the MLP unless told) with torch.compile in one
# fresh process: once per instrumentation level (each log to its own file), then
# plain; writes the generated source of each compile, the outputs' bytes and
# whether the Python runtime wrote through the compiled core.
DRIVER = r"""
import hashlib, json, os, sys
sys.path.insert(0, {tests!r})
import torch, models
from aoti_debug.runtime import state as runtime
import aoti_debug
import torch._inductor.codecache as codecache
from torch._inductor import config
config.fx_graph_cache = {fx_cache!r}

sources = []
load = codecache.PyCodeCache.load_by_key_path
def capture(key, path, *args, **kwargs):
    with open(path) as f:
        sources.append(f.read())
    return load(key, path, *args, **kwargs)
codecache.PyCodeCache.load_by_key_path = capture

model, args, _ = models.seeded({model!r})
model.requires_grad_(False)   # as in an AOTI artifact, whose weights are constants
out_dir = {out!r}
result = {{}}
for level in {levels!r}:
    torch._dynamo.reset()
    before = len(sources)
    os.environ["AOTI_DEBUG_LOGDEST"] = os.path.join(out_dir, "level%s.log" % level)
    runtime.reset()
    with torch.no_grad():
        if level is None:
            y = torch.compile(model)(*args)
        else:
            with aoti_debug.instrument(level=level, **{kwargs!r}):
                y = torch.compile(model)(*args)
    name = "plain" if level is None else "level%d" % level
    if len(sources) > before:
        with open(os.path.join(out_dir, name + ".py"), "w") as f:
            f.write(sources[-1])
    result[name] = hashlib.sha256(y.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
c = torch._dynamo.utils.counters["inductor"]
result["hit"], result["miss"] = c["fxgraph_cache_hit"], c["fxgraph_cache_miss"]
from aoti_debug.runtime import sink
result["core"] = sink.native() is not None
with open(os.path.join(out_dir, "result.json"), "w") as f:
    json.dump(result, f)
"""


def drive(out, cache, levels, fx_cache=False, prelude="", kwargs=None, model="mlp", **env):
    out.mkdir(parents=True, exist_ok=True)
    code = prelude + "\n" + DRIVER.format(tests=TESTS, out=str(out), levels=list(levels),
                                          fx_cache=fx_cache, kwargs=kwargs or {}, model=model)
    run_python(code, env=clean_env(TORCHINDUCTOR_CACHE_DIR=str(cache), **env), timeout=600)
    return json.loads((out / "result.json").read_text())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, aoti_cache):
    """Levels 1, 3, 5 instrumented, then plain, in one process (patches installed, inactive)."""
    out = tmp_path_factory.mktemp("pywrapper")
    result = drive(out, aoti_cache, [1, 3, 5, None])
    assert result["core"] == (WRITER == "core")     # the writer the session asked for (conftest)
    return out, result


def log(out, level):
    return mask((out / f"level{level}.log").read_text())


@pytest.fixture(scope="module")
def compiled_without_core(tmp_path_factory, aoti_cache):
    """`compiled`'s levels where the compiled core cannot be built (its cache is
    not writable): the Python runtime writes every record through its own writer."""
    out = tmp_path_factory.mktemp("pywrapper-without-core")
    told = out / "core.txt"
    prelude = ("import atexit\nfrom aoti_debug.runtime import sink as _sink\n"
               f"atexit.register(lambda: open({str(told)!r}, 'w').write(str(_sink.native())))")
    (out / "not-a-folder").write_text("")
    result = drive(out, aoti_cache, [1, 3, 5], prelude=prelude,
                   AOTI_DEBUG_CACHE_DIR=str(out / "not-a-folder" / "cache"))
    return out, result, told.read_text()


def headers(text):
    return [r.splitlines()[0] for r in records(text)]


KERNELS = ["aoti_torch_cpu_addmm_out", "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out",
           "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out", "cpp_fused__softmax_1"]
H = "[TIMESTAMP] [pid PID] "
# `compiled` loads one model per level in one process: the second and third are numbered
NAMES = {1: "model", 3: "model#2", 5: "model#3"}


@pytest.mark.launch_path
@pytest.mark.python_writer
def test_level_1_headers_only(compiled):
    out, _ = compiled
    text = log(out, 1)
    assert headers(text) == [H + "run 1 model thread=TID"] + [
        H + f"launch {NAMES[1]}:1.{k} {name}" for k, name in enumerate(KERNELS, 1)]
    assert all(r.count("\n") == 1 for r in records(text))


def expected_records(level):
    """The records the MLP must give, rendered from eager tensors."""
    import torch
    from aoti_debug.runtime import format as fmt
    from models import line_of, seeded
    model, (x,), _ = seeded("mlp")
    model.requires_grad_(False)
    w1, b1 = model.fc1.weight, model.fc1.bias
    w2, b2 = model.fc2.weight, model.fc2.bias
    w3, b3 = model.fc3.weight, model.fc3.bias
    with torch.no_grad():
        h1 = torch.addmm(b1, x, w1.t())
        r1 = torch.relu(h1)
        h2 = torch.addmm(b2, r1, w2.t())
        r2 = torch.relu(h2)
        h3 = torch.addmm(b3, r2, w3.t())
        e = torch.exp(h3 - h3.amax(-1, keepdim=True))
        y = e / e.sum(-1, keepdim=True)

    def rec(kind, ident, name, *items, origin=None):
        # origin: (nodes, line tag, what the outputs hold[, the module running the line]);
        # each launch here computes one line
        head = [f"  origin: nodes={origin[0]} source={line_of(origin[1])}",
                *[f"  module: {m}" for m in origin[3:]],
                f"  source-line: {line_of(origin[1])} nodes={origin[0]}",
                f"  holds: {origin[2]}"] if origin else []
        body = [] if level < 3 else head + [line for label, value in items for line in fmt.item(label, value, level)]
        facts = " thread=TID" if kind == "run" else ""
        ident = f"{NAMES[level]}:{ident}" if kind.startswith("launch") else ident   # `model#2:1.1`
        return H + f"{kind} {ident} {name}{facts}\n" + "".join(l + "\n" for l in body)

    inputs = [("in fc1_weight", w1), ("in fc1_bias", b1), ("in x", x), ("in fc2_weight", w2),
              ("in fc2_bias", b2), ("in fc3_weight", w3), ("in fc3_bias", b3)]
    addmm, relu, softmax = KERNELS[0], KERNELS[1], KERNELS[5]
    return [
        rec("run", "1", NAMES[level], *inputs),
        rec("launch", "1.1", addmm, ("in fc1_bias", b1), ("in x", x), ("in fc1_weight", w1.t()),
            origin=("addmm", "mlp.fc1", "buf0=addmm", "fc1")),
        rec("launch-end", "1.1", addmm, ("out buf0", h1)),
        rec("launch", "1.2", relu, ("inout buf1", h1), origin=("relu", "mlp.fc1", "buf1=relu")),
        rec("launch-end", "1.2", relu, ("inout buf1", r1)),
        rec("launch", "1.3", addmm, ("in fc2_bias", b2), ("in buf1", r1), ("in fc2_weight", w2.t()),
            origin=("addmm_1", "mlp.fc2", "buf2=addmm_1", "fc2")),
        rec("launch-end", "1.3", addmm, ("out buf2", h2)),
        rec("launch", "1.4", relu, ("inout buf3", h2), origin=("relu_1", "mlp.fc2", "buf3=relu_1")),
        rec("launch-end", "1.4", relu, ("inout buf3", r2)),
        rec("launch", "1.5", addmm, ("in fc3_bias", b3), ("in buf3", r2), ("in fc3_weight", w3.t()),
            origin=("addmm_2", "mlp.fc3", "buf4=addmm_2", "fc3")),
        rec("launch-end", "1.5", addmm, ("out buf4", h3)),
        rec("launch", "1.6", softmax, ("in buf4", h3), origin=("amax,sub,exp,sum_1,div", "mlp.fc3", "buf5=exp buf6=div")),
        rec("launch-end", "1.6", softmax, ("out buf5", e), ("out buf6", y)),
        rec("run-end", "1", NAMES[level], ("out buf6", y)),
    ]


@pytest.mark.launch_path
@pytest.mark.python_writer
@pytest.mark.isa_sensitive   # records of compiled kernels against eager tensors
@pytest.mark.parametrize("level", [3, 5])
def test_records_exact(compiled, level):
    out, _ = compiled
    got, want = records(log(out, level)), expected_records(level)
    if level >= 5:
        # the model's inputs are the eager tensors, bit for bit; what the kernels compute may
        # differ from eager in the last bits, which only the content hash shows
        hashes = [re.findall(r"^ +hash=.*$", r, re.M) for r in (got[0], want[0])]
        assert hashes[0] == hashes[1] and len(hashes[0]) == 7
        got, want = ([re.sub(r"^ +hash=.*\n", "", r, flags=re.M) for r in side] for side in (got, want))
        # their statistics agree with eager's to about six digits (textmatch), the rest exactly
        assert got[0] == want[0] and len(got) == len(want)
        for g, w in zip(got, want):
            assert matches(w.splitlines(), g.splitlines()), (w, g)
        return
    assert got == want


def test_outputs_bit_identical_and_code_upstreams_when_off(compiled, tmp_path, aoti_cache):
    out, result = compiled
    assert result["level1"] == result["level3"] == result["level5"] == result["plain"]
    # what a process that never imported aoti-debug generates (FX graph cache off:
    # the code is generated every time, the kernels' binaries come from the cache)
    upstream = drive(tmp_path / "upstream", aoti_cache, [None])
    inert = drive(tmp_path / "inert", aoti_cache, [None], prelude=INERT)
    assert upstream["plain"] == inert["plain"] == result["plain"]
    code = (tmp_path / "upstream" / "plain.py").read_text()
    assert "aotid" not in code and "_aotid_run" in (out / "level1.py").read_text()
    # patches installed, never active: byte for byte
    assert (tmp_path / "inert" / "plain.py").read_text() == code
    # after three instrumented compiles: the same but for Inductor's own graph counter
    aot_id = re.compile(r"^# AOT ID: \['\d+_inference'\]$", re.M)
    after = (out / "plain.py").read_text()
    assert aot_id.search(after) and aot_id.sub("", after) == aot_id.sub("", code)


INERT = """
from aoti_debug import settings
from aoti_debug.codegen_patches import adapter, install
install.restore(install.activate(settings.Settings(level=1)))
assert adapter._originals
"""


@pytest.mark.parametrize("level", [1, 3, 5])
def test_the_python_writer_writes_what_the_compiled_core_writes(compiled, compiled_without_core, level):
    """The two implementations behind the Python runtime's records (the compiled
    core's renderer and sink, and the pure-Python format and writer it falls
    back to) give the same bytes for the same model, and the same outputs."""
    out, result, core = compiled_without_core
    assert core == "None"                     # the run had no core
    assert records(log(out, level)) == records(log(compiled[0], level))
    assert result[f"level{level}"] == compiled[1][f"level{level}"]


def renamed(text, stem, name):
    """`text` with the model instance `stem` named `name` where records name it: a run's
    and a run-end's header (`run 1 mlp`), a launch's id (`launch mlp:1.2`)."""
    head, stem = re.escape(H), re.escape(stem)
    text = re.sub(rf"^({head}run(?:-end)? \d+ ){stem}(?= |$)", rf"\g<1>{name}", text, flags=re.M)
    return re.sub(rf"^({head}launch(?:-end)? ){stem}:", rf"\g<1>{name}:", text, flags=re.M)


@pytest.mark.launch_path
@pytest.mark.python_writer
def test_records_match_the_aoti_path(packages, tmp_path, aoti_cache):
    """One graph compiled by AOTI and by torch.compile (models.py's weights_in: the MLP
    with its weights passed in, inputs of the graph on both paths) gives the same
    records at level 5, every one whole, from the C++ runtime and the Python runtime.
    The one difference is the model's name: an AOTI package is named after its stem,
    torch.compile's model `model`."""
    pt2 = packages.get("weights_in", AOTI_DEBUG_LOGLEVEL="5")
    aoti_log = tmp_path / "aoti.log"
    run_package(pt2, "weights_in", AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(aoti_log))
    drive(tmp_path / "compiled", aoti_cache, [5], model="weights_in")
    aoti = records(renamed(mask(aoti_log.read_text()), "weights_in", "model"))
    py = records(log(tmp_path / "compiled", 5))
    assert headers("".join(py)) == [H + "run 1 model thread=TID"] + [
        H + f"{kind} model:1.{k} {name}" for k, name in enumerate(KERNELS, 1)
        for kind in ("launch", "launch-end")] + [H + "run-end 1 model"]
    assert py[0].count("Tensor(") == 7 and "hash=" in py[0]   # x and the six weights, level 5
    assert aoti == py


@pytest.fixture(scope="module")
def fx_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fx-cache")


@pytest.mark.parametrize("change", [dict(level=5), dict(kernels=("*relu*",)), dict(nan_check="warn"),
                                    dict(check_inputs=True), dict(memcheck="warn"), dict(blackbox=64),
                                    dict(compile="all")])
def test_the_cache_key_holds_every_compiled_setting(change):
    """Two compiles that differ in one compiled-in setting never share an FX
    graph cache entry (the black box's launch count was once left out of it)."""
    from aoti_debug.codegen_patches.patch_python_wrapper import settings_pass
    from aoti_debug.settings import Settings, _parse_nan
    if "nan_check" in change:
        change = dict(nan_check=_parse_nan(change["nan_check"]))
    base = Settings(level=1)
    changed = dataclasses.replace(base, **change).compiled()
    assert settings_pass(changed, None).uuid() != settings_pass(base, None).uuid()
    assert settings_pass(base, None).uuid() == settings_pass(Settings(level=1), None).uuid()


def test_the_cache_key_holds_every_file_the_wrapper_comes_from(tmp_path, monkeypatch):
    """A wrapper served from Inductor's FX graph cache was written by the
    aoti-debug that compiled it and calls that one's runtime: after an upgrade
    (any file of the code generator, the runtime, the native layer, the plan or
    the settings changing), the key changes, and a stale wrapper is never run."""
    import os
    import aoti_debug
    from aoti_debug.codegen_patches import patch_python_wrapper as ppw
    from aoti_debug.settings import Settings
    sources = ppw.wrapper_sources()
    root = os.path.dirname(aoti_debug.__file__)
    names = {os.path.relpath(os.path.realpath(p), os.path.realpath(root)) for p in sources}
    for expected in ("runtime/format.py", "runtime/state.py", "runtime/launches.py",
                     "native/launch_ext.py", "native/core.py", "plan.py", "settings.py", "_version.py"):
        assert expected in names, expected
    emit = [p for p in sources if p.endswith(os.sep + "python_emit.py")]
    fx_ops = [p for p in sources if p.endswith(os.sep + "fx_ops.py")]
    assert len(emit) == 1 and len(fx_ops) == 1
    # every one of them counts: one byte changed in any copy changes the key
    copies = []
    for i, path in enumerate(sources):
        copy = tmp_path / f"{i}-{os.path.basename(path)}"
        copy.write_bytes(open(path, "rb").read())
        copies.append(str(copy))
    monkeypatch.setattr(ppw, "wrapper_sources", lambda: list(copies))
    settings = Settings(level=3).compiled()
    before = ppw.settings_pass(settings, None).uuid()
    for copy in (copies[0], copies[len(copies) // 2], copies[-1]):
        original = open(copy, "rb").read()
        open(copy, "ab").write(b"#")
        assert ppw.settings_pass(settings, None).uuid() != before, copy
        open(copy, "wb").write(original)
        assert ppw.settings_pass(settings, None).uuid() == before


def test_fx_graph_cache_knows_the_settings(tmp_path, fx_cache_dir):
    cache = fx_cache_dir
    first = drive(tmp_path / "p1", cache, [3, 5, None], fx_cache=True)
    second = drive(tmp_path / "p2", cache, [3, 5, None], fx_cache=True)
    # three different artifacts, then each of them served from the cache
    assert (first["hit"], first["miss"]) == (0, 3)
    assert (second["hit"], second["miss"]) == (3, 0)
    for level in (3, 5):
        assert records(log(tmp_path / "p1", level)) == records(log(tmp_path / "p2", level))
    assert "nan_count" in log(tmp_path / "p2", 5) and "nan_count" not in log(tmp_path / "p2", 3)
    assert not (tmp_path / "p2" / "levelNone.log").exists()


# The same model in a file of its own, `pad` blank lines down, compiled at level 3.
MOVED = r"""
import sys, torch, aoti_debug
sys.path.insert(0, {folder!r})
import moved
with aoti_debug.instrument(level=3):
    torch.compile(moved.Doubler())(torch.ones(4))
"""


def test_fx_graph_cache_never_serves_another_copys_lines(tmp_path):
    """Inductor's cache key leaves stack traces out; the wrapper names the user's
    lines: a graph cached from one copy of the source (another checkout, an
    edit that moved the model) must not name that copy's lines."""
    cache = tmp_path / "cache"
    sources = []
    for pad in (0, 7):
        folder = tmp_path / f"copy{pad}"
        folder.mkdir()
        (folder / "moved.py").write_text("\n" * pad + "import torch\n\n\nclass Doubler(torch.nn.Module):\n"
                                         "    def forward(self, x):\n        return x * 2.0\n")
        log = folder / "log.txt"
        run_python(MOVED.format(folder=str(folder)),
                   env=clean_env(TORCHINDUCTOR_CACHE_DIR=cache, AOTI_DEBUG_LOGDEST=log))
        sources += re.findall(r"source=(\S+)", log.read_text())
    assert sources == [f"{tmp_path / 'copy0' / 'moved.py'}:6", f"{tmp_path / 'copy7' / 'moved.py'}:13"]


@pytest.mark.launch_path
@pytest.mark.python_writer
def test_run_time_level_and_filter(tmp_path, fx_cache_dir):
    """Run-time variables: AOTI_DEBUG_LOGLEVEL cannot raise the compiled level (one
    note says so); AOTI_DEBUG_KERNELS filters records and keeps the numbers.  The
    compile-time settings are the cache test's level 3 (the filter is cleared for
    the compile, no guards), so the artifact comes from the FX graph cache when that ran first."""
    out = tmp_path / "rt"
    drive(out, fx_cache_dir, [3], fx_cache=True, kwargs={"kernels": "", "check_inputs": False},
          AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_KERNELS="*addmm*", AOTI_DEBUG_SYNC="1",
          AOTI_DEBUG_CHECK_INPUTS="1")
    text = log(out, 3)
    recs = records(text)
    # AOTI_DEBUG_SYNC on the CPU: nothing to wait for, nothing said; guards asked for, none
    # compiled in: the C++ runtime's words (test_native_launch.py)
    assert recs[0] == (H + "note - settings\n  AOTI_DEBUG_LOGLEVEL='10' asks for more than model "
                       "'model' was compiled with (3); using 3. Recompile with "
                       "AOTI_DEBUG_LOGLEVEL=10 (or AOTI_DEBUG_COMPILE=all) to get it.\n"
                       "  AOTI_DEBUG_CHECK_INPUTS='1' asks for more than model 'model' was compiled with "
                       "(0); using 0. Recompile with AOTI_DEBUG_CHECK_INPUTS=1 (or AOTI_DEBUG_COMPILE=all) "
                       "to get it.\n")
    heads = headers(text)[1:]
    assert [h for h in heads if " launch " in h] == [
        H + "launch model:1.1 aoti_torch_cpu_addmm_out", H + "launch model:1.3 aoti_torch_cpu_addmm_out",
        H + "launch model:1.5 aoti_torch_cpu_addmm_out"]
    assert "stats" not in text and "nan_count" not in text


# torch.compile of models.py's Ranked model on an input that underflows
RANKED = r"""
import sys; sys.path.insert(0, {tests!r})
import contextlib, torch, models, aoti_debug
model, _, _ = models.seeded("ranked")
try:
    with torch.no_grad(), {ctx}:
        y = torch.compile(model)(*models.ranked_inputs(True))
    print("NaN", int(y.isnan().sum()))
except RuntimeError as exc:
    print("RAISED: " + str(exc))
"""


def ranked(tmp_path, ctx="contextlib.nullcontext()", **env):
    log = tmp_path / "log.txt"
    proc = run_python(RANKED.format(tests=TESTS, ctx=ctx), timeout=600,
                      env=clean_env(AOTI_DEBUG_LOGDEST=log, TORCHINDUCTOR_FX_GRAPH_CACHE="0", **env))
    notes = [r.split("\n", 1)[1].strip() for r in records(mask(log.read_text())) if "note - nan-check" in r] \
        if log.exists() else []
    # level 0 writes no record: its warnings are stderr lines
    said = "aoti-debug nan-check: "
    notes += [mask(line)[len(said):] for line in proc.stderr.splitlines() if line.startswith(said)]
    return proc.stdout.strip().splitlines()[-1], notes


@pytest.mark.python_writer
def test_nan_checks_name_the_origin_as_the_aoti_artifact_does(tmp_path):
    from models import line_of
    out, notes = ranked(tmp_path, AOTI_DEBUG_NAN_CHECK="raise:naninf")
    assert re.fullmatch(r"RAISED: aoti-debug NaN check: launch model:1\.1 cpp_fused_log_sigmoid_0 \(source "
                        + re.escape(line_of("ranked.log")) + r"\) wrote 0 NaN and 1 Inf into buf0 \(first at "
                        r"flat index 15\); its inputs were finite, so this launch is where they first appear",
                        out), out
    assert notes == []   # level 0: the exception alone says it
    out, notes = ranked(tmp_path, AOTI_DEBUG_NAN_CHECK="raise:naninf", AOTI_DEBUG_LOGLEVEL="1")
    assert notes == [out[len("RAISED: aoti-debug NaN check: "):]]
    # NaN only: -inf passes; the launch that computes -inf - -inf is the origin
    # (Inductor numbers the buffers differently from one release to the next)
    out, _ = ranked(tmp_path, AOTI_DEBUG_NAN_CHECK="raise:nan")
    assert re.match(r"RAISED: aoti-debug NaN check: launch model:1\.4 cpp_fused_mean_sub_1 \(source "
                    + re.escape(line_of('ranked.sub')) + r"\) wrote 3 NaN into buf\d+ \(first at flat index 21\); "
                    r"its inputs held no NaN, so this launch is where NaN first appears", out), out


@pytest.mark.python_writer
def test_nan_warn_notes_every_launch_and_the_run_goes_on(tmp_path):
    out, notes = ranked(tmp_path / "warn", AOTI_DEBUG_NAN_CHECK="warn:naninf")
    assert out == "NaN 3"
    assert len(notes) == 5 and "its inputs were finite" in notes[0]
    assert all("already held NaN/Inf (look earlier)" in n for n in notes[1:4])
    assert re.search(r" into buf\d+\[0\] ", notes[2])   # sort's values, one of the tuple it returns
    assert notes[4] == ("run 1: NaN/Inf in 4 launches: cpp_fused_log_sigmoid_0 x1, torch.ops.aten.cumsum.default x1, "
                        "torch.ops.aten.sort.stable x1, cpp_fused_mean_sub_1 x1")
    # compiled in, switched off at run time: nothing checked, nothing written
    out, notes = ranked(tmp_path / "off", ctx='aoti_debug.instrument(nan_check="raise:naninf")',
                        AOTI_DEBUG_NAN_CHECK="off")
    assert (out, notes) == ("NaN 3", [])
    # compiled in, run-time variable unset: the compiled check runs
    out, _ = ranked(tmp_path / "on", ctx='aoti_debug.instrument(nan_check="raise:naninf")')
    assert out.startswith("RAISED: aoti-debug NaN check: launch model:1.1 cpp_fused_log_sigmoid_0 ")


# torch.compile of models.py's MLP at level 10 into a dump directory
DUMPED = r"""
import sys; sys.path.insert(0, {tests!r})
import torch, models
model, args, _ = models.seeded("mlp")
model.requires_grad_(False)
with torch.no_grad():
    torch.compile(model)(*args)
"""


def test_level_10_dumps_in_the_aoti_layout_and_diff_against_aoti_dumps(tmp_path, packages, capsys):
    import json
    import torch
    from aoti_debug.cli import main
    compiled = tmp_path / "compiled"
    run_python(DUMPED.format(tests=TESTS), timeout=600,
               env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=compiled,
                             AOTI_DEBUG_LOGDEST=tmp_path / "compiled.log", TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    [folder] = [p for p in compiled.iterdir() if p.is_dir()]
    assert re.fullmatch(r"\d+-model-run1", folder.name)
    lines = [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines()]
    assert [e["event"] for e in lines] == ["run"] + ["before", "after"] * 6 + ["run-end"]
    # torch.compile passes the weights as inputs too
    x_at = lines[0]["inputs"].index("x")
    assert len(lines[0]["inputs"]) == 7 and lines[-1]["launches"] == 6
    for e in lines[1:-1]:
        assert e["status"] == ("running" if e["event"] == "before" else "ok") and e["files"]
        for f in e["files"]:
            t = torch.load(folder / f["file"], weights_only=True)
            assert isinstance(t, torch.Tensor) and f["bytes"] == (folder / f["file"]).stat().st_size
    inputs = torch.load(folder / "inputs.pt", weights_only=True)
    assert torch.equal(inputs[x_at], __import__("models").example("mlp")[1][0])
    # the AOTI artifact's dumps of the same model and input agree, element by element
    aoti = tmp_path / "aoti"
    run_package(packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10"), "mlp", AOTI_DEBUG_LOGLEVEL="10",
                AOTI_DEBUG_DUMP_DIR=str(aoti), AOTI_DEBUG_LOGDEST=str(tmp_path / "aoti.log"))
    code = main(["diff", str(compiled), str(aoti)])
    out = capsys.readouterr().out
    assert code == 0, out
    # the same kernels (one Inductor cache) usually give the same bits; within tolerance is enough
    assert ("the dumps agree: 6 aligned launch(es) compared" in out and "element by element" in out) \
        or "A and B are identical bit for bit: the outputs of 6 aligned launch(es)" in out, out
    # nothing to replay without an artifact: said, with what to do instead
    assert main(["replay", "--dir", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"aoti-debug replay: {folder}: this run was recorded from torch.compile, which leaves no artifact "
        "to run again; compare it with another run's dumps with `aoti-debug diff`\n")


# torch.compile of models.py's Viewed model, whose outputs are (h.t(), h[:, 2], h):
# at levels 3 and 5, then at 5 again on an input with a NaN column
VIEWED = r"""
import os, sys; sys.path.insert(0, {tests!r})
import torch, models, aoti_debug
from aoti_debug.runtime import format as fmt, state as runtime
model, (x,), _ = models.seeded("viewed")
model.requires_grad_(False)
for level in (3, 5):
    torch._dynamo.reset()
    os.environ["AOTI_DEBUG_LOGDEST"] = os.path.join({out!r}, "level%d.log" % level)
    runtime.reset()
    with torch.no_grad(), aoti_debug.instrument(level=level, nan_check="raise:nan"):
        compiled = torch.compile(model)
        outs = compiled(x)
        # the record expected, rendered from what the model returned
        with open(os.path.join({out!r}, "expected%d.txt" % level), "w") as f:
            f.write("".join(l + "\n" for o in outs for l in fmt.item("out buf1", o, level)))
        if level == 5:
            try:
                compiled(x.index_fill(1, torch.tensor([3]), float("nan")))
            except RuntimeError as exc:
                print("RAISED: " + str(exc))
"""


@pytest.fixture(scope="module")
def viewed(tmp_path_factory):
    out = tmp_path_factory.mktemp("viewed")
    proc = run_python(VIEWED.format(tests=TESTS, out=str(out)), timeout=600,
                      env=clean_env(TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    return out, proc.stdout


@pytest.mark.python_writer
@pytest.mark.parametrize("level", [3, 5])
def test_run_end_holds_every_output_views_included(viewed, level):
    out, _ = viewed
    [run_end] = [r for r in records(log(out, level)) if r.startswith(H + "run-end 1 ")]
    # the second compile in the process is the second model loaded: model#2
    name = {3: "model", 5: "model#2"}[level]
    assert run_end == H + f"run-end 1 {name}\n" + (out / f"expected{level}.txt").read_text()
    layouts = re.findall(r"shape=(.*)\n      stride=(.*)\n", run_end)
    assert layouts == [("(6, 4)", "(1, 6)"), ("(4,)", "(6,)"), ("(4, 6)", "(6, 1)")]


@pytest.mark.python_writer
def test_run_end_with_views_comes_before_the_nan_check_raises(viewed):
    out, stdout = viewed
    assert re.fullmatch(r"RAISED: aoti-debug NaN check: launch model#2:2\.1 aoti_torch_cpu_addmm_out \(source \S+, module fc\) "
                        r"wrote 24 NaN into buf0 \(first at flat index 0\); its input x already held NaN "
                        r"\(look earlier\)\n", stdout), stdout
    run_end, summary = records(log(out, 5))[-2:]
    assert run_end.startswith(H + "run-end 2 model#2\n  out buf1:\n")
    assert re.findall(r"shape=(.*)\n", run_end) == ["(6, 4)", "(4,)", "(4, 6)"]
    assert re.findall(r"nan_count=(\d+)\n", run_end) == ["24", "4", "24"]
    assert summary == (H + "note - nan-check\n"
                       "  run 2: NaN/Inf in 2 launches: aoti_torch_cpu_addmm_out x1, cpp_fused_tanh_0 x1\n")


def test_level_10_dumps_each_tensor_of_an_extern_kernel_that_returns_several(tmp_path):
    """torch.compile hands sort's values and indices over as one tuple: both are dumped,
    named as the records name them."""
    import json
    import torch
    dumps = tmp_path / "dumps"
    run_python(RANKED.format(tests=TESTS, ctx="contextlib.nullcontext()"), timeout=600,
                      env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dumps,
                                    AOTI_DEBUG_LOGDEST=tmp_path / "log.txt", TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    [folder] = [p for p in dumps.iterdir() if p.is_dir()]
    lines = [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines()]
    (after,) = [e for e in lines if e["event"] == "after" and "sort" in e["kernel"]]
    names = [f["name"] for f in after["files"]]
    assert after["status"] == "ok" and len(names) == 2, after
    assert re.fullmatch(r"buf\d+\[0\]", names[0]) and names[1] == names[0][:-3] + "[1]"
    values, indices = (torch.load(folder / f["file"], weights_only=True) for f in after["files"])
    assert (values.dtype, indices.dtype) == (torch.float32, torch.int64) and values.shape == indices.shape
    assert torch.equal(values, values.sort(dim=0, descending=True).values)


@pytest.mark.python_writer
def test_level_10_stops_for_the_process_once_a_limit_is_reached(tmp_path):
    """torch.compile writes a folder per run: once the count limit stops recording, no later
    run makes a folder, and the note is written once."""
    dumps, log = tmp_path / "dumps", tmp_path / "log.txt"
    run_python(DUMPED.format(tests=TESTS).replace("    torch.compile(model)(*args)",
                                                  "    m = torch.compile(model)\n    for _ in range(3): m(*args)"),
               timeout=600, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dumps,
                                          AOTI_DEBUG_DUMP_MAX_COUNT="4", AOTI_DEBUG_LOGDEST=log,
                                          TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    assert [re.sub(r"^\d+", "PID", p.name) for p in sorted(dumps.iterdir()) if p.is_dir()] == ["PID-model-run1"]
    text = mask(log.read_text())
    assert text.count("note - flight-recorder") == 1
    assert "note - flight-recorder\n  AOTI_DEBUG_DUMP_MAX_COUNT=4 reached; no more dumps, logging goes on at level 5\n" in text
    assert text.count(" run-end ") == 3        # logging goes on


# Two launches of one site at level 5, then (CRASH=1) a third whose "kernel"
# segfaults; SINK=python writes without the compiled core.
LAUNCHES = r"""
import ctypes, os, torch
from aoti_debug.runtime import sink
if os.environ["SINK"] == "python":
    sink.native = lambda: None
from aoti_debug.runtime.launches import Model, Site
m = Model("toy", 5, "", "off", False, torch.__version__)
site = Site("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"),), "  source-line: m.py:12 nodes=add\n")
run = m.begin_run(("x",), (torch.arange(4.0),))
launch, launch_end = m.calls    # as the generated wrapper calls them
for k in (1, 2):
    launch(run, site, torch.full((3,), float(k)))
    launch_end(run, site, torch.full((3,), float(k) + 1))
if os.environ.get("CRASH") == "between":    # after launch 2 returned: no launch is in flight
    ctypes.string_at(0)
if os.environ.get("CRASH"):
    launch(run, site, torch.ones(2))
    ctypes.string_at(0)
"""


@pytest.mark.launch_path
def test_launch_records_alike_with_and_without_the_compiled_core(tmp_path):
    """The compiled core writes torch.compile's launch record and marks the
    launch in flight in one call; the Python writer's records are the same."""
    logs = {}
    for writer in ("core", "python"):
        log = tmp_path / f"{writer}.log"
        run_python(LAUNCHES, env=clean_env(SINK=writer, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=str(log)))
        logs[writer] = mask(log.read_text())
    assert logs["core"] == logs["python"]
    heads = [r.splitlines()[0] for r in records(logs["core"])]
    assert heads == ["[TIMESTAMP] [pid PID] run 1 toy thread=TID",
                     "[TIMESTAMP] [pid PID] launch toy:1.1 cpp_fused_add_0",
                     "[TIMESTAMP] [pid PID] launch-end toy:1.1 cpp_fused_add_0",
                     "[TIMESTAMP] [pid PID] launch toy:1.2 cpp_fused_add_0",
                     "[TIMESTAMP] [pid PID] launch-end toy:1.2 cpp_fused_add_0"]
    launch = records(logs["core"])[3]
    assert launch.splitlines()[1:3] == ["  origin: nodes=add source=m.py:12", "  source-line: m.py:12 nodes=add"]


# One launch of every value kind a record shows, at level 3 and 5, with the
# NaN check on: WRITER=core has the compiled core render each record in one
# call, WRITER=python has none.  The second site's string argument is one the
# core does not render: format.py writes that record.  With the core, what
# renders a Tensor block in Python and each scan by all_finite is counted.
RECORD_KINDS = r"""
import os, torch
from aoti_debug.runtime import format as fmt, sink
from aoti_debug.native import core
calls = []
if os.environ["WRITER"] == "python":
    sink.native = lambda: None
else:
    def counted(name, fn):
        return lambda *args, **kwargs: calls.append(name) or fn(*args, **kwargs)
    sink.tensor_block = counted("block", sink.tensor_block)
    core.all_finite = counted("all_finite", core.all_finite)
from aoti_debug.runtime.launches import Model, Site
m = Model("kinds", int(os.environ["LEVEL"]), "", "warn", False, torch.__version__)
site = Site("cpp_fused_kinds_0", "mul", "m.py:3", "fc", (("weight", "in"), ("buf0", "inout"), ("idx", "in"),
            ("view", "in"), ("none", "in"), ("n", "in"), ("alpha", "in"), ("flag", "in"), ("buf1", "out")))
weight = torch.nn.Parameter(torch.linspace(-1, 1, 6).reshape(2, 3))
buf0, idx, buf1 = torch.arange(6.0), torch.tensor([3, -2, 7]), torch.empty(2, 2)
view = torch.arange(12.0).reshape(3, 4).t()[1:]
run = m.begin_run(("w", "x"), (weight, buf0))
launch, launch_end = m.calls    # as the generated wrapper calls them
args = (weight, buf0, idx, view, None, 7, 0.25, True, buf1)
launch(run, site, *args)
buf1.copy_(torch.tensor([[1.0, float("nan")], [2.0, 3.0]]))
launch_end(run, site, *args)
run.checks_after(site, args, ("",) * len(args))
text_site = Site("extern_kernels.mode", "mode", "m.py:4", "fc", (("buf1", "in"), ("how", "in"), ("out", "out")))
args = (buf1, "fast", torch.ones(2))
launch(run, text_site, *args)
launch_end(run, text_site, *args)
run.end(("y",), (buf1,))
run.nan_finish()
print(calls)
from aoti_debug.native import launch_ext
print(launch_ext._module.counts() if launch_ext._module is not None else None)
"""


@pytest.mark.launch_path
@pytest.mark.skipif(WRITER == "python", reason="compares the compiled core's records with the Python writer's")
@pytest.mark.parametrize("level", ["3", "5"])
def test_the_core_renders_a_whole_record_as_format_py_does(tmp_path, level):
    """torch.compile's records at level 3 and 5 are rendered by the compiled
    core in one call a record, byte for byte as format.py renders them:
    parameters with requires_grad, views, integer tensors and every scalar
    kind; a record holding a value the core does not render (a string) is
    format.py's.  The NaN/Inf check after a level-5 launch reads the
    statistics its record computed instead of scanning the outputs again."""
    logs, calls, paths = {}, {}, {}
    for writer in ("core", "python"):
        log = tmp_path / f"{writer}.log"
        proc = run_python(RECORD_KINDS, env=clean_env(WRITER=writer, LEVEL=level, AOTI_DEBUG_LOGLEVEL=level,
                                                      AOTI_DEBUG_LOGDEST=str(log)))
        logs[writer], (calls[writer], paths[writer]) = mask(log.read_text()), proc.stdout.strip().splitlines()
    assert logs["core"] == logs["python"]
    # the launch functions that wrote them (records written in the extension, records it
    # handed to the Run): not the level-5 launch-end, whose statistics the NaN check keeps
    # (stats.Memo), nor the string's launch; none without the core
    assert paths == {"core": {"extension": "(2, 2)" if level == "3" else "(1, 3)", "ctypes": "None"}[LAUNCH],
                     "python": "None"}
    # As launch 1 wrote a NaN, the NaN check scans its three `in` tensors (did the NaN come
    # in?); the model's two inputs and the launch's two outputs only at level 3, whose records
    # compute no statistics.  Python renders the blocks of the string's launch only.
    scans = ["all_finite"] * (3 if level == "5" else 7)
    assert calls["core"] == repr(scans + ["block", "block"])
    launch = records(logs["core"])[1]
    assert "  in weight:\n    Tensor(\n      shape=(2, 3)\n      stride=(3, 1)\n      dtype=torch.float32\n" \
           "      device=cpu\n      requires_grad=True\n      is_contiguous=True\n" in launch
    assert "  in view:\n    Tensor(\n      shape=(3, 3)\n      stride=(1, 4)\n" in launch
    assert "  in none: None\n  in n: 7\n  in alpha: 0.250000\n  in flag: True\n" in launch
    assert "launch kinds:1.1 cpp_fused_kinds_0 (source m.py:3) wrote 1 NaN into buf1 (first at flat index 1)" \
        in logs["core"]
    text_launch = [r for r in records(logs["core"]) if " launch kinds:1.2 " in r][0]
    assert text_launch.endswith('      is_contiguous=True\n' + (
        "      min=1.000000\n      max=3.000000\n      mean=2.000000\n      nan_count=1\n      inf_count=0\n"
        "      hash=0f0f4bea8f334e68\n" if level == "5" else "") + '    )\n  in how: "fast"\n')


@pytest.mark.launch_path
@pytest.mark.skipif(WRITER == "python", reason="the crash trailer is written by the compiled core's signal "
                    "handler; the pure-Python writer has none (AOTID_TEST_WRITER=python)")
@pytest.mark.parametrize("level", ["1", "5"])
def test_a_crash_in_a_launch_names_it(tmp_path, level):
    log = tmp_path / "log"
    proc = run_python(LAUNCHES, env=clean_env(SINK="core", CRASH="1", AOTI_DEBUG_LOGLEVEL=level,
                                              AOTI_DEBUG_LOGDEST=str(log)), check=False)
    assert proc.returncode != 0
    heads = [r.splitlines()[0] for r in records(mask(log.read_text()))]
    assert heads[-2:] == ["[TIMESTAMP] [pid PID] launch toy:1.3 cpp_fused_add_0",
                          "[TIMESTAMP] [pid PID] crash toy:1.3 cpp_fused_add_0"]
    assert records(mask(log.read_text()))[-1].splitlines()[1:] == ["  signal: SIGSEGV"]


@pytest.mark.launch_path
@pytest.mark.skipif(WRITER == "python", reason="the crash trailer is written by the compiled core's signal "
                    "handler; the pure-Python writer has none (AOTID_TEST_WRITER=python)")
@pytest.mark.parametrize("level", ["1", "5"])
def test_a_crash_after_a_launch_returned_names_no_launch(tmp_path, level):
    """The launch-end record clears the launch's in-flight mark (at level 5 the
    core does both in one call): a crash between launches blames none."""
    log = tmp_path / "log"
    proc = run_python(LAUNCHES, env=clean_env(SINK="core", CRASH="between", AOTI_DEBUG_LOGLEVEL=level,
                                              AOTI_DEBUG_LOGDEST=str(log)), check=False)
    assert proc.returncode != 0
    heads = [r.splitlines()[0] for r in records(mask(log.read_text()))]
    assert heads[-2:] == ["[TIMESTAMP] [pid PID] " + ("launch-end toy:1.2 cpp_fused_add_0" if level == "5"
                                                      else "launch toy:1.2 cpp_fused_add_0"),
                          "[TIMESTAMP] [pid PID] crash - -"]
