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


def triage_package(tmp_path, pt2, inputs, *options, library=None, **env):
    """`triage` of a package through the C++ runner on the inputs the expression `inputs` makes
    (conftest.saved_inputs), its folder tmp_path/t; `options` go before the package."""
    argv = [pt2, "--inputs", saved_inputs(tmp_path, inputs)] + (["--library", library] if library else [])
    return triage("--out", str(tmp_path / "t"), *options, *argv, **env)


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
    more = lines.index(f"  more: aoti-debug nan-origin {out}/2-nan.log")
    # re-run alone in eager: sqrt of a negative is NaN in float64 too, the math's, not the kernel's
    assert re.fullmatch(r"not the kernel, nor the dtype: float64 makes NaN/Inf too, from these inputs "
                        r"\(buf\d+: 2 recorded, 2 in eager float32, 2 in float64\)", lines[more + 1]), lines
    assert re.fullmatch(r"  inputs made by: buf\d+ by layers:1\.4 aoti_torch_cpu_addmm_out \(module layers\.1\.fc\)",
                        lines[more + 2]), lines
    assert lines[more + 3] == (f"reproducer: {out}/repro/repro.py: makes the same NaN/Inf on its own (eager and "
                               "torch.compile match the recording)")
    assert lines[-2] == f"see more: {out}/report.html (of 2-nan.log)"
    assert lines[-1] == f"everything it ran, with each log and command line: {out}"
    assert len(lines) <= 15
    assert steps(out) == ["1-first.cmd.json", "2-nan.cmd.json", "3-dump.cmd.json", "4-extract.cmd.json",
                          "5-repro.cmd.json"]
    # each step can be rerun by hand: the command and the variables it ran with
    first = json.loads((out / "1-first.cmd.json").read_text())
    assert first["variables"] == {"AOTI_DEBUG_CHECK_INPUTS": "1", "AOTI_DEBUG_NAN_CHECK": "warn:naninf",
                                  "AOTI_DEBUG_LOGLEVEL": "1", "AOTI_DEBUG_SYNC": "1",
                                  "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1",
                                  "AOTI_DEBUG_BLACKBOX": "64", "AOTI_DEBUG_BLACKBOX_MAX_MB": "64",
                                  "AOTI_DEBUG_DUMP_DIR": str(out / "1-first.d"),
                                  "AOTI_DEBUG_LOGDEST": str(out / "1-first.log")}
    dump = json.loads((out / "3-dump.cmd.json").read_text())["variables"]
    assert dump["AOTI_DEBUG_LOGLEVEL"] == "10" and re.fullmatch(r"cpp_fused_sqrt_\d+", dump["AOTI_DEBUG_KERNELS"])
    assert (out / "report.html").stat().st_mode & 0o777 == 0o600
    assert ("[1] first run: input guards, NaN/Inf check (Inf too), level 1, sync, no caching allocator, "
            "blocking launches, the black box: NaN/Inf (") in err, err


def test_under_torchrun_the_rank_that_made_nan_is_named_and_its_own_dump_reproduces_it(packages, tmp_path):
    """Two ranks serve the same package; rank 0's input keeps it finite, so only rank 1 makes NaN.
    Each step's log holds both ranks' records; the answer names rank 1, and the level-10 run
    dumps each rank into its own folder, so the reproducer is rank 1's launch."""
    pt2 = packages.get("layers", **ALL)
    script = tmp_path / "serve_rank.py"
    script.write_text(f"""
import os, sys, torch
sys.path.insert(0, {TESTS!r}); import models
m = torch._inductor.aoti_load_package({pt2!r})
x, = models.example("layers")[1]
# rank 0's input is large enough that layer 1's planted bias leaves every value positive
print(os.environ["RANK"], m(x * 1e6 if os.environ["RANK"] == "0" else x))
""")
    out = tmp_path / "t"
    code, lines, err = triage("--out", str(out), "--", sys.executable, "-m", "torch.distributed.run",
                              "--nproc-per-node=2", str(script))
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"NaN/Inf origin: launch layers:1\.5 cpp_fused_sqrt_\d+ \(rank 1, pid \d+, 2-nan\.log:\d+\)",
                        lines[0]), lines
    assert lines[1] == f"  source: {models.line_of('layers.sqrt')}, module layers.1"
    dump = json.loads((out / "3-dump.cmd.json").read_text())["variables"]["AOTI_DEBUG_DUMP_DIR"]
    assert dump == str(out / "3-dump.d" / "rank%r")
    assert sorted(os.listdir(out / "3-dump.d")) == ["rank0", "rank1"]
    assert f"reproducer: {out}/repro/repro.py: makes the same NaN/Inf on its own (eager and torch.compile match " \
           "the recording)" in lines


