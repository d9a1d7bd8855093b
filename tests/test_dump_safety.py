"""A dump directory is data, and a shared place (docs/dumps.md, "What replay runs"
and "A shared dump directory"):

1. replay calls only torch.ops operators and functions of modules named with
   --allow-module; anything else is refused (exit 2) before it is imported;
2. replay loads --package, or the recorder's copy of an artifact (checked
   against its sha256) when the user trusts the dump's code, never a .so path
   a manifest names; a replay process that fails is an error, never a result;
3. the recorders create their folders and files exclusively: a link planted at
   a name they will use is never followed, and a note says which name they used;
7. the dump limits hold for every process writing into one directory, C++ and
   Python alike (one ledger);
8. re-running a launch's recorded ops (check, nan-origin and report with
   --rerun-ops) runs only operators that compute: nothing that reads or writes
   files, prints, or changes the process's state (ops.refusal).

Everything runs in fresh processes where it matters; the AOTI tests reuse the
session's level-10 mlp package.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from aoti_debug.analysis.untrusted import shorten   # long values are cut: the temp folder varies
from aoti_debug.cli import main
from conftest import TESTS, clean_env, run_python
from test_analysis_untrusted import RUN_DRIVER, copy, in_fresh_process, lines_of, made, rewrite  # noqa: F401  (fixture)
from test_flight_recorder import NOTE_TAIL, dir_size, manifest, mlp10, notes, run_model  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")

LEDGER = ".aoti-debug-ledger"
NOT_CHOSEN = ("replay calls only torch.ops operators and functions of the modules named with "
              "--allow-module (a dump folder is data: it does not choose the code that runs)")


def replay_in_fresh_process(*argv, path=None):
    env = clean_env(**({"PYTHONPATH": str(path)} if path else {}))
    return subprocess.run([sys.executable, "-m", "aoti_debug", "replay", *argv], capture_output=True,
                          text=True, timeout=300, env=env)


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def calls_folder(root, module, qualname, args, output):
    """A `-calls` folder recording one call of module.qualname(*args) that returned `output`,
    as a crafted folder would: only what the manifest says."""
    folder = root / "4242-calls"
    folder.mkdir(parents=True)
    torch.save({"args": list(args), "kwargs": {}}, folder / "call000001_inputs.pt")
    torch.save(output, folder / "call000001_outputs.pt")
    files = [{"file": name, "bytes": os.path.getsize(folder / name)}
             for name in ("call000001_inputs.pt", "call000001_outputs.pt")]
    common = dict(kind="call", index=1, name=f"{module}.{qualname}", module=module, qualname=qualname,
                  time=1.7e9)
    rewrite(str(folder), [dict(common, event="before", status="running", files=files[:1]),
                          dict(common, event="after", status="ok", files=files)])
    return folder


# ---------------------------------------------------------------- 1. what a recorded call may run

def test_a_call_to_os_system_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "shell-ran"
    folder = calls_folder(tmp_path / "dumps", "os", "system", [f"touch {marker}"], 0)
    proc = replay_in_fresh_process("--dir", str(folder))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"aoti-debug replay: {folder}/manifest.jsonl:2: call 1 names os.system; {NOT_CHOSEN}\n"
    assert not marker.exists()


def write_module(tmp_path, name, body):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))


def test_a_module_that_is_not_allowed_is_never_imported(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "imported"
    write_module(tmp_path, "planted_probe", f"""
        open({str(marker)!r}, "w").close()       # importing it is running it
        def double(x):
            return x * 2
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = calls_folder(tmp_path / "dumps", "planted_probe", "double", [torch.ones(3)], torch.ones(3) * 2)
    refused = f"aoti-debug replay: {folder}/manifest.jsonl:2: call 1 names planted_probe.double; {NOT_CHOSEN}\n"
    for allow in ([], ["--allow-module", "planted"], ["--allow-module", "planted_probe.sub"]):
        assert cli(capsys, "replay", "--dir", str(folder), *allow) == (2, "", refused)
    assert "planted_probe" not in sys.modules and not marker.exists()


