"""The memory check (AOTI_DEBUG_MEMCHECK, docs/checks.md "Memory check"):
custom ops with real memory bugs (examples/custom_op/memory_bugs.cpp) that
run silently without it, named at their launch, buffer and line with it, from
Python and from the C++ runner; the NaN they leave is told apart from a
numerics bug.  A correct model with a convolution (oneDNN allocates through
torch's raw_allocate, which requires a buffer's data pointer to be its
context) runs under it exactly as without it."""

import hashlib
import re

import pytest
import torch

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from aoti_debug.cli import main
from conftest import TESTS, clean_env, raised, records, run_package, run_python, saved_inputs
import models

pytestmark = pytest.mark.slow

# level 5 with the NaN check on, as a user debugging a NaN would run
CHECKED = dict(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="warn:nan", AOTI_DEBUG_MEMCHECK="raise")


@pytest.fixture(scope="module")
def overrun(packages, membugs_so):
    return packages.get("overrun", MEMBUGS_SO=membugs_so, **CHECKED)


@pytest.fixture(scope="module")
def membugs(packages, membugs_so):
    return packages.get("membugs", MEMBUGS_SO=membugs_so, **CHECKED)


@pytest.fixture(scope="module")
def conv(packages):
    return packages.get("conv", **CHECKED)


def launch_of(log_text, kernel):
    """(launch id, the `out` buffer's name) of the launch of `kernel` in a level-5 log."""
    for rec in records(mask(log_text)):
        m = re.match(r"\[TIMESTAMP\] \[pid PID\] launch-end (\S+:\d+\.\d+) (\S+)\n", rec)
        if m and m.group(2) == kernel:
            return m.group(1), re.search(r"^  out (\w+):", rec, re.M).group(1)
    raise AssertionError(f"no launch-end of {kernel} in\n{log_text}")


def notes(log_text, topic):
    return [r.split("\n", 1)[1].strip() for r in records(mask(log_text))
            if r.startswith(f"[TIMESTAMP] [pid PID] note - {topic}\n")]


def source(tag):
    return f"source={models.line_of(tag)}"


def past_the_end(launch, buf):
    return (f"launch {launch} membugs.overrun.default (nodes=overrun {source('overrun.op')}) wrote past "
            f"the end of {buf} (out, float32(5,)), allocated by this launch: 4 bytes damaged, "
            f"starting right after its end")


