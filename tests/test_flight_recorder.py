"""Level-10 flight recorder (C++ shim and Python logger) and `aoti-debug replay`.

The AOTI tests reuse the session's level-10 mlp package (the same key as
test_codegen.py, so no extra compile); every run happens in a fresh process.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import textwrap

import pytest
import torch

from aoti_debug import cli
from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, records, run_python

# torch_matrix (every tested torch release): the tests marked below, where the
# installed Inductor decides the result; the rest of the file runs on the default one.

LEVEL10 = dict(AOTI_DEBUG_LOGLEVEL="10")
NOTE_TAIL = "; no more dumps, logging goes on at level 5"


@pytest.fixture(scope="module")
def mlp10(packages):
    return packages.get("mlp", **LEVEL10)


def run_model(pt2, dump_dir, log, runs=1, **env):
    """Run the package `runs` times in a fresh process at level 10 (by default);
    saves the inputs fed to <dump_dir>.fed.pt and prints the output's hash."""
    code = f"""
        import sys, hashlib; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({pt2!r})
        args = models.example("mlp")[1]
        torch.save(list(args), {str(dump_dir) + '.fed.pt'!r})
        for _ in range({runs}):
            out = m(*args)
        print("OUTPUT", hashlib.sha256(out.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest())
    """
    env = dict(AOTI_DEBUG_DUMP_DIR=str(dump_dir), AOTI_DEBUG_LOGDEST=str(log), **env)
    return run_python(code, env=clean_env(**env))