def test_allow_module_lets_its_functions_run(tmp_path):
    write_module(tmp_path, "allowed_mod", """
        import os
        from os.path import join as joined
        def double(x):
            return x * 2
    """)
    folder = calls_folder(tmp_path / "dumps", "allowed_mod", "double", [torch.ones(3)], torch.ones(3) * 2)
    proc = replay_in_fresh_process("--dir", str(folder), "--allow-module", "allowed_mod", path=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "PASS call 1 allowed_mod.double max_abs=0 max_rel=0\n"
                                                 "1 passed, 0 failed\n")
    # the name is looked up in that module only: not through a module it imports, not a function it imported
    marker = tmp_path / "shell-ran"
    for qualname, why in (("os.system", "which leads to module os"),
                          ("joined", "which is defined in posixpath, not in allowed_mod")):
        other = calls_folder(tmp_path / qualname, "allowed_mod", qualname, [f"touch {marker}"], 0)
        proc = replay_in_fresh_process("--dir", str(other), "--allow-module", "allowed_mod", path=tmp_path)
        assert (proc.returncode, proc.stderr) == (2, (
            f"aoti-debug replay: {other}/manifest.jsonl:2: call 1 names allowed_mod.{qualname}, {why}; "
            "replay calls only functions defined in an allowed module\n"))
    assert not marker.exists()
    proc = replay_in_fresh_process("--dir", str(folder), "--allow-module", "os;rm")
    assert (proc.returncode, proc.stderr) == (
        2, "aoti-debug replay: --allow-module 'os;rm': not a module name (e.g. mylib or mylib.ops)\n")


def test_torch_ops_calls_replay_without_being_allowed(tmp_path):
    dump_dir = tmp_path / "dumps"
    run_python("""
        import torch
        from aoti_debug import log_api
        log_api(torch.ops.aten.mul)(torch.arange(4.0), 3.0)            # an operator
        log_api(torch.ops.aten.add.Tensor)(torch.ones(2), torch.ones(2))  # one overload of it
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir,
                       AOTI_DEBUG_LOGDEST=tmp_path / "log.txt"))
    (folder,) = [d for d in os.listdir(dump_dir) if d.endswith("-calls")]
    assert [(e["module"], e["qualname"]) for e in manifest(dump_dir / folder) if e["event"] == "after"] == [
        ("torch._ops.aten", "aten::mul"), ("torch._ops.aten", "aten::add.Tensor")]
    proc = replay_in_fresh_process("--dir", str(dump_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith("PASS call 1 ") and out[1].startswith("PASS call 2 ")
    assert out[2] == "2 passed, 0 failed"


# ---------------------------------------------------------------- 2. what artifact a recorded run may load

@pytest.fixture
def evil_so(tmp_path):
    """A library whose constructor leaves a marker: loading it is running it."""
    marker = tmp_path / "constructor-ran"
    src = tmp_path / "evil.c"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {\n'
                   f'  FILE* f = fopen("{marker}", "w");\n  if (f) fclose(f);\n}}\n')
    so = tmp_path / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    return so, marker


def test_the_so_a_manifest_names_is_never_loaded(made, tmp_path, evil_so):
    so, marker = evil_so
    folder = copy(made["clean"][2], tmp_path)       # a run folder; its manifest now names the library
    entries = lines_of(folder)
    entries[0]["so"] = str(so)
    rewrite(folder, entries)
    proc = replay_in_fresh_process("--dir", folder)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", (
        f"aoti-debug replay: {folder}: the run kept no copy of its artifact in the dump directory "
        "(the .so a manifest names is never loaded); pass --package P.pt2\n"))
    for path in (str(so), "../../evil.so", f"../{tmp_path.name}/evil.so"):
        entries[0].update(so_copy=path, so_sha256=sha256(so))
        rewrite(folder, entries)
        proc = replay_in_fresh_process("--dir", folder)
        assert (proc.returncode, proc.stderr) == (2, (
            f"aoti-debug replay: {folder}/manifest.jsonl:1: field 'so_copy' is {shorten(json.dumps(path))} "
            "(expected ../<file name>, a file of the dump directory)\n"))
    assert not marker.exists()


def with_artifact_copy(made, tmp_path, so, recorded_sha256):
    """A clean run folder whose dump directory holds `so` as the recorder's copy of the
    artifact, with `recorded_sha256` as its recorded hash: (folder, the copy's path)."""
    folder = copy(made["clean"][2], tmp_path)
    copied = os.path.join(os.path.dirname(folder), "4242-model-artifact.so")
    with open(so, "rb") as src, open(copied, "wb") as dst:
        dst.write(src.read())
    entries = lines_of(folder)
    entries[0].update(so="/gone/model.so", so_copy="../4242-model-artifact.so", so_sha256=recorded_sha256)
    rewrite(folder, entries)
    return folder, copied


def test_a_changed_artifact_copy_is_not_loaded(made, tmp_path, evil_so):
    so, marker = evil_so
    recorded = hashlib.sha256(b"the library the recorder copied").hexdigest()
    folder, copied = with_artifact_copy(made, tmp_path, so, recorded)
    proc = replay_in_fresh_process("--dir", os.path.dirname(folder), "--trust-dump-code")
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", (
        f"aoti-debug replay: {copied}: its sha256 is {sha256(so)}, not the {recorded} recorded in "
        f"{folder}/manifest.jsonl:1 (the file changed after it was recorded), so it is not loaded; "
        "pass --package P.pt2 to replay with an artifact you trust\n"))
    assert not marker.exists()


