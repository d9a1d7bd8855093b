"""Real models nobody on this project wrote (tests/corpus.py: GPT-2, Llama,
BERT and ViT from `transformers`, random weights) through the whole product:
the instrumented compile, bit-identical outputs at every run-time level,
records that repeat exactly from run to run and from the C++ runner,
torch.compile and AOTI logs that agree, and a planted NaN found at its line.

Each model is compiled twice per session (instrumented as conftest.FULL but at
level 10, so that `check` can re-run its launches' ops, and plain); the tests of
one model share those packages and its level-5 logs."""

import functools
import os
import re

import pytest
import torch

from aoti_debug import runner
from aoti_debug.analysis import records as parsed
from aoti_debug.analysis.mask import mask
from aoti_debug.cli import main
import corpus
from conftest import FULL, TESTS, clean_env, records, run_python

# the instrumented package: everything compiled in, up to level-10 dumps and their
# ops, and the memory check (raise): every run below has it on unless it says off
FULL10 = dict(FULL, AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_MEMCHECK="raise")

pytestmark = [pytest.mark.slow, pytest.mark.corpus]

# Loads a package, swaps in `constants` when given, runs it on the saved
# inputs and saves its outputs.
RUN = r"""
import torch
m = torch._inductor.aoti_load_package({pt2!r})
if {constants!r}:
    m.load_constants(torch.load({constants!r}), check_full_update=False)
torch.save(list(m(*torch.load({inputs!r}))), {outputs!r})
"""

# torch.compile of the same model on the same inputs, level 5
COMPILE = r"""
import sys; sys.path.insert(0, {tests!r})
import torch, corpus, aoti_debug
model, args, _ = corpus.example({name!r})
model.requires_grad_(False)   # as in an AOTI artifact, whose weights are constants
with torch.no_grad(), aoti_debug.instrument(level=5):
    torch.compile(model)(*args)
"""


class Model:
    """One corpus model: its packages, saved inputs and logs, each made on first use."""

    def __init__(self, name, packages, folder, cache):
        self.name, self.packages, self.folder, self.cache = name, packages, folder, cache

    @functools.cached_property
    def full(self):
        return self.packages.get(self.name, **FULL10)

    @functools.cached_property
    def plain(self):
        return self.packages.get(self.name)

    @functools.cached_property
    def inputs(self):
        path = self.folder / "inputs.pt"
        runner.save_inputs(path, corpus.inputs(self.name))
        return str(path)

    def run(self, tag, pt2, constants=None, **env):
        """Run from Python; (outputs, log text) -- the log unmasked, "" when none was written."""
        log, outputs = self.folder / f"{tag}.log", self.folder / f"{tag}.outputs.pt"
        run_python(RUN.format(pt2=pt2, constants=constants, inputs=self.inputs, outputs=str(outputs)),
                   env=clean_env(AOTI_DEBUG_LOGDEST=log, **env))
        return torch.load(outputs, weights_only=True), log.read_text() if log.exists() else ""

    @functools.cached_property
    def reference(self):
        """The plain package's outputs."""
        return self.run("plain", self.plain)[0]

    @functools.cached_property
    def level5(self):
        """Two runs of the instrumented package at level 5, each in its own process."""
        return [self.run(f"level5-{n}", self.full, AOTI_DEBUG_LOGLEVEL="5") for n in (1, 2)]

    @functools.cached_property
    def cpp(self):
        """The same run from the C++ runner: (CompletedProcess, outputs, log text)."""
        log, outputs = self.folder / "cpp.log", self.folder / "cpp.outputs.pt"
        proc = runner.run_package(self.full, self.inputs, outputs=outputs,
                                  env=clean_env(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=log))
        done = proc.returncode == 0
        return proc, runner.load_outputs(outputs) if done else None, log.read_text() if log.exists() else ""