def test_raise_names_the_launch_the_buffer_and_past_the_end(overrun, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_package(overrun, "overrun", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log)
    launch, buf = launch_of(log.read_text(), "membugs.overrun.default")
    assert launch == "overrun:1.2"
    assert raised(proc) == "aoti-debug memcheck: " + past_the_end(launch, buf)
    assert notes(log.read_text(), "memcheck") == [past_the_end(launch, buf)]
    # the run stopped at that launch: nothing after it ran
    heads = [r.splitlines()[0] for r in records(mask(log.read_text()))]
    assert heads[-2:] == ["[TIMESTAMP] [pid PID] launch-end overrun:1.2 membugs.overrun.default",
                          "[TIMESTAMP] [pid PID] note - memcheck"]


def test_the_cpp_runner_stops_with_the_same_message(overrun, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = runner.run_package(overrun, saved_inputs(tmp_path, "models.example('overrun')[1]"),
                              libraries=[membugs_so], env=clean_env(AOTI_DEBUG_LOGDEST=log))
    launch, buf = launch_of(log.read_text(), "membugs.overrun.default")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "aoti-debug-run: model run failed: aoti-debug memcheck: " + past_the_end(launch, buf))


def test_switched_off_at_run_time_the_bug_is_real_and_silent(overrun, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_package(overrun, "overrun", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log,
                       AOTI_DEBUG_MEMCHECK="off")
    # (x + 1) * 2 * 3 for x = 0..4, and the stray float went unnoticed
    assert proc.stdout.splitlines()[0].startswith("OUTPUT (5,) 90.0 "), proc.stdout + proc.stderr
    text = log.read_text()
    assert notes(text, "memcheck") == [] and notes(text, "nan-check") == []


@pytest.mark.torch_matrix   # one package for every release: the hooks, and c10's allocator API
def test_warn_names_memory_nobody_wrote_and_a_read_before_the_start(membugs, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_package(membugs, "membugs", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log,
                       AOTI_DEBUG_MEMCHECK="warn")
    text = log.read_text()
    unwritten, ubuf = launch_of(text, "membugs.unwritten.default")
    before, bbuf = launch_of(text, "membugs.read_before.default")
    scratch, _ = launch_of(text, "membugs.scratch.default")
    assert sorted(notes(text, "memcheck")) == sorted([
        f"launch {unwritten} membugs.unwritten.default (nodes=unwritten {source('membugs.unwritten')}) "
        f"never wrote its output {ubuf} (out, float32(5,)): all 5 elements hold memcheck poison "
        f"(memory nobody wrote)",
        # x[-1] lies in the guard before the input: poison, read as a NaN
        f"launch {before} membugs.read_before.default (nodes=read_before {source('membugs.read_before')}) "
        f"read memory nobody wrote (or out of bounds): 1 of 5 elements of {bbuf} (out, float32(5,)) "
        f"hold memcheck poison (first at flat index 0) and none of its inputs held any",
        # a tensor the op allocated and freed inside the launch: checked when freed
        # the op runs inside the submodule `work`: named beside its line, as the NaN check does
        f"launch {scratch} membugs.scratch.default (nodes=scratch {source('membugs.scratch')}, module work) wrote "
        f"past the end of a tensor of 20 bytes, allocated by this launch, freed since: 4 bytes "
        f"damaged, starting right after its end"])
    # the run goes on (warn); the NaN the unwritten memory left reaches the output
    outs = [line.split()[2] for line in proc.stdout.splitlines() if line.startswith("OUTPUT")]
    assert outs == ["nan", "nan", "30.0"], proc.stdout + proc.stderr


def test_nan_origin_says_the_memory_was_never_written(membugs, membugs_so, tmp_path, capsys):
    log = tmp_path / "log.txt"
    run_package(membugs, "membugs", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_MEMCHECK="warn")
    unwritten, ubuf = launch_of(log.read_text(), "membugs.unwritten.default")
    capsys.readouterr()
    assert main(["nan-origin", str(log)]) == 1
    out = capsys.readouterr().out
    assert f"NaN/Inf from memory nobody wrote: launch {unwritten} membugs.unwritten.default" in out, out
    assert (f"  memcheck: launch {unwritten} membugs.unwritten.default (nodes=unwritten "
            f"{source('membugs.unwritten')}) never wrote its output {ubuf}") in out, out
    assert "candidate ops" not in out


def test_a_package_without_it_says_what_to_recompile_with(packages, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_package(packages.get("mlp", AOTI_DEBUG_LOGLEVEL="1"), "mlp", AOTI_DEBUG_LOGDEST=log,
                       AOTI_DEBUG_MEMCHECK="warn")
    assert proc.stdout.startswith("OUTPUT (4, 4)"), proc.stdout + proc.stderr
    assert notes(log.read_text(), "settings") == [
        "AOTI_DEBUG_MEMCHECK='warn' asks for more than model 'mlp' was compiled with (off); using off. "
        "Recompile with AOTI_DEBUG_MEMCHECK=warn (or AOTI_DEBUG_COMPILE=all) to get it."]


@pytest.mark.torch_matrix
def test_torch_compile_reports_what_the_artifact_reports(membugs, membugs_so, tmp_path):
    """The Python runtime's memory check: the same allocator, the same messages
    (the wrappers name their buffers each their own way)."""
    aoti_log, compiled_log = tmp_path / "aoti.log", tmp_path / "compiled.log"
    run_package(membugs, "membugs", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=aoti_log,
                AOTI_DEBUG_MEMCHECK="warn")
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        model, args, _ = models.example("membugs")
        with aoti_debug.instrument(level=1, memcheck="warn"):
            outs = torch.compile(model)(*args)
        print([round(float(o.sum()), 3) for o in outs])
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=compiled_log))
    # ... and each its model instance: the package's stem, torch.compile's `model`
    def unnamed(text, instance):
        found = notes(text, "memcheck")
        assert all(n.startswith(f"launch {instance}:1.") for n in found), found
        return sorted(re.sub(r"\bbuf\d+\b", "BUF", n.replace(f"launch {instance}:", "launch ", 1)) for n in found)
    assert len(notes(aoti_log.read_text(), "memcheck")) == 3
    assert unnamed(compiled_log.read_text(), "model") == unnamed(aoti_log.read_text(), "membugs")


def output_line(t):
    """run_package's line for one output (its sum and the hash of its bytes)."""
    digest = hashlib.sha256(t.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
    return f"OUTPUT {tuple(t.shape)} {t.double().sum().item()!r} {digest[:16]}"


def test_a_conv_net_runs_under_it_as_without_it(conv, tmp_path):
    """oneDNN's convolution asserts that a buffer's DataPtr has its data pointer
    as context: the guarded buffers keep that, from Python and from the C++ runner."""
    runs = {}
    for action in ("off", "warn", "raise"):
        log = tmp_path / f"{action}.log"
        proc = run_package(conv, "conv", AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_MEMCHECK=action)
        runs[action] = [line for line in proc.stdout.splitlines() if line.startswith("OUTPUT")], log.read_text()
    outputs, text = runs["off"]
    assert len(outputs) == 1 and outputs[0].startswith("OUTPUT (2, 2) "), outputs
    assert launch_of(text, "aoti_torch_cpu_convolution")[0] == "conv:1.2"
    for action in ("warn", "raise"):
        assert runs[action][0] == outputs, action
        assert notes(runs[action][1], "memcheck") == [], action
        assert records(mask(runs[action][1])) == records(mask(text)), action
    inputs = saved_inputs(tmp_path, "models.example('conv')[1]")
    for action in ("warn", "raise"):
        log, out = tmp_path / f"cpp-{action}.log", tmp_path / f"cpp-{action}.pt"
        proc = runner.run_package(conv, inputs, outputs=out,
                                  env=clean_env(AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_MEMCHECK=action))
        assert proc.returncode == 0, proc.stderr
        assert [output_line(t) for t in runner.load_outputs(out)] == outputs, action
        assert notes(log.read_text(), "memcheck") == [], action


def test_torch_compile_runs_a_conv_net_under_it(tmp_path):
    """The Python runtime's wrapper on the same allocator: the convolution runs,
    nothing is reported, and the result is eager's."""
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        model, args, _ = models.example("conv")
        model.requires_grad_(False)
        want = model(*args)
        with aoti_debug.instrument(level=1, memcheck="raise"):
            got = torch.compile(model)(*args)
        print("CLOSE", tuple(got.shape), torch.allclose(got, want, rtol=1e-4, atol=1e-5))
    """, env=clean_env(AOTI_DEBUG_LOGDEST=log))
    assert proc.stdout.splitlines()[-1] == "CLOSE (2, 2) True", proc.stdout + proc.stderr
    text = log.read_text()
    heads = [r.split("\n", 1)[0] for r in records(mask(text))]
    assert "[TIMESTAMP] [pid PID] launch model:1.2 aoti_torch_cpu_convolution" in heads, text
    assert notes(text, "memcheck") == []


def test_a_transformers_vision_model_runs_under_it_as_without_it(corpus_packages, tmp_path):
    """ViT (tests/corpus.py): a patch-embedding convolution, then three encoder
    layers, under the memory check (warn and raise) from Python and from the C++
    runner: the outputs of a run without it, bit for bit, and nothing reported.
    The package is test_corpus.py's, compiled once per session."""
    import corpus
    from test_corpus import FULL10
    pt2 = corpus_packages.get("vit", **FULL10)
    inputs = tmp_path / "inputs.pt"
    runner.save_inputs(inputs, list(corpus.inputs("vit")))
    runs = {}
    for action in ("off", "warn", "raise"):
        log, out = tmp_path / f"{action}.log", tmp_path / f"{action}.pt"
        run_python(f"""
            import torch
            m = torch._inductor.aoti_load_package({pt2!r})
            torch.save(list(m(*torch.load({str(inputs)!r}))), {str(out)!r})
        """, env=clean_env(AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_MEMCHECK=action))
        runs[action] = [output_line(t) for t in torch.load(out)], log.read_text()
    outputs, text = runs["off"]
    assert len(outputs) == 1 and outputs[0].startswith("OUTPUT (2, 10) "), outputs
    assert launch_of_level1(text, "aoti_torch_cpu_convolution"), text
    for action in ("warn", "raise"):
        assert runs[action][0] == outputs, action
        assert notes(runs[action][1], "memcheck") == [], action
        assert records(mask(runs[action][1])) == records(mask(text)), action
    for action in ("warn", "raise"):
        log, out = tmp_path / f"cpp-{action}.log", tmp_path / f"cpp-{action}.pt"
        proc = runner.run_package(pt2, str(inputs), outputs=out,
                                  env=clean_env(AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_LOGLEVEL="1",
                                                AOTI_DEBUG_MEMCHECK=action))
        assert proc.returncode == 0, proc.stderr
        assert [output_line(t) for t in runner.load_outputs(out)] == outputs, action
        assert notes(log.read_text(), "memcheck") == [], action


def launch_of_level1(log_text, kernel):
    """Whether a level-1 log has a launch record of `kernel`."""
    return any(re.match(rf"\[TIMESTAMP\] \[pid PID\] launch \S+ {re.escape(kernel)}\n", r)
               for r in records(mask(log_text)))