def test_the_artifact_copy_runs_only_when_the_user_trusts_the_dump(made, tmp_path, evil_so):
    """The copy's hash is in the same manifest: it proves the copy unchanged, not who made it."""
    so, marker = evil_so
    folder, copied = with_artifact_copy(made, tmp_path, so, sha256(so))
    proc = replay_in_fresh_process("--dir", folder)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", (
        f"aoti-debug replay: {copied}: replaying {folder}/manifest.jsonl:1 would run this library, code the "
        "dump directory holds; pass --package P.pt2 with an artifact you trust, or --trust-dump-code to run it\n"))
    assert not marker.exists()
    # trusted, it runs; it is no AOTI model, so the replay process fails: an error, not a result
    proc = replay_in_fresh_process("--dir", folder, "--trust-dump-code")
    assert (proc.returncode, proc.stdout) == (2, "") and marker.exists()
    assert re.fullmatch(rf"aoti-debug replay: {re.escape(folder)}: the replay process failed \(exit status 1\): "
                        r"RuntimeError: .*; nothing was compared\n", proc.stderr), proc.stderr


def test_a_replay_process_that_fails_is_an_error_naming_why(made, tmp_path, capsys):
    folder = copy(made["clean"][2], tmp_path)
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"not a shared library\n" * 64)
    assert cli(capsys, "replay", "--dir", folder, "--package", str(garbage)) == (2, "", (
        f"aoti-debug replay: {folder}: the replay process failed (exit status 1): RuntimeError: Error in "
        f"dlopen: {garbage}: invalid ELF header; nothing was compared\n"))


def test_a_replay_refusing_the_inputs_names_their_shape(mlp10, tmp_path, capsys):
    """The error the artifact raised, not the C++ backtrace under it."""
    dump_dir = tmp_path / "dumps"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        torch._inductor.aoti_load_package({mlp10!r})(*models.example("mlp")[1])
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir,
                       AOTI_DEBUG_LOGDEST=tmp_path / "log.txt"))
    (folder,) = [dump_dir / d for d in os.listdir(dump_dir) if d.endswith("-mlp-run1")]
    torch.save([torch.ones(5, 3)], folder / "inputs.pt")          # mlp takes (4, 8)
    code, out, err = cli(capsys, "replay", "--dir", str(folder), "--package", mlp10)
    assert (code, out) == (2, "")
    # the artifact's own input checks run in a replay (upstream's here: mlp10 has no guard compiled in)
    assert err.startswith(f"aoti-debug replay: {folder}: the replay process failed (exit status 1): "
                          "RuntimeError: input_handles[0]: unmatched dim value at 0, expected: 4, but got: 5"), err
    assert err.endswith("; nothing was compared\n"), err


def test_a_view_past_its_storage_is_named_before_anything_reads_it():
    """torch.load refuses such a file itself; replay's and check's own test (dumps.outside_storage)
    stands behind it, on a tensor whose storage shrank under its view."""
    from aoti_debug.analysis.dumps import outside_storage
    t = torch.ones(4, 8)
    assert outside_storage(t) == "" and outside_storage(t.t()) == "" and outside_storage(t[:, 7:]) == ""
    assert outside_storage(torch.ones(1, 8).expand(4, 8)) == ""        # stride 0 stays within
    t.untyped_storage().resize_(64)                                     # 16 of its 32 elements left
    assert outside_storage(t) == "is a view of 32 elements over a storage of 16"


def test_a_replay_checks_crafted_inputs_before_any_kernel_reads_them(mlp10, tmp_path, capsys):
    """A stride-0 view where the kernels index 4x8 elements: the input checks run in a replay
    (the guard where it was compiled in, upstream's where not) and refuse it before any kernel
    would read past its storage."""
    dump_dir = tmp_path / "dumps"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        torch._inductor.aoti_load_package({mlp10!r})(*models.example("mlp")[1])
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir,
                       AOTI_DEBUG_LOGDEST=tmp_path / "log.txt"))
    (folder,) = [dump_dir / d for d in os.listdir(dump_dir) if d.endswith("-mlp-run1")]
    torch.save([torch.ones(1, 8).expand(4, 8)], folder / "inputs.pt")
    code, out, err = cli(capsys, "replay", "--dir", str(folder), "--package", mlp10)
    assert (code, out) == (2, "")
    assert "unmatched stride value at 0, expected: 8, but got: 0" in err and "nothing was compared" in err, err


# ---------------------------------------------------------------- 3. links planted at the recorders' names

PLANT = """
    import os, sys
    dump = {dump!r}
    os.makedirs(dump, exist_ok=True)
    for name, target in {links!r}:
        os.symlink(target, os.path.join(dump, name.format(pid=os.getpid())))
"""


