"""The black box (AOTI_DEBUG_BLACKBOX, docs/dumps.md "The black box"): the last
launches of a process, kept through SIGKILL and a segfault, dumped when a
check fires, recovered by `aoti-debug blackbox recover`, and read back by
replay, nan-origin and extract.  Every model runs in a fresh process."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from aoti_debug.cli import main
from aoti_debug.native import core
from conftest import TESTS, clean_env, run_python, without_torch_logs
import models

pytestmark = pytest.mark.slow

BOX = dict(AOTI_DEBUG_BLACKBOX="64")


def command(*argv, capsys):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def loop_code(pt2, calls, inputs, last_inputs):
    """A process that loads `pt2` and calls it `calls` times, the last call with `last_inputs`."""
    return f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({pt2!r})
        for call in range(1, {calls}):
            m(*{inputs})
        print("last call", flush=True)
        m(*{last_inputs})
        print("returned", flush=True)
    """


def manifests(folder):
    """{run folder name: its manifest lines} of a black box dump folder."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "manifest.jsonl"))):
        with open(path) as f:
            out[os.path.basename(os.path.dirname(path))] = [json.loads(line) for line in f]
    return out


def launches(folder):
    """(id, event, status) of every launch line of a dump folder, in run and launch order."""
    runs = manifests(folder)
    order = sorted(runs, key=lambda name: int(name.rsplit("run", 1)[1]))
    return [(e["id"], e["event"], e["status"]) for name in order for e in runs[name] if e["kind"] == "launch"]


def assert_planted_nan_check(line, launch):
    """The NaN check's line on the planted sqrt (its kernel's name and buffer are Inductor's: they
    differ between releases)."""
    assert re.fullmatch(
        rf"aoti-debug nan-check: launch {re.escape(launch)} cpp_fused_\w*sqrt\w* \(source "
        rf"{re.escape(models.line_of('planted.sqrt'))}\) wrote 1 NaN into buf\d+ \(first at flat index 1\); "
        r"its inputs held no NaN, so this launch is where NaN first appears", line), line


def ring_of(dump_dir):
    (ring,) = glob.glob(os.path.join(dump_dir, "*-blackbox.ring"))
    return ring


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def hang(packages, membugs_so):
    return packages.get("hang", MEMBUGS_SO=membugs_so, **BOX)


@pytest.fixture(scope="module")
def planted_box(packages):
    return packages.get("planted", AOTI_DEBUG_NAN_CHECK="warn:nan", **BOX)


@pytest.fixture(scope="module")
def gather_box(packages, mylib_so):
    return packages.get("gather", MYLIB_SO=mylib_so, **BOX)


# ---------------------------------------------------------------- SIGKILL

def kill_in_the_hang(code, tmp, **env):
    """Runs `code` until the membugs::hang op is stuck, then kills it with SIGKILL:
    (pid, its dump directory)."""
    import textwrap
    dumps, stuck = tmp / "dumps", tmp / "stuck"
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean_env(MEMBUGS_HANG_FILE=stuck, AOTI_DEBUG_DUMP_DIR=dumps, **env))
    deadline = time.time() + 300
    while not stuck.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert stuck.exists(), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL and out.splitlines()[-1] == "last call", out + err
    return proc.pid, str(dumps)


@pytest.fixture(scope="module")
def killed(hang, membugs_so, tmp_path_factory):
    """A loop over the hang model killed with SIGKILL inside call 40's custom op, its
    ring asked at run time for 16 of the 64 launches compiled in (replay starts a
    process a run: 6 runs, not 22)."""
    code = loop_code(hang, 40, "(torch.arange(5, dtype=torch.float32) + call,)",
                     "(torch.tensor([-100.0, 1.0, 2.0, 3.0, 4.0]),)")
    return kill_in_the_hang(code, tmp_path_factory.mktemp("killed"), MEMBUGS_SO=membugs_so,
                            AOTI_DEBUG_BLACKBOX="16")


def test_sigkill_leaves_the_ring_and_recover_names_the_launch_in_flight(killed, capsys):
    pid, dumps = killed
    ring = ring_of(dumps)
    assert os.path.basename(ring) == f"{pid}-blackbox.ring"
    assert os.path.getsize(ring) == 256 << 20          # the default AOTI_DEBUG_BLACKBOX_MAX_MB, never more
    code, out, err = command("blackbox", "recover", dumps, capsys=capsys)
    folder = os.path.join(dumps, f"{pid}-blackbox")
    assert (code, err) == (0, ""), out + err
    assert out.splitlines() == [
        f"recovered {ring} into {folder!r}: the last 16 launches of 6 runs",
        f"in flight: launch 40.2 membugs.hang.default of model 'hang' (thread {pid})"]
    lines = launches(folder)
    # three launches a run (x + 1, the op, fc fused with the sum): the last 16 end with run 40's op
    every = [f"{r}.{k}" for r in range(1, 40) for k in (1, 2, 3)] + ["40.1", "40.2"]
    assert [l[0] for l in lines if l[1] == "before"] == every[-16:] == ["35.2", "35.3", *every[-14:]]
    # every launch before it returned; the one in flight has its inputs and nothing after
    assert lines[-1] == ("40.2", "before", "running")
    assert lines[-2] == ("40.1", "after", "incomplete")
    (last,) = [e for e in manifests(folder)[f"{pid}-hang-run40"] if e.get("id") == "40.2"]
    assert [(f["name"], f["role"]) for f in last["files"]] == [("buf0", "in")]
    held = torch.load(os.path.join(folder, f"{pid}-hang-run40", last["files"][0]["file"]), weights_only=True)
    assert held.tolist() == [-99.0, 2.0, 3.0, 4.0, 5.0]      # x + 1 of the last call
    # the artifact's weights are described, not copied
    (fc,) = [e for e in manifests(folder)[f"{pid}-hang-run39"] if e.get("id") == "39.3" and e["event"] == "before"]
    assert [f for f in fc["files"] if f["name"] == "fc_weight"] == [{
        "name": "fc_weight", "role": "in", "file": None,
        "error": "a constant of the artifact (a weight): the black box does not copy it (replay takes it from --package)"}]
    assert last["source"] == models.line_of("hang.op")


def test_replay_of_the_recovered_launches_passes(killed, hang, membugs_so, capsys, monkeypatch):
    pid, dumps = killed
    folder = os.path.join(dumps, f"{pid}-blackbox")
    if not os.path.isdir(folder):
        assert command("blackbox", "recover", dumps, capsys=capsys)[0] == 0
    monkeypatch.delenv("MEMBUGS_HANG_FILE", raising=False)    # the op returns in the replay
    code, out, err = command("replay", folder, "--package", hang, "--library", membugs_so, capsys=capsys)
    # the process was killed inside launch 40.2: replayed from its inputs, but the run is not clean
    assert code == 3, out + err
    assert re.fullmatch(r"the run never finished:\n  launch 40\.2 membugs\.hang\.default never finished "
                        r"\(\S+/\d+-hang-run40/manifest\.jsonl:\d+ has no after line\); its outputs are unknown",
                        "\n".join(out.splitlines()[:2])), out
    assert out.splitlines()[-1] == "16 passed, 0 failed"
    # named as the log names it (model:R.K)
    assert "PASS launch hang:40.2 membugs.hang.default (inputs) max_abs=0 max_rel=0" in out.splitlines()


def test_replay_names_the_launches_that_kept_nothing(packages, tmp_path, capsys):
    """a @ b reads only weights (described, not copied) and the sin of a range reads
    nothing: replay says so for each, and compares the rest."""
    weighted = packages.get("weighted", **BOX)
    dumps = tmp_path / "dumps"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug.blackbox
        m = torch._inductor.aoti_load_package({weighted!r})
        m(*models.example("weighted")[1])
        aoti_debug.blackbox.dump()
    """, env=clean_env(AOTI_DEBUG_DUMP_DIR=dumps))
    (folder,) = glob.glob(os.path.join(dumps, "*-blackbox"))
    (run,) = manifests(folder).values()
    kernel = {e["id"]: e["kernel"] for e in run if e["kind"] == "launch"}
    assert list(kernel) == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    assert [e["model"] for e in run if e["event"] == "run"] == ["weighted"]
    code, out, err = command("replay", folder, "--package", weighted, capsys=capsys)
    weights = ("a, b: a constant of the artifact (a weight): the black box does not copy it "
               "(replay takes it from --package)")
    no_outputs = "the black box keeps a launch's inputs, not its outputs"
    assert (code, err) == (0, ""), out + err
    assert out.splitlines() == [
        f"SKIP launch weighted:1.1 {kernel['1.1']} nothing kept to compare: {weights}; buf0: {no_outputs}",
        f"PASS launch weighted:1.2 {kernel['1.2']} (inputs) max_abs=0 max_rel=0",
        f"PASS launch weighted:1.3 {kernel['1.3']} (inputs) max_abs=0 max_rel=0",
        f"SKIP launch weighted:1.4 {kernel['1.4']} nothing kept to compare: buf3: {no_outputs}",
        f"PASS launch weighted:1.5 {kernel['1.5']} (inputs) max_abs=0 max_rel=0",
        "3 passed, 0 failed, 2 skipped"]