def manifest(folder):
    with open(os.path.join(folder, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def run_folders(dump_dir):
    return sorted(d for d in os.listdir(dump_dir) if re.fullmatch(r"\d+-mlp-run\d+", d))


def dump_entries(dump_dir):
    """What the recorders put into the dump directory, the limits' ledger left out."""
    return sorted(d for d in os.listdir(dump_dir) if d != ".aoti-debug-ledger")


def dir_size(path):
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def notes(text, topic="flight-recorder"):
    return [r for r in records(text) if r.startswith("[") and f" note - {topic}\n" in r]


@pytest.fixture(scope="module")
def recorded(mlp10, tmp_path_factory):
    """Two level-10 runs of mlp in one process, with their level-10 log."""
    root = tmp_path_factory.mktemp("recorded")
    dump_dir, log = root / "dumps", root / "log.txt"
    proc = run_model(mlp10, dump_dir, log, runs=2)
    return dump_dir, log.read_text(), proc.stdout


@pytest.mark.torch_matrix
def test_run_folder_manifest_and_files(recorded):
    dump_dir, _, _ = recorded
    folders = run_folders(dump_dir)
    pid = folders[0].split("-")[0]
    assert folders == [f"{pid}-mlp-run1", f"{pid}-mlp-run2"]
    assert os.path.isfile(dump_dir / f"{pid}-mlp-artifact.so")  # the package's .so is temporary
    for r, folder in enumerate(folders, 1):
        lines = manifest(dump_dir / folder)
        assert lines[0]["event"] == "run" and lines[0]["run"] == r and lines[0]["model"] == "mlp"
        assert lines[0]["so"].endswith(".so") and lines[0]["so_copy"] == f"../{pid}-mlp-artifact.so"
        copied = (dump_dir / f"{pid}-mlp-artifact.so").read_bytes()
        assert lines[0]["so_sha256"] == hashlib.sha256(copied).hexdigest()   # replay checks it
        assert lines[0]["inputs"] == ["x"]
        assert lines[-1]["event"] == "run-end" and lines[-1]["launches"] == 6
        launches = lines[1:-1]
        # one line before and one after each launch, in launch order
        assert [(e["event"], e["index"]) for e in launches] == \
            [(ev, k) for k in range(1, 7) for ev in ("before", "after")]
        for e in launches:
            assert e["kind"] == "launch" and e["run"] == r and e["id"] == f"{r}.{e['index']}"
            assert e["status"] == ("running" if e["event"] == "before" else "ok")
            assert e["kernel"] and e["nodes"] and e["source"].startswith(os.path.join(TESTS, "models.py:"))
            roles = {f["role"] for f in e["files"]}
            assert roles <= ({"in", "inout"} if e["event"] == "before" else {"out", "inout"}), e
            for f in e["files"]:
                assert os.path.getsize(dump_dir / folder / f["file"]) == f["bytes"]
            assert e["bytes"] == sum(f["bytes"] for f in e["files"])


@pytest.mark.torch_matrix
def test_inputs_reproduce_the_run(recorded):
    dump_dir, _, _ = recorded
    fed = torch.load(str(dump_dir) + ".fed.pt")
    for folder in run_folders(dump_dir):
        saved = torch.load(dump_dir / folder / "inputs.pt", weights_only=True)
        assert isinstance(saved, list) and len(saved) == len(fed)
        for a, b in zip(saved, fed):
            assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            assert torch.equal(a, b)


def _log_items(record):
    """{(role, name): {field: value}} of a launch / launch-end record's tensor items."""
    items = {}
    for m in re.finditer(r"^  (in|out|inout) (\S+):\n    Tensor\(\n((?:      .*\n)+?)    \)", record, re.M):
        items[(m.group(1), m.group(2))] = dict(line.strip().split("=", 1) for line in m.group(3).splitlines())
    return items


def test_tensors_match_the_logged_statistics(recorded):
    dump_dir, text, _ = recorded
    folder = dump_dir / run_folders(dump_dir)[0]
    recs = {}
    for r in records(text):
        head = r.splitlines()[0].split()
        if len(head) >= 6 and head[4] in ("launch", "launch-end") and head[5].startswith("mlp:1."):
            recs[(head[4], int(head[5].split(".")[1]))] = _log_items(r)
    checked = 0
    for e in manifest(folder)[1:-1]:
        items = recs[("launch" if e["event"] == "before" else "launch-end", e["index"])]
        for f in e["files"]:
            t = torch.load(folder / f["file"], weights_only=True)
            fields = items[(f["role"], f["name"])]
            assert fields["shape"] == str(tuple(t.shape))
            assert fields["stride"] == str(tuple(t.stride()))
            assert fields["dtype"] == str(t.dtype)
            for stat, value in (("min", t.min()), ("max", t.max()), ("mean", t.double().mean())):
                assert float(fields[stat]) == pytest.approx(value.item(), rel=1e-5, abs=1e-6), (f, stat)
            checked += 1
    assert checked >= 20


def test_inputs_are_written_before_the_launch(recorded):
    """An in-place kernel (relu on the addmm buffer): the `before` file holds
    the values the kernel read, the `after` file what it wrote."""
    dump_dir, _, _ = recorded
    folder = dump_dir / run_folders(dump_dir)[0]
    lines = manifest(folder)
    relu = [e for e in lines if e.get("kernel", "").startswith("cpp_fused_relu")]
    before = next(e for e in relu if e["event"] == "before")
    after = next(e for e in relu if e["event"] == "after" and e["index"] == before["index"])
    assert lines.index(before) < lines.index(after) and before["time"] <= after["time"]
    (fb,), (fa,) = before["files"], after["files"]
    assert fb["role"] == fa["role"] == "inout" and fb["name"] == fa["name"]
    tb = torch.load(folder / fb["file"], weights_only=True)
    ta = torch.load(folder / fa["file"], weights_only=True)
    assert tb.min() < 0 and torch.equal(ta, tb.relu())


@pytest.mark.torch_matrix
def test_python_recorder_keeps_inputs_of_a_crashing_call(tmp_path):
    dump_dir = tmp_path / "dumps"
    (tmp_path / "crashmod.py").write_text(textwrap.dedent("""
        import ctypes
        from aoti_debug import log_api

        @log_api
        def crash(x, scale=2.0):
            return ctypes.string_at(0)
    """))
    proc = run_python(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        import torch, crashmod
        crashmod.crash(torch.arange(6.0).reshape(2, 3), scale=3.0)
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(dump_dir),
                       AOTI_DEBUG_LOGDEST=str(tmp_path / "log.txt")), check=False)
    assert proc.returncode == -signal.SIGSEGV
    (folder,) = dump_entries(dump_dir)
    assert folder.endswith("-calls")
    lines = manifest(dump_dir / folder)
    assert [(e["event"], e["status"], e["name"]) for e in lines] == [("before", "running", "crashmod.crash")]
    saved = torch.load(dump_dir / folder / "call000001_inputs.pt", weights_only=True)
    assert torch.equal(saved["args"][0], torch.arange(6.0).reshape(2, 3)) and saved["kwargs"] == {"scale": 3.0}
    # the call record was written before the call ran
    assert re.search(r"\] call 1 crashmod\.crash thread=\d+\n  arg\[0\] x:\n", (tmp_path / "log.txt").read_text())


def test_count_limit_under_a_storm_of_launches(mlp10, tmp_path):
    dump_dir, log = tmp_path / "dumps", tmp_path / "log.txt"
    run_model(mlp10, dump_dir, log, runs=4, AOTI_DEBUG_DUMP_MAX_COUNT="3")
    befores = [e for d in run_folders(dump_dir) for e in manifest(dump_dir / d) if e["event"] == "before"]
    assert [e["id"] for e in befores] == ["1.1", "1.2", "1.3"]
    text = log.read_text()
    (note,) = notes(text)
    assert note.endswith("note - flight-recorder\n  AOTI_DEBUG_DUMP_MAX_COUNT=3 reached" + NOTE_TAIL + "\n")
    # logging goes on at level 5: every run is still logged with statistics
    assert text.count(" run-end ") == 4 and "      nan_count=0\n" in text.split(note)[1]


def test_size_limit_is_never_exceeded(mlp10, tmp_path):
    dump_dir, log = tmp_path / "dumps", tmp_path / "log.txt"
    run_model(mlp10, dump_dir, log, runs=3, AOTI_DEBUG_DUMP_MAX_SIZE_GB="0.000001")
    assert dir_size(dump_dir) <= 0.000001 * 2**30
    (note,) = notes(log.read_text())
    assert "AOTI_DEBUG_DUMP_MAX_SIZE_GB=1e-06 would be exceeded" + NOTE_TAIL in note


def test_unwritable_dump_dir_gives_one_note_and_same_outputs(mlp10, recorded, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the dump directory should be")
    log = tmp_path / "log.txt"
    proc = run_model(mlp10, blocker, log, runs=2)
    assert proc.stdout == recorded[2]  # results unchanged
    (note,) = notes(log.read_text())
    assert f"cannot create dump folder '{blocker}/" in note and "(Not a directory)" + NOTE_TAIL in note
    assert blocker.read_text() == "a file where the dump directory should be"


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs: the first file that does not fit fails with ENOSPC."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture(scope="module")
def plain_output(mlp10, tmp_path_factory):
    """The model's output hash with the instrumentation off at run time."""
    root = tmp_path_factory.mktemp("plain")
    return run_model(mlp10, root / "dumps", root / "log.txt", runs=2, AOTI_DEBUG_LOGLEVEL="0").stdout


def test_full_disk_gives_one_note_and_same_outputs(mlp10, plain_output, full_disk, tmp_path):
    dump_dir, log = full_disk / "dumps", tmp_path / "log.txt"
    proc = run_model(mlp10, dump_dir, log, runs=2)
    assert proc.stdout == plain_output
    (folder,) = dump_entries(dump_dir)
    pid = folder.split("-")[0]
    # inputs.pt fits; the 2 MB copy of the model's .so does not, and its partial file is removed
    assert folder == f"{pid}-mlp-run1" and os.listdir(dump_dir / folder) == ["inputs.pt"]
    text = log.read_text()
    (note,) = notes(text)
    assert note.endswith("] note - flight-recorder\n"
                         f"  cannot write '{dump_dir}/{pid}-mlp-artifact.so' (No space left on device)"
                         + NOTE_TAIL + "\n")
    # logging goes on at level 5: every launch of both runs, with statistics
    after = [r for r in records(text.split(note)[1]) if " launch-end " in r.splitlines()[0]]
    assert len(after) == 12 and all("      mean=" in r for r in after)


def test_python_recorder_on_a_full_disk(full_disk, tmp_path):
    dump_dir, log = full_disk / "dumps", tmp_path / "log.txt"
    (tmp_path / "fullmod.py").write_text(textwrap.dedent("""
        from aoti_debug import log_api

        @log_api
        def scale(x, factor=2.0):
            return x * factor
    """))
    # each dump of x is 66 KiB (17 pages): call 1's two files and call 2's inputs fit, its output does not
    proc = run_python(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        import torch, fullmod
        x = torch.arange(16384, dtype=torch.float32) / 7
        for k in range(3):
            print(torch.equal(fullmod.scale(x + k), fullmod.scale.__aoti_debug_wrapped__(x + k)))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(dump_dir), AOTI_DEBUG_LOGDEST=str(log)))
    assert proc.stdout == "True\nTrue\nTrue\n"
    (name,) = dump_entries(dump_dir)
    folder = dump_dir / name
    assert sorted(os.listdir(folder)) == ["call000001_inputs.pt", "call000001_outputs.pt",
                                          "call000002_inputs.pt", "manifest.jsonl"]
    assert [(e["event"], e["index"], e["status"]) for e in manifest(folder)] == [
        ("before", 1, "running"), ("after", 1, "ok"), ("before", 2, "running")]
    text = log.read_text()
    (note,) = notes(text)
    assert note.endswith("] note - flight-recorder\n"
                         f"  cannot write '{folder}/call000002_outputs.pt' (No space left on device)"
                         + NOTE_TAIL + "\n")
    # (call 2's return record was written before its output was dumped); logging goes on at
    # level 5: call 3 is logged with statistics
    later = [r.splitlines()[0].split("] ", 2)[2] for r in records(mask(text.split(note)[1]))]
    assert later == ["call 3 fullmod.scale thread=TID", "return 3 fullmod.scale"]
    assert text.split(note)[1].count("      mean=") == 2


def replay(capsys, *argv):
    code = cli.main(["replay", *argv])
    out = capsys.readouterr().out
    return code, out.splitlines()


@pytest.mark.torch_matrix
def test_replay_python_calls_pass(tmp_path, capsys, monkeypatch):
    dump_dir = tmp_path / "dumps"
    (tmp_path / "replaymod.py").write_text(textwrap.dedent("""
        import torch
        from aoti_debug import log_api

        @log_api
        def affine(x, scale=2.0):
            return x * scale + 1

        @log_api
        def pair(x):
            return x.sum(0), x.t()

        @log_api
        def checked(x):
            raise ValueError("x is negative")

        @log_api
        def closure(x):
            return lambda: x
    """))
    run_python(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        import torch, replaymod
        x = torch.arange(12.0).reshape(3, 4)
        replaymod.affine(x, scale=0.5)
        try:
            replaymod.checked(x)
        except ValueError:
            pass
        replaymod.closure(x)
        replaymod.pair(x)
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(dump_dir),
                       AOTI_DEBUG_LOGDEST=str(tmp_path / "log.txt")))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, lines = replay(capsys, "--dir", str(dump_dir), "--allow-module", "replaymod")
    assert code == cli.OK
    # a call that raised or whose result could not be saved is named, not passed over
    assert lines == [
        "PASS call 1 replaymod.affine max_abs=0 max_rel=0",
        "SKIP call 2 replaymod.checked nothing kept to compare: the call raised (ValueError: x is negative)",
        "SKIP call 3 replaymod.closure nothing kept to compare: not serialisable: " + lines[2].split(": not serialisable: ")[1],
        "PASS call 4 replaymod.pair max_abs=0 max_rel=0",
        "2 passed, 0 failed, 2 skipped"]
    assert lines[2].endswith("closure.<locals>.<lambda>'")