def test_a_package_that_disagrees_with_its_eager_reference_is_named_at_the_node(packages, tmp_path):
    """Clean in every run, and two runs agree; the command swaps the custom op for a wrong one,
    so the reference script's eager log (aoti_debug.eager_log) names the node that diverges."""
    pt2 = packages.get("scaled", AOTI_DEBUG_LOGLEVEL="10")    # test_eager_reference.py's package
    reference = tmp_path / "reference.py"
    reference.write_text(f"""
import sys; sys.path.insert(0, {TESTS!r})
import aoti_debug, models
model, args, dynamic = models.seeded("scaled")
aoti_debug.eager_log(model, args, dynamic_shapes=dynamic)
""")
    out = tmp_path / "t"
    code, lines, err = triage("--out", str(out), "--reference", str(reference), "--", sys.executable, "-c", f"""
import sys, torch; sys.path.insert(0, {TESTS!r}); import models
models.fast_scale.register_kernel("cpu")(lambda x: x * 3.5)
print(torch._inductor.aoti_load_package({pt2!r})(*models.example("scaled")[1]))""")
    assert code == 1, "\n".join(lines) + err
    assert lines[0] == "the command disagrees with its eager reference:"
    assert lines[1] == ("first divergence: node fast_scale: A eager:1.3 aotid_test.fast_scale.default / "
                        "B scaled:1.2 aotid_test.fast_scale.default")
    assert lines[2:4] == [f"  source: {models.line_of('scaled.op')}", "  nodes:  fast_scale"]
    assert f"  more: aoti-debug diff {out}/5-reference.log {out}/3-repeat-a.log" in lines
    assert steps(out)[-1] == "5-reference.cmd.json"


def test_a_bad_input_gets_the_guards_message_through_the_cpp_runner(packages, tmp_path):
    pt2 = packages.get("planted", **ALL)
    code, lines, err = triage_package(tmp_path, pt2, "[t.double() for t in models.planted_inputs()]")
    assert code == 1, "\n".join(lines) + err
    assert lines == ["a bad input: the model's input guard refused it"] + [
        f"  {x}.dtype is torch.float64, expected torch.float32" for x in "abcde"] + [
        f"see more: {tmp_path / 't' / 'report.html'} (of 1-first.log)",
        f"everything it ran, with each log and command line: {tmp_path / 't'}"]


def test_a_clean_model_is_nothing_found_in_four_runs(packages, tmp_path):
    pt2 = packages.get("planted", **ALL)
    code, lines, err = triage_package(tmp_path, pt2, "models.planted_inputs()")
    assert code == 0, "\n".join(lines) + err
    assert lines == ["nothing found in 4 runs: input guards, NaN/Inf check, sync and the memory check clean, "
                     "and two identical runs agree at every launch",
                     f"see more: {tmp_path / 't' / 'report.html'} (of 4-repeat-b.log)",
                     f"everything it ran, with each log and command line: {tmp_path / 't'}"]
    assert steps(tmp_path / "t") == ["1-first.cmd.json", "2-memcheck.cmd.json", "3-repeat-a.cmd.json",
                                     "4-repeat-b.cmd.json"]