def test_a_live_process_ring_is_never_touched(hang, membugs_so, tmp_path, capsys):
    dumps, stuck = tmp_path / "dumps", tmp_path / "stuck"
    import textwrap
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(loop_code(
        hang, 3, "(torch.arange(5, dtype=torch.float32),)", "(torch.tensor([-100.0, 1.0, 2.0, 3.0, 4.0]),)"))],
        env=clean_env(MEMBUGS_SO=membugs_so, MEMBUGS_HANG_FILE=stuck, AOTI_DEBUG_DUMP_DIR=dumps),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 300
        while not stuck.exists() and time.time() < deadline:
            time.sleep(0.05)
        ring = ring_of(str(dumps))
        before = open(ring, "rb").read()
        code, out, err = command("blackbox", "recover", str(dumps), capsys=capsys)
        assert (code, out) == (1, "")
        assert err == (f"aoti-debug blackbox: {ring!r}: process {proc.pid} is still running, so its ring is "
                       f"left alone (it dumps on SIGUSR2: kill -USR2 {proc.pid})\n")
        assert sorted(os.listdir(dumps)) == [".aoti-debug-ledger", os.path.basename(ring)]
        assert open(ring, "rb").read() == before
    finally:
        proc.kill()
        proc.communicate()


# ---------------------------------------------------------------- a check fires

