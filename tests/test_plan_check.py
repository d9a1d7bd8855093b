"""The plan check (docs/checks.md, "The plan check"): a C++ custom op whose fake
disagrees with its kernel under dynamic shapes (examples/custom_op/
memory_bugs.cpp's membugs::pad4: its Meta kernel claims 4 rows more than the
kernel returns when the tokens are a multiple of 4) is named at its launch,
buffer and line, by the artifact from Python and from the C++ runner and by
torch.compile's wrapper, with one message; sizes where fake and kernel agree
run as without the check."""

import re

import pytest

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, raised, records, run_package, run_python, saved_inputs
import models

pytestmark = pytest.mark.slow

# the input guard and the memory check compiled in: either switches the plan check on
PLANNED = dict(AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_CHECK_INPUTS="1", AOTI_DEBUG_MEMCHECK="raise")
EIGHT = "(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)),)"


@pytest.fixture(scope="module")
def badfake(packages, membugs_so):
    return packages.get("badfake", MEMBUGS_SO=membugs_so, **PLANNED)


def expected(instance, launch, buf):
    return (f"launch {instance}:{launch} membugs.pad4.default (nodes=pad4 source={models.line_of('badfake.op')}) "
            f"returned {buf} of shape (8, 16) where the graph planned (12, 16): the op's fake (register_fake "
            f"or Meta kernel) disagrees with its kernel on these inputs, and the launches after it use {buf} "
            "as planned")


def notes(text, topic):
    return [r.split("\n", 1)[1].strip() for r in records(mask(text))
            if r.startswith(f"[TIMESTAMP] [pid PID] note - {topic}\n")]


def buffer_in(message):
    return re.search(r" returned (buf\d+) ", message).group(1)


@pytest.mark.torch_matrix   # the plan is read from Inductor's IR: each release's own
def test_the_guard_raises_at_the_op_whose_fake_is_wrong(badfake, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_package(badfake, "badfake", inputs=EIGHT, MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log)
    message = raised(proc)
    assert message == "aoti-debug plan check: " + expected("badfake", "1.2", buffer_in(message))
    # the record says it too, and nothing ran after the op
    text = log.read_text()
    assert notes(text, "plan-check") == [message[len("aoti-debug plan check: "):]]
    heads = [r.splitlines()[0] for r in records(mask(text))]
    assert heads[-2:] == ["[TIMESTAMP] [pid PID] launch badfake:1.2 membugs.pad4.default",
                          "[TIMESTAMP] [pid PID] note - plan-check"], heads


def test_where_fake_and_kernel_agree_it_runs_as_without_the_check(badfake, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    on = run_package(badfake, "badfake", MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log)   # 6 tokens
    off = run_package(badfake, "badfake", MEMBUGS_SO=membugs_so, AOTI_DEBUG_CHECK_INPUTS="0",
                      AOTI_DEBUG_MEMCHECK="off", AOTI_DEBUG_LOGLEVEL="0")
    assert on.stdout.startswith("OUTPUT (8, 16) "), on.stdout + on.stderr
    assert on.stdout == off.stdout
    assert notes(log.read_text(), "plan-check") == []


def test_the_cpp_runner_stops_with_the_same_message(badfake, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = runner.run_package(badfake, saved_inputs(tmp_path, EIGHT), libraries=[membugs_so],
                              env=clean_env(AOTI_DEBUG_LOGDEST=log))
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("aoti-debug-run: model run failed: aoti-debug plan check: "
                    + expected("badfake", "1.2", buffer_in(last)))


def test_the_memory_check_alone_warns_and_the_run_goes_on(badfake, membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    # the model then reads 4 rows past the op's output, as the plan says: the process
    # may die of it when it frees the memory, so its exit status is not asked
    run_package(badfake, "badfake", inputs=EIGHT, check=False, MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log,
                AOTI_DEBUG_CHECK_INPUTS="0", AOTI_DEBUG_MEMCHECK="warn")
    found = notes(log.read_text(), "plan-check")
    assert len(found) == 1 and found[0] == expected("badfake", "1.2", buffer_in(found[0]))
    heads = [r.splitlines()[0] for r in records(mask(log.read_text()))]
    assert "[TIMESTAMP] [pid PID] launch badfake:1.3 cpp_fused_mul_1" in heads, heads


def test_torch_compile_says_what_the_artifact_says(membugs_so, tmp_path):
    log = tmp_path / "log.txt"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        model, _, _ = models.seeded("badfake")
        with aoti_debug.instrument(level=1, memcheck="warn"):
            compiled = torch.compile(model, dynamic=True)
            print(tuple(compiled(torch.randn(6, 16)).shape))
            try:
                compiled(*{EIGHT})
            except AssertionError as e:   # Inductor's own size assert, after ours
                print("ASSERTED", str(e).splitlines()[0])
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_LOGDEST=log))
    assert proc.stdout.splitlines() == ["(8, 16)", "ASSERTED expected size 8==12, stride 16==16 at dim=0"], \
        proc.stdout + proc.stderr
    found = notes(log.read_text(), "plan-check")
    assert len(found) == 1 and found[0] == expected("model", "2.2", buffer_in(found[0]))