def test_an_op_writing_past_the_end_silently_is_named_by_the_memory_check(packages, membugs_so, tmp_path):
    """It runs clean on a CPU (the stray float lands in the allocator's slack): the memory check
    of the clean path names it."""
    pt2 = packages.get("overrun", MEMBUGS_SO=membugs_so, **ALL)
    code, lines, err = triage_package(tmp_path, pt2, "models.example('overrun')[1]", library=membugs_so)
    assert code == 1, "\n".join(lines) + err
    assert lines[0] == "clean without it, a memory bug named by the memory check:"
    assert re.fullmatch(r"memcheck: launch overrun:1\.\d+ membugs\.overrun\.default \(nodes=overrun source="
                        + re.escape(models.line_of("overrun.op")) + r"\) wrote past the end of buf\d+ .*", lines[1]), lines
    # its reproducer fails alone: its AOTI package, compiled with the memory check, names the op
    assert re.fullmatch(re.escape(f"reproducer: {tmp_path}/t/repro/repro.py: fails on its own: AOTI: could not run: "
                                  "RuntimeError: aoti-debug memcheck: launch launch:1.1 membugs.overrun.default "
                                  "(nodes=overrun source=") + r".*repro\.py:\d+\) wrote past the end of buf\d+ .*",
                        lines[-3]), lines
    repro = json.loads((tmp_path / "t" / "5-repro.cmd.json").read_text())
    assert repro["variables"] == {"AOTI_DEBUG_COMPILE": "all", "AOTI_DEBUG_MEMCHECK": "raise"}


def test_an_op_whose_fake_is_wrong_under_dynamic_shapes_is_named_and_fails_alone(packages, membugs_so, tmp_path):
    """membugs::pad4 returns 4 rows fewer than its fake claims when the tokens (a dynamic size) are
    a multiple of 4: the first run's plan check names it; the reproducer, exported at those
    sizes and compiled with the memory check, fails on its own with the same words."""
    pt2 = packages.get("badfake", MEMBUGS_SO=membugs_so, **ALL)
    code, lines, err = triage_package(tmp_path, pt2, "(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)),)",
                                      library=membugs_so)
    assert code == 1, "\n".join(lines) + err
    assert lines[0] == "a memory bug named by the plan check:"
    planned = re.escape(f"membugs.pad4.default (nodes=pad4 source={models.line_of('badfake.op')}) returned ") + \
        r"buf\d+ of shape \(8, 16\) where the graph planned \(12, 16\): .*"
    assert re.fullmatch(r"plan-check: launch badfake:1\.\d+ " + planned, lines[1]), lines
    assert re.fullmatch(re.escape(f"reproducer: {tmp_path}/t/repro/repro.py: fails on its own: AOTI: could not run: ")
                        + r"RuntimeError: aoti-debug plan check: launch launch:1\.\d+ membugs\.pad4\.default .*",
                        lines[2]), lines


def test_a_launch_whose_outputs_differ_between_identical_runs_is_named(packages, membugs_so, tmp_path):
    """membugs::racy's last element differs in every run, as a race's outcome does: the memory
    check sees nothing, and the two identical level-5 runs name its launch."""
    pt2 = packages.get("racy", MEMBUGS_SO=membugs_so, **ALL)
    code, lines, err = triage_package(tmp_path, pt2, "models.example('racy')[1]", library=membugs_so)
    assert code == 1, "\n".join(lines) + err
    assert lines[0] == "two identical runs differ (a race, or memory read before anything wrote it):"
    assert re.fullmatch(r"first divergence: A racy:1\.(\d+) membugs\.racy\.default / B racy:1\.\1 "
                        r"membugs\.racy\.default", lines[1]), lines
    assert lines[2] == f"  source: {models.line_of('racy.op')}"
    assert steps(tmp_path / "t") == ["1-first.cmd.json", "2-memcheck.cmd.json", "3-repeat-a.cmd.json",
                                     "4-repeat-b.cmd.json"]