@pytest.fixture(scope="module")
def nan_at_500(planted_box, tmp_path_factory):
    """500 calls of the planted model, the 500th with a negative number under its sqrt;
    the NaN check warns and the run goes on."""
    dumps = tmp_path_factory.mktemp("nan500") / "dumps"
    proc = run_python(loop_code(planted_box, 500, "models.planted_inputs()", "models.planted_inputs('sqrt')"),
                      env=clean_env(AOTI_DEBUG_DUMP_DIR=dumps))
    return proc, str(dumps)


def test_a_nan_at_call_500_dumps_the_last_64_launches_up_to_its_origin(nan_at_500):
    proc, dumps = nan_at_500
    assert proc.stdout.splitlines()[-1] == "returned"       # warn: the model went on
    pid = int(os.path.basename(ring_of(dumps)).split("-")[0])
    folder = os.path.join(dumps, f"{pid}-blackbox")
    # level 0: the checks speak on stderr; the dump is made once, at the first launch that fires
    first, second = without_torch_logs(proc.stderr).splitlines()[:2]
    assert_planted_nan_check(first, "planted:500.1")
    assert second == f"aoti-debug blackbox: nan-check: the black box is in {folder!r}: the last 64 launches of 22 runs"
    lines = launches(folder)
    # three launches a run: the last 64 end with the one whose check fired
    every = [f"{r}.{k}" for r in range(1, 500) for k in (1, 2, 3)] + ["500.1"]
    assert [l[0] for l in lines if l[1] == "before"] == every[-64:]
    # the launch that made the NaN is the last one, with its outputs
    assert lines[-2:] == [("500.1", "before", "running"), ("500.1", "after", "ok")]


def test_nan_origin_on_the_dump_names_the_planted_launch_and_line(nan_at_500, capsys):
    proc, dumps = nan_at_500
    pid = int(os.path.basename(ring_of(dumps)).split("-")[0])
    code, out, err = command("nan-origin", os.path.join(dumps, f"{pid}-blackbox"), capsys=capsys)
    assert code == 1, out + err
    lines = out.splitlines()
    assert re.fullmatch(rf"NaN/Inf origin: launch planted:500\.1 cpp_fused_\w+ \(pid {pid}, {pid}-planted-run500/"
                        r"manifest\.jsonl:\d+\)", lines[0]), out
    assert lines[1] == f"  source: {models.line_of('planted.sqrt')}"


# ---------------------------------------------------------------- a segfault

@pytest.fixture(scope="module")
def segfault_at_300(gather_box, mylib_so, tmp_path_factory):
    """300 calls of the gather model, the 300th with an index far outside x: the custom op
    reads unmapped memory and the process dies of SIGSEGV."""
    dumps = tmp_path_factory.mktemp("segv300") / "dumps"
    proc = run_python(loop_code(gather_box, 300, "models.gather_inputs()", "models.gather_inputs(crash=True)"),
                      env=clean_env(MYLIB_SO=mylib_so, AOTI_DEBUG_DUMP_DIR=dumps), check=False)
    assert proc.returncode == -signal.SIGSEGV and proc.stdout.splitlines()[-1] == "last call", proc.stderr
    return str(dumps)


def test_a_segfault_leaves_the_crashing_launch_with_its_inputs(segfault_at_300, capsys):
    ring = ring_of(segfault_at_300)
    pid = int(os.path.basename(ring).split("-")[0])
    code, out, err = command("blackbox", "recover", segfault_at_300, capsys=capsys)
    assert (code, err) == (0, ""), out + err
    assert out.splitlines()[1:] == [f"in flight: launch 300.4 mylib.gather_rows.default of model 'gather' "
                                    f"(thread {pid})"]
    folder = os.path.join(segfault_at_300, f"{pid}-blackbox", f"{pid}-gather-run300")
    (before,) = [e for e in manifests(os.path.dirname(folder))[f"{pid}-gather-run300"] if e.get("id") == "300.4"]
    idx = torch.load(os.path.join(folder, next(f["file"] for f in before["files"] if f["name"] == "idx")),
                     weights_only=True)
    assert idx.tolist() == models.gather_inputs(crash=True)[1].tolist()