def victims(tmp_path):
    folder, file = tmp_path / "victim-dir", tmp_path / "victim.txt"
    folder.mkdir()
    file.write_text("a file of the user's")
    return folder, file


def taken_note(dump_dir, pid, name, instead):
    return f"'{dump_dir}/{pid}-{name}' already exists; writing '{dump_dir}/{pid}-{instead}' instead"


def note_lines(log):
    return [r.splitlines()[1].strip() for r in notes(log.read_text())]


def test_the_python_recorder_never_follows_a_planted_link(tmp_path):
    dump_dir, log = tmp_path / "dumps", tmp_path / "log.txt"
    folder, file = victims(tmp_path)
    write_module(tmp_path, "plantmod", """
        from aoti_debug import log_api
        @log_api
        def scale(x):
            return x * 2
    """)
    links = [("{pid}-calls", str(folder)), ("{pid}-model-run1", str(folder))]
    proc = run_python(textwrap.dedent(PLANT.format(dump=str(dump_dir), links=links)) + textwrap.dedent(f"""
        sys.path.insert(0, {str(tmp_path)!r})
        import torch, plantmod
        plantmod.scale(torch.ones(3))
        print(os.getpid())
    """) + RUN_DRIVER.replace("OFFSET", "1.0"),
        env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir, AOTI_DEBUG_LOGDEST=log))
    pid = proc.stdout.split()[0]
    assert os.listdir(folder) == [] and file.read_text() == "a file of the user's"
    assert [e["event"] for e in manifest(dump_dir / f"{pid}-calls.2")] == ["before", "after"]
    assert [e["event"] for e in manifest(dump_dir / f"{pid}-model-run1.2")][:2] == ["run", "before"]
    assert note_lines(log) == [taken_note(dump_dir, pid, "calls", "calls.2"),
                               taken_note(dump_dir, pid, "model-run1", "model-run1.2")]