@pytest.fixture(scope="module", params=corpus.NAMES)
def model(request, corpus_packages, aoti_cache, tmp_path_factory):
    return Model(request.param, corpus_packages, tmp_path_factory.mktemp(request.param), aoti_cache)


# The vision model (a convolution, three layers sharing every line) runs the tests of
# its instrumented package: its logs, the memory check, the planted NaN named at its
# layer.  Those needing a second compile (plain), the C++ runner, torch.compile or
# level-10 dumps add several minutes each per model and nothing a language model
# does not already cover, so they run the language models only.  (torch.compile
# would also compare unlike graphs: its pattern matcher turns ViT's eager
# attention into one SDPA kernel, which the exported graph keeps as matmuls.)
text_models = pytest.mark.parametrize("model", corpus.TEXT, indirect=True)


def bits(tensors):
    """Each tensor's dtype, shape and bytes: equal exactly when the outputs are bit-identical."""
    return [(t.dtype, tuple(t.shape), t.contiguous().view(-1).view(torch.uint8).tolist())
            for t in tensors]


def first_difference(a, b):
    """Where two logs' masked records first differ: the record, the item and both lines."""
    ra, rb = records(mask(a)), records(mask(b))
    for x, y in zip(ra, rb):
        if x != y:
            xl, yl = x.splitlines(), y.splitlines()
            n = next((i for i, (p, q) in enumerate(zip(xl, yl)) if p != q), min(len(xl), len(yl)))
            item = next((line for line in reversed(xl[:n]) if re.match(r"  \S", line)), "")
            end = lambda lines: lines[n] if n < len(lines) else "<end of record>"
            return f"first difference in {xl[0]!r}, {item.strip()!r}: {end(xl).strip()!r} vs {end(yl).strip()!r}"
    return f"{len(ra)} records against {len(rb)}"


def headers(text):
    return [r.splitlines()[0] for r in records(mask(text))]