def test_extract_of_the_crashing_launch_reproduces_the_segfault(segfault_at_300, mylib_so, capsys, tmp_path):
    pid = int(os.path.basename(ring_of(segfault_at_300)).split("-")[0])
    folder = os.path.join(segfault_at_300, f"{pid}-blackbox")
    if not os.path.isdir(folder):
        assert command("blackbox", "recover", segfault_at_300, capsys=capsys)[0] == 0
    out_dir = tmp_path / "repro"
    torch.ops.load_library(mylib_so)     # what --allow-module does for a module that registers the op
    code, out, err = command("extract", "300.4", "--dir", folder, "-o", str(out_dir), capsys=capsys)
    assert (code, err) == (0, ""), out + err
    script = (out_dir / "repro.py").read_text()
    assert "torch.ops.mylib.gather_rows.default(" in script
    proc = run_python(f"""
        import runpy, sys, torch
        torch.ops.load_library({mylib_so!r})
        sys.argv = [{str(out_dir / 'repro.py')!r}]
        runpy.run_path(sys.argv[0], run_name="__main__")
    """, env=clean_env(), cwd=str(tmp_path), check=False, timeout=600)
    assert proc.returncode == -signal.SIGSEGV, proc.stdout + proc.stderr


# ---------------------------------------------------------------- two processes, a torn ring

@pytest.fixture(scope="module")
def two_rings(hang, membugs_so, tmp_path_factory):
    """Two processes calling the hang model 30 times into one dump directory at once,
    each with a 1 MB ring."""
    import textwrap
    dumps = tmp_path_factory.mktemp("two") / "dumps"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(loop_code(
        hang, 30, "(torch.arange(5, dtype=torch.float32) + call,)", "(torch.ones(5),)"))],
        env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX_MAX_MB="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.splitlines()[-1] == "returned", out + err
    return [p.pid for p in procs], str(dumps)


def test_two_processes_keep_two_rings_and_recover_gives_each_its_own_folder(two_rings, capsys):
    pids, dumps = two_rings
    rings = sorted(glob.glob(os.path.join(dumps, "*.ring")))
    assert rings == sorted(os.path.join(dumps, f"{pid}-blackbox.ring") for pid in pids)
    assert all(os.path.getsize(r) == 1 << 20 for r in rings)
    code, out, err = command("blackbox", "recover", dumps, capsys=capsys)
    assert (code, err) == (0, ""), out + err
    assert sorted(out.splitlines()) == sorted(
        f"recovered {os.path.join(dumps, f'{pid}-blackbox.ring')} into "
        f"{os.path.join(dumps, f'{pid}-blackbox')!r}: the last 64 launches of 22 runs" for pid in pids)
    for pid in pids:
        runs = sorted(manifests(os.path.join(dumps, f"{pid}-blackbox")))
        assert runs == sorted(f"{pid}-hang-run{r}" for r in range(9, 31))
        assert {e["pid"] for name in runs for e in manifests(os.path.join(dumps, f"{pid}-blackbox"))[name]
                if e["event"] == "run"} == {pid}


def entry_heads(data):
    """(offset, seq, length) of every entry head in a ring image, found by its magic."""
    import struct
    found, at = [], data.find(b"BBX1")
    while at >= 0:
        seq, pos, length = struct.unpack_from("<QQQ", data, at + 16)
        found.append((at, seq, length))
        at = data.find(b"BBX1", at + 1)
    return found