@pytest.mark.torch_matrix
def test_replay_aoti_runs_pass(recorded, capsys):
    code, lines = replay(capsys, "--dir", str(recorded[0]), "--trust-dump-code")   # we recorded it
    assert code == cli.OK, lines
    assert len(lines) == 13 and lines[-1] == "12 passed, 0 failed"
    assert all(re.fullmatch(r"PASS launch mlp:[12]\.[1-6] \w+ max_abs=0 max_rel=0", line) for line in lines[:-1])


def test_replay_names_the_corrupted_launch(recorded, tmp_path, capsys):
    src = recorded[0]
    folder = run_folders(src)[0]
    pid = folder.split("-")[0]
    dump_dir = tmp_path / "dumps"
    shutil.copytree(src / folder, dump_dir / folder)
    shutil.copy(src / f"{pid}-mlp-artifact.so", dump_dir / f"{pid}-mlp-artifact.so")
    after = next(e for e in manifest(dump_dir / folder) if e["event"] == "after" and e["index"] == 3)
    path = dump_dir / folder / after["files"][0]["file"]
    t = torch.load(path, weights_only=True)
    torch.save(t + 0.25, path)
    code, lines = replay(capsys, "--dir", str(dump_dir), "--allow-module", "replaymod", "--trust-dump-code")
    assert code == cli.FOUND
    failed = [line for line in lines if line.startswith("FAIL")]
    assert failed == [f"FAIL launch mlp:1.3 {after['kernel']} max_abs=0.25 max_rel={failed[0].split('max_rel=')[1]}"]
    assert lines[-1] == "5 passed, 1 failed"