def test_instrumented_package_logs_one_whole_run(model):
    """Every launch has its end record, numbered in order, between the run and its end."""
    outputs, text = model.level5[0]
    heads = [h[len("[TIMESTAMP] [pid PID] "):] for h in headers(text)]
    assert heads[0] == f"run 1 {model.name} thread=TID" and heads[-1] == f"run-end 1 {model.name}", heads
    launches = heads[1:-1]
    assert len(launches) >= 20 and len(launches) % 2 == 0
    for k in range(len(launches) // 2):
        begin, end = launches[2 * k].split(" ", 2), launches[2 * k + 1].split(" ", 2)
        launch = f"{model.name}:1.{k + 1}"
        assert begin[:2] == ["launch", launch] and end == ["launch-end", launch, begin[2]]
    run = records(mask(text))[0]
    first, *others = corpus.input_names(model.name)
    assert run.startswith(f"[TIMESTAMP] [pid PID] run 1 {model.name} thread=TID\n  in {first}:\n")
    assert all(f"\n  in {name}:\n" in run for name in others) and run.count("Tensor(") == 1 + len(others)
    # clean inputs: the NaN check (warn) has nothing to say, and nan-origin neither
    assert "note - nan-check" not in text
    log = model.folder / "level5-1.log"
    assert main(["nan-origin", str(log)]) == 0


@text_models
@pytest.mark.parametrize("level", ["0", "1", "3", "5"])
def test_outputs_bit_identical_to_the_plain_package(model, level):
    if level == "5":
        outputs = model.level5[0][0]
    else:
        outputs, text = model.run(f"level{level}", model.full, AOTI_DEBUG_LOGLEVEL=level)
        assert (text == "") == (level == "0")
    assert bits(outputs) == bits(model.reference)


def test_memcheck_finds_nothing_and_changes_nothing(model):
    """Guards and poison around every allocation: no report, and the records and
    outputs of a correct model are exactly those of a run without them."""
    outputs, text = model.level5[0]
    assert "note - memcheck" not in text
    off_outputs, off_text = model.run("memcheck-off", model.full, AOTI_DEBUG_LOGLEVEL="5",
                                      AOTI_DEBUG_MEMCHECK="off")
    assert bits(off_outputs) == bits(outputs)
    assert records(mask(off_text)) == records(mask(text)), first_difference(off_text, text)


def test_every_launch_names_a_line_of_transformers(model):
    """Provenance survives Inductor's lowering: each launch that computes an op
    names a line of one of transformers' own files, the code the user reads."""
    import transformers
    root = os.path.dirname(transformers.__file__) + os.sep

    def is_line(source):
        path, _, line = source.rpartition(":")
        if not (path.startswith(root) and os.path.isfile(path) and line.isdigit()):
            return False
        with open(path) as f:
            return 1 <= int(line) <= sum(1 for _ in f)

    launches = parsed.parse(model.level5[0][1]).launches
    assert len(launches) >= 20
    # a kernel computing no op of the model (ViT's copy of the image into the layout the
    # convolution takes) has no line of its own
    launches = [e for e in launches if not (e.origin and not e.origin.nodes)]
    sources = [(e.title, e.origin.source if e.origin else None) for e in launches]
    assert [f"{title}: {source}" for title, source in sources if not is_line(source or "-")] == []


def test_run_end_holds_every_model_output(model):
    """The run-end record lists each output the caller gets, with its values' statistics."""
    from aoti_debug.runtime import format as fmt
    outputs, text = model.level5[0]
    run_end = parsed.parse(mask(text)).records[-1]
    assert (run_end.kind, run_end.id) == ("run-end", "1")
    assert [i.role for i in run_end.items] == ["out"] * len(outputs), records(mask(text))[-1]
    body = records(mask(text))[-1].split("\n", 1)[1]
    assert body == "".join(line + "\n" for item, t in zip(run_end.items, outputs)
                           for line in fmt.item(item.label, t, 5))


def test_records_identical_from_run_to_run(model):
    (_, first), (_, second) = model.level5
    assert f"] launch {model.name}:1.1 " in first
    assert records(mask(first)) == records(mask(second)), first_difference(first, second)


@text_models
def test_cpp_runner_writes_the_same_records_and_outputs(model):
    proc, outputs, text = model.cpp
    assert proc.returncode == 0, proc.stderr
    assert bits(outputs) == bits(model.reference)
    python = model.level5[0][1]
    assert records(mask(text)) == records(mask(python)), first_difference(python, text)


@text_models
def test_torch_compile_and_aoti_logs_agree(model, capsys):
    compiled = model.folder / "compile.log"
    run_python(COMPILE.format(tests=TESTS, name=model.name), timeout=600,
               env=clean_env(TORCHINDUCTOR_CACHE_DIR=model.cache, AOTI_DEBUG_LOGDEST=compiled))
    launches = sum(1 for h in headers(compiled.read_text()) if " launch " in h)
    code = main(["diff", str(compiled), str(model.folder / "level5-1.log")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    # within tolerance, or (the same kernels from one Inductor cache) identical bit for bit
    assert f"the logs agree: {launches} aligned launch(es) compared" in out \
        or f"A and B are identical bit for bit: the outputs of {launches} aligned launch(es)" in out, out


def test_planted_nan_is_named_at_its_kernel_and_transformers_line(model, capsys):
    [(fqn, value)] = corpus.planted(model.name).items()
    constants = model.folder / "planted.pt"
    torch.save({fqn: value}, constants)
    outputs, text = model.run("planted", model.full, constants=str(constants), AOTI_DEBUG_LOGLEVEL="5")
    assert not all(t.isfinite().all() for t in outputs)
    # the kernel that applies the weight: the launch that reads its constant
    constant = fqn.replace(".", "_")
    clean = parsed.parse(model.level5[0][1])
    [reader] = [e for e in clean.launches if any(i.label == f"in {constant}" for i in e.inputs)]
    code = main(["nan-origin", str(model.folder / "planted.log")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert re.fullmatch(rf"NaN/Inf origin: launch {re.escape(reader.title)} \(pid \d+, planted\.log:\d+\)",
                        lines[0]), "\n".join(lines)
    # the module beside the line: ViT's three layers share every line
    module = corpus.planted_module(model.name)
    assert lines[1] == f"  source: {corpus.planted_source(model.name)}, module {module}", "\n".join(lines)
    if model.name == "vit":
        assert ".layers.1." in module
        # the NaN check (compiled for NaN only) names the layer the same way (both runtimes
        # print the codegen's text): the query projection makes Inf, layer 1's softmax the NaN
        notes = [r for r in records(mask(text)) if r.startswith("[TIMESTAMP] [pid PID] note - nan-check\n")]
        assert notes, text
        note = notes[0].split("\n")[1].strip()
        vit_file = re.escape(corpus.planted_source("vit").rpartition(":")[0])
        assert re.fullmatch(rf"launch vit:1\.\d+ cpp_fused__softmax\w* \(source {vit_file}:\d+, module "
                            r"model\.vit\.layers\.1\.attention\) wrote \d+ NaN into buf\d+ \(first at flat index "
                            r"\d+\); its inputs held no NaN, so this launch is where NaN first appears", note), note


SERVE = """
import sys, torch
model = torch._inductor.aoti_load_package(sys.argv[1])
model.load_constants(torch.load(sys.argv[2]), check_full_update=False)
print(sum(float(t.float().sum()) for t in model(*torch.load(sys.argv[3]))))
"""


def test_a_new_user_triages_a_transformers_model_with_a_planted_nan_in_one_command(
        corpus_packages, aoti_cache, tmp_path):
    """ViT with a huge query-projection row in its middle layer, run by the user's own script:
    one command, one answer of at most 15 lines naming the launch, its kernel, the
    transformers line, the layer, whose NaN it is and the reproducer."""
    vit = Model("vit", corpus_packages, tmp_path, aoti_cache)
    constants, script, out = tmp_path / "planted.pt", tmp_path / "serve.py", tmp_path / "triage"
    torch.save(corpus.planted("vit"), constants)
    script.write_text(SERVE)
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main(["triage", "--out", {str(out)!r}, "--", sys.executable, {str(script)!r}, {vit.full!r},
                       {str(constants)!r}, {vit.inputs!r}]))
    """, env=clean_env(), check=False, timeout=900)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(lines) <= 15, "\n".join(lines)
    assert re.fullmatch(r"NaN/Inf origin: launch vit:1\.\d+ aoti_torch_cpu_addmm_out \(pid \d+, 2-nan\.log:\d+\)",
                        lines[0]), "\n".join(lines)
    assert lines[1] == f"  source: {corpus.planted_source('vit')}, module {corpus.planted_module('vit')}"
    assert re.fullmatch(r"the math leaves float32's range: eager makes NaN/Inf too, float64 none \(buf\d+: \d+ "
                        r"recorded, \d+ in eager float32, 0 in float64\)", next(
                            line for line in lines if line.startswith("the math")))
    assert f"reproducer: {out}/repro/repro.py: makes the same NaN/Inf on its own (eager and torch.compile match " \
           "the recording)" in lines
    assert lines[-1] == f"everything it ran, with each log and command line: {out}"


@text_models
def test_check_finds_every_launch_within_tolerance(model, capsys):
    """Each launch's ops re-run in eager and float64 on its dumped inputs agree with
    what the compiled kernels wrote; every launch can be re-run."""
    dumps = model.folder / "dumps"
    model.run("level10", model.full, AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(dumps))
    code = main(["check", str(dumps)])
    lines = capsys.readouterr().out.splitlines()
    launches = len(parsed.parse(model.level5[0][1]).launches)
    assert lines[-1] == f"{launches} launch(es): {launches} within tolerance, 0 beyond, 0 not checkable", \
        "\n".join(lines)
    assert code == 0