def test_a_ring_cut_at_every_byte_of_its_last_entry_never_gives_part_of_it(two_rings, tmp_path, capsys):
    pids, dumps = two_rings
    data = open(os.path.join(dumps, f"{pids[0]}-blackbox.ring"), "rb").read()
    status, whole = core.blackbox_entries(data)
    assert status == "ok" and whole[-1].startswith("launch ") and " 30.3 done hang " in whole[-1]
    last_seq = int(whole[-1].split()[1])
    (at, _, length), = [h for h in entry_heads(data) if h[1] == last_seq]
    for cut in range(at, at + length + 1):
        status, got = core.blackbox_entries(data[:cut])
        entries = [line for line in got if not line.startswith("note: ")]
        assert status == "ok" and set(entries) <= set(whole), (cut, got)
        assert (whole[-1] in entries) == (cut == at + length), cut
        if cut < at + length:
            assert f"note: the file is truncated: {cut} of its {1 << 20} bytes; entries past the end are lost" in got
    # a torn entry (a page that never reached the disk) is left out, with a note
    torn = bytearray(data)
    torn[at + 128:at + length] = bytes(length - 128)      # all after its head reads as zeros
    status, got = core.blackbox_entries(bytes(torn))
    assert status == "ok"
    assert [line for line in got if not line.startswith("note: ")] == whole[:-1]
    assert got[-1] == "note: 1 entry is torn (not as written: a bad checksum or layout) and left out"
    # and recover writes what is whole: the launch before it is the last one
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / f"{pids[0]}-blackbox.ring").write_bytes(data[:at + length // 2])
    code, out, err = command("blackbox", "recover", str(cut), capsys=capsys)
    assert (code, err) == (0, ""), out + err
    assert out.splitlines()[1:] == [
        f"note: the file is truncated: {at + length // 2} of its {1 << 20} bytes; entries past the end are lost",
        "note: 1 entry lies past the end of the file and is left out"]
    assert launches(str(cut / f"{pids[0]}-blackbox"))[-2:] == [("30.2", "before", "running"),
                                                               ("30.2", "after", "incomplete")]


# ---------------------------------------------------------------- asked for

def test_python_asks_for_a_dump_and_a_run_cannot_keep_more_than_compiled(hang, membugs_so, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        m = torch._inductor.aoti_load_package({hang!r})
        for call in range(5):
            m(torch.arange(5, dtype=torch.float32))
        print(aoti_debug.blackbox.dump())
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX="100"))
    (ring,) = glob.glob(str(dumps / "*-blackbox.ring"))
    pid = os.path.basename(ring).split("-")[0]
    assert proc.stdout.splitlines() == [f"{str(dumps / f'{pid}-blackbox')!r}: the last 15 launches of 5 runs"]
    assert without_torch_logs(proc.stderr).splitlines() == [
        "aoti-debug settings: AOTI_DEBUG_BLACKBOX='100' asks for more than model 'hang' was compiled with (64); "
        "using 64. Recompile with AOTI_DEBUG_BLACKBOX=100 (or AOTI_DEBUG_COMPILE=all) to get it."]
    assert [l[0] for l in launches(str(dumps / f"{pid}-blackbox")) if l[1] == "before"] == [
        f"{r}.{k}" for r in range(1, 6) for k in (1, 2, 3)]


def test_dump_without_a_black_box_says_so():
    import aoti_debug
    with pytest.raises(RuntimeError) as err:
        aoti_debug.blackbox.dump()
    assert str(err.value) == "aoti-debug black box: the black box is not on"


def test_sigusr2_dumps_at_the_next_launch(hang, membugs_so, tmp_path):
    import textwrap
    dumps = tmp_path / "dumps"
    code = f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({hang!r})
        for call in range(3):
            m(torch.arange(5, dtype=torch.float32))
        print("ready", flush=True)
        sys.stdin.readline()
        m(torch.arange(5, dtype=torch.float32))
        print("done", flush=True)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, **BOX))
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGUSR2)          # the handler only sets a flag: nothing is written yet
    time.sleep(0.2)
    assert sorted(os.listdir(dumps)) == [".aoti-debug-ledger", f"{proc.pid}-blackbox.ring"]
    out, err = proc.communicate("go\n", timeout=300)
    assert (proc.returncode, out) == (0, "done\n"), err
    folder = dumps / f"{proc.pid}-blackbox"
    assert without_torch_logs(err).splitlines() == [f"aoti-debug blackbox: SIGUSR2: the black box is in {str(folder)!r}: "
                                "the last 9 launches of 4 runs"]
    # written at run 4's first launch: its inputs are there, its launches not yet
    assert [l[0] for l in launches(str(folder)) if l[1] == "before"] == [
        f"{r}.{k}" for r in range(1, 4) for k in (1, 2, 3)]
    assert sorted(manifests(str(folder))) == [f"{proc.pid}-hang-run{r}" for r in range(1, 5)]


# ---------------------------------------------------------------- torch.compile's wrapper