def test_a_segfaulting_op_is_named_as_the_launch_in_flight(packages, mylib_so, tmp_path):
    pt2 = packages.get("gather", MYLIB_SO=mylib_so, **ALL)
    no_sanitizer = ":".join(d for d in os.environ["PATH"].split(":")       # the steps without it
                            if not os.path.exists(os.path.join(d, "compute-sanitizer")))
    code, lines, err = triage_package(tmp_path, pt2, "models.gather_inputs(crash=True)", library=mylib_so,
                                      PATH=no_sanitizer)
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"a crash \(signal: SIGSEGV\); the launch in flight: gather:1\.\d+ "
                        r"mylib\.gather_rows\.default \(nodes=gather_rows source=" + re.escape(models.line_of("gather.op"))
                        + r"\), in its call mylib::gather_rows", lines[0]), lines
    # the first run's black box kept the launches before the crash
    box = tmp_path / "t" / "1-first.d"
    assert lines[1] == f"black box: the inputs of the last launches before it, in {box} (aoti-debug blackbox recover {box})"
    assert [f for f in os.listdir(box) if f.endswith(".ring")]
    # a level-10 run filtered to it dumps its inputs; extracted, the launch crashes on its own
    assert lines[2] == f"reproducer: {tmp_path}/t/repro/repro.py: fails on its own: it crashes (SIGSEGV)"
    assert steps(tmp_path / "t") == ["1-first.cmd.json", "2-memcheck.cmd.json", "3-dump.cmd.json",
                                     "4-extract.cmd.json", "5-repro.cmd.json"]
    assert sorted(os.listdir(tmp_path / "t" / "repro")) == ["inputs.pt", "recorded.pt", "repro.py"]


def test_compute_sanitizer_on_path_names_the_launch_of_the_kernel_it_reports(packages, mylib_so, tmp_path):
    """A stand-in `compute-sanitizer` (no GPU here) runs the command and reports, in the tool's
    documented format, a fault in the kernel of the last launch the run's log started: its
    report is matched to that launch's nodes and line."""
    pt2 = packages.get("gather", MYLIB_SO=mylib_so, **ALL)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "compute-sanitizer"
    tool.write_text(f"""#!{sys.executable}
import os, re, subprocess, sys
assert sys.argv[1:3] == ["--tool", "memcheck"], sys.argv
code = subprocess.call(sys.argv[3:])
kernels = re.findall(r"\\] launch \\S+ (\\S+)", open(os.environ["AOTI_DEBUG_LOGDEST"]).read())
print("========= COMPUTE-SANITIZER")
print("program output between the tool's lines")
print("========= Invalid __global__ read of size 4 bytes")
print(f"=========     at {{kernels[-1]}}+0x1d0")
print("=========     by thread (7,0,0) in block (1,0,0)")
print("=========     Address 0x7f00deadbe00 is out of bounds")
print("=========")
print("========= ERROR SUMMARY: 1 error")
sys.exit(code)
""")
    tool.chmod(0o700)
    code, lines, err = triage_package(tmp_path, pt2, "models.gather_inputs(crash=True)", library=mylib_so,
                                      PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"compute-sanitizer: Invalid __global__ read of size 4 bytes in mylib\.gather_rows\.default "
                        r"\(thread \(7,0,0\) block \(1,0,0\); Address 0x7f00deadbe00 is out of bounds\) = launch "
                        r"gather:1\.\d+ \(nodes=gather_rows source=" + re.escape(models.line_of("gather.op")) + r"\)",
                        lines[2]), lines
    assert steps(tmp_path / "t")[2] == "3-sanitizer.cmd.json"
    ran = json.loads((tmp_path / "t" / "3-sanitizer.cmd.json").read_text())
    assert ran["command"][:3] == [str(tool), "--tool", "memcheck"] and ran["variables"]["AOTI_DEBUG_LOGLEVEL"] == "3"


def test_a_hang_is_named_as_the_last_launch_that_started_and_its_runs_are_ended(packages, membugs_so, tmp_path):
    pt2 = packages.get("hang", MEMBUGS_SO=membugs_so, **ALL)
    # x + 1 < 0 at 0: it hangs
    code, lines, err = triage_package(tmp_path, pt2, "(torch.arange(5, dtype=torch.float32) - 2,)", "--timeout", "12",
                                      library=membugs_so, MEMBUGS_HANG_FILE=str(tmp_path / "stuck"))
    assert code == 1, "\n".join(lines) + err
    assert re.fullmatch(r"a hang: no end after 12 s; the launch in flight: hang:1\.\d+ membugs\.hang\.default "
                        r"\(nodes=hang source=" + re.escape(models.line_of("hang.op")) + r"\)", lines[0]), lines
    assert ("[1] first run: input guards, NaN/Inf check (Inf too), level 1, sync, no caching allocator, "
            "blocking launches, the black box: a hang (the timeout) (") in err
    box = tmp_path / "t" / "1-first.d"
    assert lines[1] == f"black box: the inputs of the last launches before it, in {box} (aoti-debug blackbox recover {box})"
    assert lines[2] == f"reproducer: {tmp_path}/t/repro/repro.py: hangs on its own too (no end after 12 s)"
    assert not [line for line in os.popen("ps -eo args").read().splitlines()   # each run's process was ended
                if str(tmp_path) in line]      # the runner's, and the reproducer's


