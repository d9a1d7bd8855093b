"""`aoti-debug triage` (docs/triage.md): the guide's chain run for the user on
packages compiled with AOTI_DEBUG_COMPILE=all, from a Python command (`--`)
and through the C++ runner (PKG.pt2 --inputs IN.pt); one test per outcome,
each verdict naming the launch, kernel, line and layer."""

import json
import os
import re
import sys

import pytest

from conftest import TESTS, clean_env, run_python, saved_inputs
import models

pytestmark = pytest.mark.slow

ALL = dict(AOTI_DEBUG_COMPILE="all")   # the same packages as test_compile_all.py's


def triage(*argv, **env):
    """(exit status, stdout lines, stderr) of `aoti-debug triage ARGV` in a fresh process."""
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main({["triage", *argv]!r}))
    """, env=clean_env(**env), check=False)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def steps(out):
    return sorted(f for f in os.listdir(out) if f.endswith(".cmd.json"))


def test_a_nan_in_one_of_three_identical_layers_is_named_with_its_layer(packages, tmp_path):
    pt2 = packages.get("layers", **ALL)
    out = tmp_path / "triage"
    code, lines, err = triage("--out", str(out), "--", sys.executable, "-c", f"""
import sys, torch; sys.path.insert(0, {TESTS!r}); import models
m = torch._inductor.aoti_load_package({pt2!r})
print(m(*models.example("layers")[1]))""")
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"NaN/Inf origin: launch layers:1\.\d+ cpp_fused_sqrt_\d+ \(pid \d+, 2-nan\.log:\d+\)",
                        lines[0]), lines
    assert lines[1] == f"  source: {models.line_of('layers.sqrt')}, module layers.1"
    assert any(re.fullmatch(r"    (out|inout) buf\d+: shape=\(2, 4\) .* nan_count=2 inf_count=0", line)
               for line in lines), lines
    assert lines[-2] == f"  more: aoti-debug nan-origin {out}/2-nan.log"
    assert lines[-1] == f"everything it ran, with each log and command line: {out}"
    assert len(lines) <= 15
    assert steps(out) == ["1-first.cmd.json", "2-nan.cmd.json"]
    # each step can be rerun by hand: the command and the variables it ran with
    first = json.loads((out / "1-first.cmd.json").read_text())
    assert first["variables"] == {"AOTI_DEBUG_CHECK_INPUTS": "1", "AOTI_DEBUG_NAN_CHECK": "warn:naninf",
                                  "AOTI_DEBUG_LOGLEVEL": "1", "AOTI_DEBUG_SYNC": "1",
                                  "AOTI_DEBUG_LOGDEST": str(out / "1-first.log")}
    assert "[1] first run: input guards, NaN/Inf check (Inf too), level 1, sync: NaN/Inf (" in err, err


def test_a_bad_input_gets_the_guards_message_through_the_cpp_runner(packages, tmp_path):
    pt2 = packages.get("planted", **ALL)
    inputs = saved_inputs(tmp_path, "[t.double() for t in models.planted_inputs()]")
    code, lines, err = triage("--out", str(tmp_path / "t"), pt2, "--inputs", inputs)
    assert code == 1, "\n".join(lines) + err
    assert lines == ["a bad input: the model's input guard refused it"] + [
        f"  {x}.dtype is torch.float64, expected torch.float32" for x in "abcde"] + [
        f"everything it ran, with each log and command line: {tmp_path / 't'}"]


def test_a_clean_model_is_nothing_found_in_four_runs(packages, tmp_path):
    pt2 = packages.get("planted", **ALL)
    inputs = saved_inputs(tmp_path, "models.planted_inputs()")
    code, lines, err = triage("--out", str(tmp_path / "t"), pt2, "--inputs", inputs)
    assert code == 0, "\n".join(lines) + err
    assert lines == ["nothing found in 4 runs: input guards, NaN/Inf check, sync and the memory check clean, "
                     "and two identical runs agree at every launch",
                     f"everything it ran, with each log and command line: {tmp_path / 't'}"]
    assert steps(tmp_path / "t") == ["1-first.cmd.json", "2-memcheck.cmd.json", "3-repeat-a.cmd.json",
                                     "4-repeat-b.cmd.json"]


def test_an_op_writing_past_the_end_silently_is_named_by_the_memory_check(packages, membugs_so, tmp_path):
    """It runs clean on a CPU (the stray float lands in the allocator's slack): the memory check
    of the clean path names it."""
    pt2 = packages.get("overrun", MEMBUGS_SO=membugs_so, **ALL)
    inputs = saved_inputs(tmp_path, "models.example('overrun')[1]")
    code, lines, err = triage("--out", str(tmp_path / "t"), pt2, "--inputs", inputs, "--library", membugs_so)
    assert code == 1, "\n".join(lines) + err
    assert lines[0] == "clean without it, a memory bug named by the memory check:"
    assert re.fullmatch(r"memcheck: launch overrun:1\.\d+ membugs\.overrun\.default \(nodes=overrun source="
                        + re.escape(models.line_of("overrun.op")) + r"\) wrote past the end of buf\d+ .*", lines[1]), lines


def test_a_segfaulting_op_is_named_as_the_launch_in_flight(packages, mylib_so, tmp_path):
    pt2 = packages.get("gather", MYLIB_SO=mylib_so, **ALL)
    inputs = saved_inputs(tmp_path, "models.gather_inputs(crash=True)")
    code, lines, err = triage("--out", str(tmp_path / "t"), pt2, "--inputs", inputs, "--library", mylib_so)
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"a crash \(signal: SIGSEGV\); the launch in flight: gather:1\.\d+ "
                        r"mylib\.gather_rows\.default \(nodes=gather_rows source=" + re.escape(models.line_of("gather.op"))
                        + r"\), in its call mylib::gather_rows", lines[0]), lines
    assert steps(tmp_path / "t") == ["1-first.cmd.json", "2-memcheck.cmd.json"]


def test_a_hang_is_named_as_the_last_launch_that_started_and_its_runs_are_ended(packages, membugs_so, tmp_path):
    pt2 = packages.get("hang", MEMBUGS_SO=membugs_so, **ALL)
    inputs = saved_inputs(tmp_path, "(torch.arange(5, dtype=torch.float32) - 2,)")   # x + 1 < 0 at 0: it hangs
    code, lines, err = triage("--out", str(tmp_path / "t"), "--timeout", "12", pt2, "--inputs", inputs,
                              "--library", membugs_so, MEMBUGS_HANG_FILE=str(tmp_path / "stuck"))
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"a hang: no end after 12 s; the launch in flight: hang:1\.\d+ membugs\.hang\.default "
                        r"\(nodes=hang source=" + re.escape(models.line_of("hang.op")) + r"\)", lines[0]), lines
    assert "[1] first run: input guards, NaN/Inf check (Inf too), level 1, sync: a hang (the timeout) (" in err
    assert not [line for line in os.popen("ps -eo args").read().splitlines()   # each run's process was ended
                if "aoti-debug-run" in line and str(tmp_path) in line]


@pytest.mark.parametrize("argv, message", [
    ([], "expected `-- COMMAND [ARGS...]` or `PKG.pt2 --inputs IN.pt`"),
    (["m.pt2"], "m.pt2: a package is triaged with its inputs: m.pt2 --inputs IN.pt [--library LIB.so ...]"),
    (["m.pt2", "--inputs", "i.pt", "--repeat", "2"],
     "m.pt2: unrecognized arguments: --repeat 2 (accepted after a package: --inputs IN.pt, --library LIB.so)"),
    (["--timeout", "0", "--", "true"], "--timeout 0: a number of seconds above 0"),
])
def test_bad_usage_names_what_is_accepted(argv, message, tmp_path):
    code, lines, err = triage("--out", str(tmp_path / "t"), *argv)
    assert code == 2 and err.strip().splitlines()[-1] == f"aoti-debug triage: {message}", err


def test_an_out_folder_that_is_a_link_is_refused_and_nothing_written_through_it(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "t")
    code, lines, err = triage("--out", str(tmp_path / "t"), "--", "true")
    assert code == 2 and err.strip().splitlines()[-1] == (
        f"aoti-debug triage: --out {tmp_path / 't'}: not a folder of yours (a link, a file, or another "
        "user's); give a new folder or one you own"), err
    assert os.listdir(tmp_path / "elsewhere") == []