def compiled_loop(name, calls, inputs, last_inputs):
    """A process that compiles models.<name> with torch.compile and calls it `calls` times,
    the last call with `last_inputs`."""
    return f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, _, _ = models.seeded({name!r})
        m = torch.compile(model)
        with torch.no_grad():
            for call in range(1, {calls}):
                m(*{inputs})
            print("last call", flush=True)
            m(*{last_inputs})
        print("returned", flush=True)
    """


@pytest.fixture(scope="module")
def compiled_killed(membugs_so, tmp_path_factory):
    """torch.compile's wrapper of the hang model, black box 16, killed with SIGKILL inside call 12's op."""
    tmp = tmp_path_factory.mktemp("compiled_killed")
    code = compiled_loop("hang", 12, "(torch.arange(5, dtype=torch.float32) + call,)",
                         "(torch.tensor([-100.0, 1.0, 2.0, 3.0, 4.0]),)")
    return kill_in_the_hang(code, tmp, MEMBUGS_SO=membugs_so, AOTI_DEBUG_BLACKBOX="16",
                            TORCHINDUCTOR_CACHE_DIR=tmp / "cache")


def test_torch_compile_keeps_its_launches_through_a_sigkill(compiled_killed, capsys):
    pid, dumps = compiled_killed
    ring = ring_of(dumps)
    code, out, err = command("blackbox", "recover", dumps, capsys=capsys)
    folder = os.path.join(dumps, f"{pid}-blackbox")
    assert (code, err) == (0, ""), out + err
    assert out.splitlines() == [
        f"recovered {ring} into {folder!r}: the last 16 launches of 6 runs",
        f"in flight: launch 12.2 membugs.hang.default of model 'model' (thread {pid})"]
    lines = launches(folder)
    every = [f"{r}.{k}" for r in range(1, 12) for k in (1, 2, 3)] + ["12.1", "12.2"]
    assert [l[0] for l in lines if l[1] == "before"] == every[-16:]
    assert lines[-2:] == [("12.1", "after", "incomplete"), ("12.2", "before", "running")]
    run12 = manifests(folder)[f"{pid}-model-run12"]
    (last,) = [e for e in run12 if e.get("id") == "12.2"]
    assert [(f["name"], f["role"]) for f in last["files"]] == [("buf0", "in")]
    held = torch.load(os.path.join(folder, f"{pid}-model-run12", last["files"][0]["file"]), weights_only=True)
    assert held.tolist() == [-99.0, 2.0, 3.0, 4.0, 5.0]      # x + 1 of the last call
    assert last["source"] == models.line_of("hang.op")
    # torch.compile passes the weights (parameters) as inputs: described, not copied, as an artifact's constants
    inputs = torch.load(os.path.join(folder, f"{pid}-model-run12", "inputs.pt"), weights_only=True)
    assert inputs[:2] == [None, None] and inputs[2].tolist() == [-100.0, 1.0, 2.0, 3.0, 4.0]
    assert (run12[0]["event"], run12[0]["status"]) == ("run", "incomplete")


def test_torch_compile_dumps_at_a_nan_and_nan_origin_names_its_line(tmp_path, capsys):
    dumps = tmp_path / "dumps"
    proc = run_python(compiled_loop("planted", 30, "models.planted_inputs()", "models.planted_inputs('sqrt')"),
                      env=clean_env(AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX="16",
                                    AOTI_DEBUG_NAN_CHECK="warn:nan", TORCHINDUCTOR_CACHE_DIR=tmp_path / "cache"))
    assert proc.stdout.splitlines()[-1] == "returned"
    pid = int(os.path.basename(ring_of(str(dumps))).split("-")[0])
    folder = os.path.join(str(dumps), f"{pid}-blackbox")
    first, second = [l for l in proc.stderr.splitlines() if l.startswith("aoti-debug")][:2]
    assert_planted_nan_check(first, "model:30.1")
    assert second == f"aoti-debug blackbox: nan-check: the black box is in {folder!r}: the last 16 launches of 6 runs"
    lines = launches(folder)
    every = [f"{r}.{k}" for r in range(1, 30) for k in (1, 2, 3)] + ["30.1"]
    assert [l[0] for l in lines if l[1] == "before"] == every[-16:]
    assert lines[-2:] == [("30.1", "before", "running"), ("30.1", "after", "ok")]
    code, out, err = command("nan-origin", folder, capsys=capsys)
    assert code == 1, out + err
    assert re.fullmatch(rf"NaN/Inf origin: launch model:30\.1 cpp_fused_\w*sqrt\w* \(pid {pid}, {pid}-model-run30/"
                        r"manifest\.jsonl:\d+\)", out.splitlines()[0]), out
    assert out.splitlines()[1] == f"  source: {models.line_of('planted.sqrt')}"


def test_torch_compile_dumps_when_the_memory_check_fires(membugs_so, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, args, _ = models.seeded("overrun")
        torch.compile(model)(*args)
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_MEMCHECK="warn",
                       TORCHINDUCTOR_CACHE_DIR=tmp_path / "cache", **BOX))
    pid = os.path.basename(ring_of(str(dumps))).split("-")[0]
    folder = dumps / f"{pid}-blackbox"
    assert [l for l in proc.stderr.splitlines() if l.startswith("aoti-debug")] == [
        f"aoti-debug memcheck: launch model:1.2 membugs.overrun.default (nodes=overrun source={models.line_of('overrun.op')}) "
        "wrote past the end of buf1 (out, float32(5,)), allocated by this launch: 4 bytes damaged, starting right "
        "after its end",
        f"aoti-debug blackbox: memcheck: the black box is in {str(folder)!r}: the last 2 launches of 1 run"]
    assert launches(str(folder)) == [("1.1", "before", "running"), ("1.1", "after", "incomplete"),
                                     ("1.2", "before", "running"), ("1.2", "after", "ok")]


def test_torch_compile_keeps_what_instrument_compiled_in_and_dumps_on_sigusr2(membugs_so, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import os, signal, sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        model, _, _ = models.seeded("hang")
        m = torch.compile(model)
        x = torch.arange(5, dtype=torch.float32)
        with torch.no_grad():
            with aoti_debug.instrument(blackbox=4):    # the first compile of the process: its argument wins
                m(x)
            for call in range(4):
                m(x)
            os.kill(os.getpid(), signal.SIGUSR2)       # the handler sets a flag; the next launch dumps
            m(x)
        print(os.getpid())
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX="100",
                       TORCHINDUCTOR_CACHE_DIR=tmp_path / "cache"))
    pid = proc.stdout.split()[-1]
    folder = dumps / f"{pid}-blackbox"
    assert [l for l in proc.stderr.splitlines() if l.startswith("aoti-debug")] == [
        "aoti-debug settings: AOTI_DEBUG_BLACKBOX='100' asks for more than model 'model' was compiled with (4); "
        "using 4. Recompile with AOTI_DEBUG_BLACKBOX=100 (or AOTI_DEBUG_COMPILE=all) to get it.",
        f"aoti-debug blackbox: SIGUSR2: the black box is in {str(folder)!r}: the last 4 launches of 3 runs"]
    # written at run 6's first launch: the four before it, and run 6's inputs
    assert [l[0] for l in launches(str(folder)) if l[1] == "before"] == ["4.3", "5.1", "5.2", "5.3"]
    assert sorted(manifests(str(folder))) == [f"{pid}-model-run{r}" for r in (4, 5, 6)]


def test_a_compiled_model_and_an_artifact_share_one_ring(planted_box, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        artifact = torch._inductor.aoti_load_package({planted_box!r})
        compiled = torch.compile(models.Planted())
        for call in range(2):
            artifact(*models.planted_inputs())
            compiled(*models.planted_inputs())
        print(aoti_debug.blackbox.dump())
    """, env=clean_env(AOTI_DEBUG_DUMP_DIR=dumps, TORCHINDUCTOR_CACHE_DIR=tmp_path / "cache", **BOX))
    pid = os.path.basename(ring_of(str(dumps))).split("-")[0]
    folder = dumps / f"{pid}-blackbox"
    assert proc.stdout.splitlines() == [f"{str(folder)!r}: the last 12 launches of 4 runs"]
    runs = manifests(str(folder))
    assert sorted(runs) == [f"{pid}-model-run1", f"{pid}-model-run2", f"{pid}-planted-run1", f"{pid}-planted-run2"]
    # the artifact's run names its .so; the wrapper has none to name
    assert runs[f"{pid}-planted-run1"][0]["so"].endswith(".so") and "so" not in runs[f"{pid}-model-run1"][0]
    assert [len(lines) for lines in runs.values()] == [7, 7, 7, 7]    # run, then before/after of three launches