def test_ctrl_c_ends_the_run_and_its_process_group_and_says_the_chain_stopped_short(tmp_path):
    import signal
    import subprocess
    import time
    marker = f"triage-sleeps-{os.getpid()}"
    # Ctrl-C as a terminal gives it: SIGINT at its default, which a suite started in the
    # background (SIGINT ignored, inherited) would otherwise pass on to triage
    proc = subprocess.Popen([sys.executable, "-m", "aoti_debug", "triage", "--out", str(tmp_path / "t"), "--",
                             "sh", "-c", f"sleep 60; echo {marker}"], env=clean_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (tmp_path / "t" / "1-first.cmd.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, out + err
    assert out.splitlines() == ["interrupted (Ctrl-C): no run ended",
                                f"everything it ran, with each log and command line: {tmp_path / 't'}"]
    assert not [line for line in os.popen("ps -eo args").read().splitlines() if marker in line and "sleep" in line]


def test_a_command_without_aoti_debug_is_not_called_clean_and_cwd_is_where_it_runs(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    code, lines, err = triage("--out", str(tmp_path / "t"), "--cwd", str(scratch), "--", "sh", "-c", "echo x >> made.txt")
    assert code == 4, "\n".join(lines) + err
    assert lines == ["not a verdict: the command ran and wrote no aoti-debug log, so what it runs carries no "
                     "aoti-debug instrumentation (compile it with AOTI_DEBUG_COMPILE=all)",
                     f"everything it ran, with each log and command line: {tmp_path / 't'}"]
    assert (scratch / "made.txt").read_text() == "x\n"
    assert json.loads((tmp_path / "t" / "1-first.cmd.json").read_text())["cwd"] == str(scratch)


@pytest.mark.parametrize("outputs, said", [
    ([dict(name="buf3", nonfinite=2, eager_nonfinite=0, wide_nonfinite=0, dtype="float32", skipped="")],
     ["the kernel is wrong: eager gives no NaN/Inf on the same inputs (buf3: 2 recorded, 0 in eager float32, "
      "0 in float64)"]),
    ([dict(name="buf3", nonfinite=4, eager_nonfinite=4, wide_nonfinite=0, dtype="float16", skipped="")],
     ["the math leaves float16's range: eager makes NaN/Inf too, float64 none (buf3: 4 recorded, 4 in eager "
      "float16, 0 in float64)"]),
    ([dict(name="buf3", nonfinite=1, eager_nonfinite=1, wide_nonfinite=None, dtype="bfloat16", skipped="")],
     ["not the kernel: eager makes NaN/Inf too; float64 not run (buf3: 1 recorded, 1 in eager bfloat16)"]),
    ([dict(name="buf3", nonfinite=0, eager_nonfinite=0, wide_nonfinite=0, dtype="float32", skipped=""),
      dict(name="buf4", nonfinite=0, eager_nonfinite=0, wide_nonfinite=None, dtype="its dtype",
           skipped="no file was dumped for it")],
     ["whose NaN/Inf: not told (the re-run launch's recorded outputs hold none: buf4: no file was dumped for it)"]),
])
def test_whose_nan_it_is_follows_eager_in_its_dtype_and_float64(outputs, said):
    from aoti_debug.commands import triage as t
    assert t._nan_kind(t.Judged(outputs=outputs), None, None) == said
    assert t._nan_kind(t.Judged(error="check cannot re-run it: x"), None, None) == [
        "whose NaN/Inf: not told (check cannot re-run it: x)"]


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