def test_replay_unusable_input(tmp_path, capsys):
    assert cli.main(["replay", "--dir", str(tmp_path / "missing")]) == cli.USAGE
    assert cli.main(["replay", "--dir", str(tmp_path)]) == cli.USAGE
    capsys.readouterr()


# ---------------------------------------------------------------- the C++ launch API, without Inductor

from test_native_launch import harness, run as run_harness  # noqa: E402,F401  (session fixture)


def _files(folder, entry):
    return {f["name"]: torch.load(folder / f["file"], weights_only=True) for f in entry["files"]}


def test_every_value_kind_round_trips(harness, tmp_path):
    dump_dir = tmp_path / "dumps"
    run_harness(harness, ["model", "10", "", "1"], tmp_path / "log.txt", AOTI_DEBUG_DUMP_DIR=str(dump_dir))
    (name,) = run_folders_of(dump_dir, "toy")
    folder = dump_dir / name
    lines = manifest(folder)
    x = torch.tensor([[1.0, -2.0, 0.5], [3.0, -0.0, 2.5]])
    assert torch.equal(torch.load(folder / "inputs.pt", weights_only=True)[0], x)
    by = {(e["event"], e["index"]): e for e in lines if e.get("kind") == "launch"}
    assert torch.equal(_files(folder, by["before", 1])["in_ptr0"], x)
    assert torch.equal(_files(folder, by["after", 1])["out_ptr0"], x.relu())
    before2, after2 = _files(folder, by["before", 2]), _files(folder, by["after", 2])
    assert before2["in_out_ptr0"].dtype == torch.int64
    assert before2["in_out_ptr0"].tolist() == [1, -5, 7, 0]    # written before the launch
    assert after2["in_out_ptr0"].tolist() == [2, -4, 8, 1]
    assert before2["ks0"] == 4 and before2["alpha"] == 0.5
    before3, after3 = _files(folder, by["before", 3]), _files(folder, by["after", 3])
    assert before3 == {"mode": "fast\tpath", "shape": [2, 3], "flag": True, "none": None}
    xt = after3["out_ptr0"]                                  # a transposed view keeps its strides
    assert xt.stride() == (1, 3) and torch.equal(xt, x.t())