# ---------------------------------------------------------------- every check, several models and threads

@pytest.fixture(scope="module")
def guarded_box(packages):
    return packages.get("mlp", AOTI_DEBUG_CHECK_INPUTS="1", **BOX)


def test_an_input_guard_dumps_the_ring_with_the_bad_inputs(guarded_box, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({guarded_box!r})
        for call in range(3):
            m(*models.example("mlp")[1])
        try:
            m(torch.zeros(4, 8, dtype=torch.float64))
        except RuntimeError as exc:
            print("RAISED", str(exc).splitlines()[0], flush=True)
    """, env=clean_env(AOTI_DEBUG_DUMP_DIR=dumps))
    pid = os.path.basename(ring_of(str(dumps))).split("-")[0]
    folder = dumps / f"{pid}-blackbox"
    assert proc.stdout.splitlines()[-1] == ("RAISED aoti-debug: the inputs of model 'mlp' do not match what it "
                                            "was compiled for:")
    assert f"aoti-debug blackbox: input-check: the black box is in {str(folder)!r}: the last 18 launches of 4 runs" \
        in proc.stderr.splitlines()
    run4 = manifests(str(folder))[f"{pid}-mlp-run4"]
    assert [e["event"] for e in run4] == ["run"]      # it stopped before its first launch
    x = torch.load(folder / f"{pid}-mlp-run4" / "inputs.pt", weights_only=True)[0]
    assert x.dtype == torch.float64 and x.shape == (4, 8)


def test_two_models_and_two_threads_share_one_ring(hang, membugs_so, tmp_path):
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys, threading; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        a = torch._inductor.aoti_load_package({hang!r})
        b = torch._inductor.aoti_load_package({hang!r})
        def work(m, calls):
            for call in range(calls):
                m(torch.arange(5, dtype=torch.float32))
        threads = [threading.Thread(target=work, args=(a, 2)), threading.Thread(target=work, args=(b, 3))]
        for t in threads: t.start()
        for t in threads: t.join()
        print(aoti_debug.blackbox.dump())
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, **BOX))
    pid = os.path.basename(ring_of(str(dumps))).split("-")[0]
    folder = dumps / f"{pid}-blackbox"
    assert proc.stdout.splitlines() == [f"{str(folder)!r}: the last 15 launches of 5 runs"]
    runs = manifests(str(folder))
    # a model is named at its first run, so which thread's model is `hang#2` is up to the scheduler
    two, three = sorted(["hang", "hang#2"], key=lambda m: f"{pid}-{m}-run3" in runs)
    assert sorted(runs) == sorted([f"{pid}-{two}-run1", f"{pid}-{two}-run2", f"{pid}-{three}-run1",
                                   f"{pid}-{three}-run2", f"{pid}-{three}-run3"])
    threads = {name: {e["thread"] for e in lines if e["event"] == "run"} for name, lines in runs.items()}
    assert len({t for ts in threads.values() for t in ts}) == 2 and int(pid) not in {
        t for ts in threads.values() for t in ts}       # each model ran on its own thread, not the main one
    assert threads[f"{pid}-{two}-run1"] == threads[f"{pid}-{two}-run2"]
    assert threads[f"{pid}-{three}-run1"] == threads[f"{pid}-{three}-run3"] != threads[f"{pid}-{two}-run1"]
    assert all(len(lines) == 7 for lines in runs.values())   # run, then before/after of three launches


def test_a_taken_ring_name_is_said_and_never_followed(hang, membugs_so, tmp_path):
    dumps, target = tmp_path / "dumps", tmp_path / "target"
    target.write_text("not the ring")
    proc = run_python(f"""
        import os, sys; sys.path.insert(0, {TESTS!r})
        os.makedirs({str(dumps)!r})
        os.symlink({str(target)!r}, os.path.join({str(dumps)!r}, f"{{os.getpid()}}-blackbox.ring"))
        import torch, models
        m = torch._inductor.aoti_load_package({hang!r})
        m(torch.arange(5, dtype=torch.float32))
        print(os.getpid())
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX_MAX_MB="1", **BOX))
    pid = proc.stdout.split()[-1]
    assert target.read_text() == "not the ring"
    assert os.path.getsize(dumps / f"{pid}-blackbox.2.ring") == 1 << 20
    assert without_torch_logs(proc.stderr).splitlines() == [
        f"aoti-debug blackbox: {str(dumps / f'{pid}-blackbox.ring')!r} already exists; writing "
        f"{str(dumps / f'{pid}-blackbox.2.ring')!r} instead"]