def test_a_planted_ledger_link_stops_the_recorder_with_a_note(tmp_path):
    dump_dir, log = tmp_path / "dumps", tmp_path / "log.txt"
    _, file = victims(tmp_path)
    dump_dir.mkdir()
    os.symlink(file, dump_dir / LEDGER)
    proc = run_python("""
        import torch
        from aoti_debug import log_api
        print(log_api(lambda x: x * 2)(torch.ones(2)).tolist())
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir, AOTI_DEBUG_LOGDEST=log))
    assert proc.stdout == "[2.0, 2.0]\n" and file.read_text() == "a file of the user's"
    assert note_lines(log) == [f"cannot write '{dump_dir}/{LEDGER}' (Too many levels of symbolic links)"
                               + NOTE_TAIL]


def test_the_cpp_recorder_never_follows_a_planted_link(mlp10, tmp_path, capsys):
    dump_dir, log = tmp_path / "dumps", tmp_path / "log.txt"
    folder, file = victims(tmp_path)
    links = [("{pid}-mlp-artifact.so", str(file)), ("{pid}-mlp-run1", str(folder))]
    proc = run_python(textwrap.dedent(PLANT.format(dump=str(dump_dir), links=links)) + textwrap.dedent(f"""
        sys.path.insert(0, {TESTS!r})
        import torch, models
        torch._inductor.aoti_load_package({mlp10!r})(*models.example("mlp")[1])
        print(os.getpid())
    """), env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir, AOTI_DEBUG_LOGDEST=log))
    pid = proc.stdout.split()[0]
    assert os.listdir(folder) == [] and file.read_text() == "a file of the user's"
    run = manifest(dump_dir / f"{pid}-mlp-run1.2")[0]
    assert run["so_copy"] == f"../{pid}-mlp-artifact.2.so"
    assert run["so_sha256"] == sha256(dump_dir / f"{pid}-mlp-artifact.2.so")
    assert note_lines(log) == [taken_note(dump_dir, pid, "mlp-run1", "mlp-run1.2"),
                               taken_note(dump_dir, pid, "mlp-artifact.so", "mlp-artifact.2.so")]
    code, out, _ = cli(capsys, "replay", "--dir", str(dump_dir), "--trust-dump-code")
    assert code == 0 and out.splitlines()[-1] == "6 passed, 0 failed"


# ---------------------------------------------------------------- 7. one directory, one budget

BARRIER = """
import os, sys, time
def barrier(sync, n):
    '''Every worker has dumped once (each recorder has looked at the directory) before any goes on.'''
    open(os.path.join(sync, str(os.getpid())), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(sync)) < n and time.time() < deadline:
        time.sleep(0.01)
"""

PY_WORKER = BARRIER + """
sys.path.insert(0, {tmp!r})
import torch, sharemod
sharemod.scale(torch.ones(1))
barrier({sync!r}, {n})
for k in range({calls}):
    sharemod.scale(torch.full((16384,), float(k)))        # 64 KiB in, 64 KiB out
"""

AOTI_WORKER = BARRIER + """
sys.path.insert(0, {tests!r})
import torch, models
m = torch._inductor.aoti_load_package({pt2!r})
args = models.example("mlp")[1]
m(*args)
barrier({sync!r}, {n})
for _ in range({runs}):
    m(*args)
"""


def workers(tmp_path, codes, **env):
    """Start every worker at once on one dump directory; wait for all."""
    (tmp_path / "sync").mkdir()
    write_module(tmp_path, "sharemod", """
        from aoti_debug import log_api
        @log_api
        def scale(x):
            return x * 2
    """)
    dump_dir = tmp_path / "dumps"
    procs = [subprocess.Popen([sys.executable, "-c", code.format(tmp=str(tmp_path), sync=str(tmp_path / "sync"),
                                                                 n=len(codes), tests=TESTS)],
                              env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=dump_dir,
                                            AOTI_DEBUG_LOGDEST=tmp_path / f"log{i}.txt", **env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, code in enumerate(codes)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    return dump_dir, "".join((tmp_path / f"log{i}.txt").read_text() for i in range(len(codes)))


def test_processes_sharing_a_dump_dir_stay_within_its_size_limit(tmp_path):
    # each worker alone fits (about 1 MiB after the barrier); three do not
    limit_gb = 0.0014
    code = PY_WORKER.replace("{calls}", "8")
    dump_dir, log = workers(tmp_path, [code] * 3, AOTI_DEBUG_DUMP_MAX_SIZE_GB=limit_gb)
    assert dir_size(dump_dir) <= limit_gb * 2**30
    assert len([d for d in os.listdir(dump_dir) if d.endswith("-calls")]) == 3
    assert f"AOTI_DEBUG_DUMP_MAX_SIZE_GB={limit_gb:g} would be exceeded" + NOTE_TAIL in log


def test_processes_sharing_a_dump_dir_stay_within_its_count_limit(tmp_path):
    code = PY_WORKER.replace("{calls}", "5").replace("(16384,)", "(4,)")
    dump_dir, log = workers(tmp_path, [code] * 3, AOTI_DEBUG_DUMP_MAX_COUNT=7)
    befores = [e for d in os.listdir(dump_dir) if d.endswith("-calls")
               for e in manifest(dump_dir / d) if e["event"] == "before"]
    assert len(befores) == 7
    assert "AOTI_DEBUG_DUMP_MAX_COUNT=7 reached" + NOTE_TAIL in log


def test_cpp_and_python_recorders_share_one_budget(mlp10, tmp_path):
    """Two AOTI processes and a Python one: each would fit alone, together they do not.
    An AOTI worker writes the artifact copy and 31 runs of about 24 KB (0.75 MB), the
    Python one 0.5 MB; the limit leaves 0.9 MiB beside two artifact copies."""
    import zipfile
    with zipfile.ZipFile(mlp10) as z:
        so = next(i.file_size for i in z.infolist() if i.filename.endswith(".so"))
    limit_gb = float(f"{(2 * so + 0.9 * 2**20) / 2**30:.6g}")
    aoti = AOTI_WORKER.replace("{pt2!r}", repr(mlp10)).replace("{runs}", "30")
    py = PY_WORKER.replace("{calls}", "4")
    dump_dir, log = workers(tmp_path, [aoti, aoti, py], AOTI_DEBUG_DUMP_MAX_SIZE_GB=limit_gb)
    assert dir_size(dump_dir) <= limit_gb * 2**30
    names = os.listdir(dump_dir)
    assert len({n.split("-")[0] for n in names if n.endswith("-mlp-run1")}) == 2
    assert any(n.endswith("-calls") for n in names)
    assert f"AOTI_DEBUG_DUMP_MAX_SIZE_GB={limit_gb:g} would be exceeded" + NOTE_TAIL in log


# ---------------------------------------------------------------- 8. what re-running a launch's ops may do

CANDIDATES = "  candidate ops: log (can make NaN/Inf) (--rerun-ops re-runs them on the dumped inputs to name the op)"


def planted_ops(made, tmp_path, ops):
    """The NaN run folder with `ops` as the ops of its origin launch, 1.2 (cpp_fused_log_1: buf0 in, buf1 out)."""
    folder = copy(made["nan"][2], tmp_path)
    entries = lines_of(folder)
    next(e for e in entries if e["event"] == "before" and e["id"] == "1.2")["ops"] = ops
    rewrite(folder, entries)
    return folder


def op(node, name, *args, holds=(), **kwargs):
    return {"node": node, "op": name, "args": list(args), "kwargs": kwargs, "own": True, "holds": list(holds)}


def mapped_and_filled(victim):
    """A file mapped as a tensor (shared: writing the tensor writes the file), then filled."""
    return [op("mapped", "aten.from_file.default", str(victim), True, 16, dtype={"dtype": "uint8"}),
            op("fill", "aten.fill_.Scalar", {"node": "mapped"}, 88, holds=["buf1"])]


FROM_FILE = ("aten.from_file is not re-run: it maps a file (shared, what is written to the tensor is "
             "written to the file)")


def check_line(out):
    return next(line for line in out.splitlines() if line.startswith("1.2 "))


def test_check_nan_origin_and_report_never_write_a_file_a_dump_maps(made, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("a file of the user's")
    folder = planted_ops(made, tmp_path, mapped_and_filled(victim))
    code, out, err = cli(capsys, "check", folder)
    assert check_line(out) == f"1.2 cpp_fused_log_1  not checkable: buf1: {FROM_FILE}"
    assert (code, err) == (4, "")      # no launch of the run checkable: not a clean verdict
    # nan-origin and report run nothing from a dump unless asked
    code, out, err = cli(capsys, "nan-origin", folder)
    assert (code, out.splitlines()[3], err) == (1, CANDIDATES, "")
    assert cli(capsys, "report", folder, "-o", str(tmp_path / "r.html"))[0] == 0
    # asked, they run only what computes
    code, out, err = cli(capsys, "nan-origin", "--rerun-ops", folder)
    assert (code, out.splitlines()[3], err) == (1, f"  op:     not narrowed: {FROM_FILE}", "")
    assert cli(capsys, "report", "--rerun-ops", folder, "-o", str(tmp_path / "r.html"))[0] == 0
    assert f"op:     not narrowed: {FROM_FILE}" in (tmp_path / "r.html").read_text()
    assert victim.read_text() == "a file of the user's"


def test_nan_origin_reruns_the_ops_when_asked(made, tmp_path, capsys):
    folder = planted_ops(made, tmp_path, [
        op("log", "aten.log.default", {"input": "buf0", "shape": ["2", "3"]}, holds=["buf1"])])
    code, out, _ = cli(capsys, "nan-origin", "--rerun-ops", folder)
    assert (code, out.splitlines()[3]) == (1, "  op:     aten.log")
    # in-place and out= forms write only what the re-run made: they run
    folder = planted_ops(made, tmp_path / "out", [
        op("empty", "aten.empty_like.default", {"input": "buf0", "shape": ["2", "3"]}),
        op("log", "aten.log.out", {"input": "buf0", "shape": ["2", "3"]}, out={"node": "empty"}),
        op("twice", "aten.mul_.Scalar", {"node": "log"}, 1.0, holds=["buf1"])])
    code, out, _ = cli(capsys, "check", folder)
    assert code == 4     # 1.1 and 1.3 have no ops: one launch of three judged is not a verdict
    assert check_line(out).startswith("1.2 cpp_fused_log_1  ok  max_abs=0 max_rel=0 max_ulp="), out


@pytest.mark.parametrize("ops, why", [
    ([op("said", "aten._print.default", "\x1b[2J\x1b]0;pwned\x07", holds=["buf1"])],
     "aten._print is not re-run: it prints"),
    ([op("seeded", "aten.manual_seed.default", 1234, holds=["buf1"])],
     "aten.manual_seed is not re-run: it seeds the random generator of the process"),
    ([op("saved", "aten.save.default", {"input": "buf0"}, "SAVED", holds=["buf1"])],
     "aten.save is not re-run: it writes a file"),
    ([op("grad", "aten.set_grad_enabled.default", True, holds=["buf1"])],
     "aten.set_grad_enabled is not re-run: it changes the autograd state of the process"),
    ([op("timed", "profiler._record_function_enter.default", "x", holds=["buf1"])],
     "profiler._record_function_enter is not re-run: it records into the profiler of the process"),
], ids=["print", "manual_seed", "save", "set_grad_enabled", "profiler"])
def test_ops_that_act_outside_the_computation_are_refused(made, tmp_path, capfd, ops, why):
    saved = tmp_path / "saved.pt"
    ops = json.loads(json.dumps(ops).replace("SAVED", str(saved)))
    folder = planted_ops(made, tmp_path, ops)
    seed = torch.initial_seed()
    code = main(["check", folder])
    out, err = capfd.readouterr()
    assert (code, check_line(out), err) == (4, f"1.2 cpp_fused_log_1  not checkable: buf1: {why}", "")
    code = main(["nan-origin", "--rerun-ops", folder])
    out, err = capfd.readouterr()
    assert (code, out.splitlines()[3], err) == (1, f"  op:     not narrowed: {why}", "")
    assert torch.initial_seed() == seed and not saved.exists() and torch.is_grad_enabled()


ALLOW_LIST = ("is not among torch's operators re-run on a dump's values (the core ATen opset, pointwise and "
              "reduction ops, and those docs/dumps.md lists)")
TRUSTING = "trusts sizes, indices or storage it is given (refused on a dump's values)"


@pytest.mark.parametrize("ops, why", [
    # an index past the size, densified: a chosen value written at a chosen offset (SIGSEGV, heap corruption)
    ([op("idx", "aten.full.default", [1, 1], 10**6, dtype={"dtype": "int64"}),
      op("vals", "aten.full.default", [1], 7.0),
      op("sp", "aten._sparse_coo_tensor_unsafe.default", {"node": "idx"}, {"node": "vals"}, [4]),
      op("dense", "aten._to_dense.default", {"node": "sp"}, holds=["buf1"])],
     f"aten._to_dense is not re-run: it {ALLOW_LIST}"),
    ([op("idx", "aten.full.default", [1, 1], 10**6, dtype={"dtype": "int64"}),
      op("vals", "aten.full.default", [1], 7.0),
      op("sp", "aten._sparse_coo_tensor_unsafe.default", {"node": "idx"}, {"node": "vals"}, [4], holds=["buf1"])],
     f"aten._sparse_coo_tensor_unsafe is not re-run: it {TRUSTING}"),
    ([op("grown", "aten.resize_.default", {"input": "buf0", "shape": ["2", "3"]}, [1 << 20], holds=["buf1"])],
     f"aten.resize_ is not re-run: it {TRUSTING}"),
    # the unchecked index runs as its checked form: past the end is an error, never a read
    ([op("at", "aten.full.default", [2], 10**6, dtype={"dtype": "int64"}),
      op("picked", "aten._unsafe_index.Tensor", {"input": "buf0", "shape": ["2", "3"]}, [{"node": "at"}],
         holds=["buf1"])],
     "aten._unsafe_index raised IndexError: index 1000000 is out of bounds for dimension 0 with size 2"),
    # 343 bytes asking for 4 GiB: refused from its sizes, on fake tensors, before anything is allocated
    ([op("big", "aten.ones.default", [32768, 32768]), op("total", "aten.sum.default", {"node": "big"}, holds=["buf1"])],
     "aten.ones is not re-run: its results would take 4294967296 bytes, more than 268435456 (8 times the "
     "largest tensor the launch recorded, 268435456 at least)"),
], ids=["sparse-to-dense", "sparse-unsafe", "resize", "unsafe-index", "unbounded"])
def test_re_run_ops_are_torchs_checked_operators_within_the_dumps_sizes(made, tmp_path, ops, why):
    """Only torch's operators known to compute safely on dense strided tensors run (an allow-list),
    within memory the dump's own tensors justify; in a fresh process, whose peak memory is measured."""
    folder = planted_ops(made, tmp_path, ops)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import resource, sys
        from aoti_debug.cli import main
        code = main(["check", sys.argv[1]])
        print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        sys.exit(code)"""), folder], capture_output=True, text=True, timeout=120, env=clean_env())
    assert (proc.returncode, check_line(proc.stdout), proc.stderr) == (
        4, f"1.2 cpp_fused_log_1  not checkable: buf1: {why}", "")
    assert int(proc.stdout.split("PEAK ")[1]) < 1500      # MiB: nothing near the 4 GiB asked for


def test_a_view_reaching_outside_its_storage_is_never_read(made, tmp_path):
    """_reshape_alias places a view without a bounds check; the op that would read it never runs
    (in a fresh process: reading it could crash this one)."""
    folder = planted_ops(made, tmp_path, [
        op("alias", "aten._reshape_alias.default", {"input": "buf0", "shape": ["2", "3"]}, [2, 3], [10**8, 1]),
        op("read", "aten.clone.default", {"node": "alias"}, holds=["buf1"])])
    proc = in_fresh_process("check", folder)
    assert (proc.returncode, check_line(proc.stdout), proc.stderr) == (
        4, "1.2 cpp_fused_log_1  not checkable: buf1: aten._reshape_alias is not re-run: it returned a view "
           "reaching outside its storage", "")


def test_replay_calls_only_torch_ops_that_compute(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("a file of the user's")
    folder = calls_folder(tmp_path / "dumps", "torch._ops.aten", "aten::from_file", [str(victim), True, 16],
                          torch.zeros(16, dtype=torch.uint8))
    assert cli(capsys, "replay", "--dir", str(folder)) == (2, "", (
        f"aoti-debug replay: {folder}/manifest.jsonl:2: call 1 names torch._ops.aten.aten::from_file, which is "
        f"not replayed: it {FROM_FILE.split(': it ', 1)[1]} (replay runs operators that compute, nothing that "
        "acts outside the computation)\n"))
    assert victim.read_text() == "a file of the user's"


# ---------------------------------------------------------------- 9. a black box ring names its process

RING_DRIVER = """
    import os, torch
    from aoti_debug.runtime.launches import Model, Site
    model = Model("model", 0, blackbox=4)
    x = torch.tensor([1.0, 2.0])
    site = Site("cpp_fused_add_0", "add", "/srv/app/model.py:11", "", (("arg0_1", "in"), ("buf0", "out")))
    run = model.begin_run(("arg0_1",), (x,))
    buf0 = torch.empty_like(x)
    run.launch += 1
    run.before(site, (x, buf0))
    buf0.copy_(x + 1)
    run.after(site, (x, buf0))
    os._exit(0)        # as a killed process does: the ring stays
"""
RING_PID_AT = 28       # RingHeader (detail/blackbox.h): magic[8], version, header_bytes, file_bytes, launches, pid


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    dump_dir = tmp_path_factory.mktemp("box") / "dumps"
    run_python(RING_DRIVER, env=clean_env(AOTI_DEBUG_DUMP_DIR=dump_dir, AOTI_DEBUG_BLACKBOX_MAX_MB="1",
                                          AOTI_DEBUG_LOGDEST=dump_dir.parent / "log.txt"))
    (name,) = [n for n in os.listdir(dump_dir) if n.endswith("-blackbox.ring")]
    return (dump_dir / name).read_bytes()


@pytest.mark.parametrize("pid", [0, -1, 2**31 - 1])
def test_a_ring_naming_no_valid_process_is_refused_without_kill_advice(ring, tmp_path, capsys, pid):
    """kill -USR2 0 signals the process group, -1 every process: a ring is data."""
    import struct
    path = tmp_path / "4242-blackbox.ring"
    path.write_bytes(ring[:RING_PID_AT] + struct.pack("<i", pid) + ring[RING_PID_AT + 4:])
    assert cli(capsys, "blackbox", "recover", str(tmp_path)) == (2, "", (
        f"aoti-debug blackbox: {str(path)!r}: its process id {pid} is not valid (a process id is 1 to 4194304): "
        "the ring is damaged or not a black box's, and is not recovered\n"))
    assert os.listdir(tmp_path) == [path.name]
    # the ring as written is recovered
    path.write_bytes(ring)
    code, out, _ = cli(capsys, "blackbox", "recover", str(tmp_path))
    assert (code, out.splitlines()[0].split(" into ")[0]) == (0, f"recovered {path}")


# ---------------------------------------------------------------- dumps are private

def modes_under(root):
    """{path relative to root: its permission bits} of root and everything under it (no link followed)."""
    found = {".": oct(os.lstat(root).st_mode & 0o777)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = oct(os.lstat(path).st_mode & 0o777)
    return found


def test_dumps_of_both_runtimes_are_private(mlp10, made, tmp_path):
    """Model inputs and weights are the user's: every folder 0700, every file 0600 (the
    artifact's copy too), whatever the umask lets through."""
    dump = tmp_path / "dumps"
    run_model(mlp10, dump, tmp_path / "log.txt", AOTI_DEBUG_LOGLEVEL="10")
    cpp = modes_under(dump)
    assert any(p.endswith("-mlp-artifact.so") for p in cpp) and any(p.endswith(".pt") for p in cpp), cpp
    assert {p: m for p, m in cpp.items() if m != ("0o700" if os.path.isdir(dump / p) else "0o600")} == {}
    python = modes_under(made["nan"][0])       # the Python runtime's dumps of the same kind
    assert any(p.endswith(".pt") for p in python), python
    assert {p: m for p, m in python.items()
            if m != ("0o700" if os.path.isdir(os.path.join(made["nan"][0], p)) else "0o600")} == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")
@pytest.mark.parametrize("planted", ["folder", "link"])
def test_a_dump_directory_another_user_controls_is_refused(mlp10, tmp_path, planted):
    """A dump directory another user made (0777, so that the model's weights land where they can
    read them), or a link of theirs to one: no dump is written there, and the log says why."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chmod(theirs, 0o777)
    dump = theirs
    if planted == "folder":
        os.chown(theirs, NOBODY, NOBODY)
        why = "owned by another user, who could read what is written there"
    else:
        dump = tmp_path / "dumps"
        os.symlink(theirs, dump)
        os.lchown(dump, NOBODY, NOBODY)
        why = "a symbolic link another user owns, which is not followed"
    log = tmp_path / "log.txt"
    proc = run_model(mlp10, dump, log, AOTI_DEBUG_LOGLEVEL="10")
    assert proc.stdout.startswith("OUTPUT ")          # the model runs on
    assert os.listdir(theirs) == []
    assert f"({why}); no more dumps" in log.read_text(), log.read_text()


NOBODY = 65534