def run_folders_of(dump_dir, model):
    return sorted(d for d in os.listdir(dump_dir) if re.fullmatch(rf"\d+-{model}-run\d+", d))


def test_cpp_crash_keeps_the_launch_inputs_and_its_before_line(harness, tmp_path):
    dump_dir = tmp_path / "dumps"
    proc = run_harness(harness, ["crash", "10", "", "1"], tmp_path / "log.txt", check=False,
                       AOTI_DEBUG_DUMP_DIR=str(dump_dir))
    assert proc.returncode == -signal.SIGSEGV
    (name,) = run_folders_of(dump_dir, "toy")
    lines = manifest(dump_dir / name)
    assert [(e["event"], e.get("id")) for e in lines] == \
        [("run", None), ("before", "1.1"), ("after", "1.1"), ("before", "1.2")]
    assert lines[-1]["kernel"] == "cpp_fused_add_mul_1" and lines[-1]["status"] == "running"
    inputs = _files(dump_dir / name, lines[-1])
    assert inputs["in_out_ptr0"].tolist() == [1, -5, 7, 0]
    assert "crash toy:1.2 cpp_fused_add_mul_1\n  signal: SIGSEGV\n" in (tmp_path / "log.txt").read_text()


def test_a_run_whose_inputs_cannot_be_saved_says_why(tmp_path):
    """The Python wrapper's run line is `incomplete` with the error, as the C++ runtime's is."""
    run_python("""
        from aoti_debug.runtime import launches
        launches.RunDumps("m", 1).begin(["x"], [lambda: 1])
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(tmp_path / "d")))
    (folder,) = dump_entries(tmp_path / "d")
    (line,) = manifest(tmp_path / "d" / folder)
    assert (line["status"], line["files"]) == ("incomplete", [])
    assert re.fullmatch(r"inputs\.pt: not serialisable: PicklingError: Can't pickle <function <lambda> at "
                        r"0x[0-9a-f]+>: .*", line["error"]), line["error"]