def test_the_memory_check_dumps_the_ring_up_to_the_launch_that_wrote_out_of_bounds(packages, membugs_so, tmp_path):
    overrun = packages.get("overrun", MEMBUGS_SO=membugs_so, AOTI_DEBUG_MEMCHECK="raise", **BOX)
    dumps = tmp_path / "dumps"
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({overrun!r})
        try:
            m(*models.example("overrun")[1])
        except RuntimeError as exc:
            print("RAISED", str(exc).split(":")[0], flush=True)
    """, env=clean_env(MEMBUGS_SO=membugs_so, AOTI_DEBUG_DUMP_DIR=dumps))
    pid = os.path.basename(ring_of(str(dumps))).split("-")[0]
    folder = dumps / f"{pid}-blackbox"
    assert proc.stdout.splitlines() == ["RAISED aoti-debug memcheck"]
    # level 0: the note on stderr (and AOTI's own `Error: ...` line for the exception)
    assert [l for l in proc.stderr.splitlines() if l.startswith("aoti-debug")] == [
        f"aoti-debug blackbox: memcheck: the black box is in {str(folder)!r}: the last 2 launches of 1 run"]
    assert launches(str(folder)) == [("1.1", "before", "running"), ("1.1", "after", "incomplete"),
                                     ("1.2", "before", "running"), ("1.2", "after", "ok")]
    (after,) = [e for e in manifests(str(folder))[f"{pid}-overrun-run1"] if e.get("event") == "after"
                and e["id"] == "1.2"]
    y = torch.load(folder / f"{pid}-overrun-run1" / after["files"][0]["file"], weights_only=True)
    assert y.tolist() == [2.0, 4.0, 6.0, 8.0, 10.0]      # 2 * (x + 1): what the op returned, bug and all
