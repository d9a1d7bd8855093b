"""The analysis commands on damaged, cut or crafted input (aoti_debug/analysis/untrusted.py).

The contract: unusable input is exit status 2 with one line on stderr naming the
file (and line) and the problem; never a traceback, never a hang, never a wrong
answer.  A file that cannot be read is unknown: never a divergence, never "no NaN".

The dumps are real, without compiling anything: `log_api` calls at level 10, and
a run folder written by the Python runtime that torch.compile's wrapper calls
(aoti_debug.runtime.launches), driven here by hand as the generated wrapper drives it.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from aoti_debug.analysis import dumps, records, report, untrusted
from aoti_debug.cli import main
from conftest import clean_env, run_python
from test_analysis_logs import LogWriter, T, nan_model_log, write_log
from test_analysis_nan_origin import CHAIN

torch = pytest.importorskip("torch")

CALLS_MODULE = "untrusted_calls"
CALLS_SOURCE = CHAIN.replace("CALL", "")       # shift, scale, take_log (NaN from finite inputs), ...

# one run of a three-kernel model, as the generated wrapper drives aoti_debug.runtime.launches
RUN_DRIVER = '''
import torch
from aoti_debug.runtime.launches import Model, Site
model = Model("model", 10)
x = torch.tensor([[-2.0, 1.0, 3.0], [0.5, 4.0, -1.0]])
sites = [Site("cpp_fused_add_0", "add", "/srv/app/model.py:11", "", (("arg0_1", "in"), ("buf0", "out"))),
         Site("cpp_fused_log_1", "log", "/srv/app/model.py:12", "", (("buf0", "in"), ("buf1", "out"))),
         Site("cpp_fused_mul_2", "mul", "/srv/app/model.py:13", "", (("buf1", "in"), ("buf2", "out")))]
run = model.begin_run(("arg0_1",), (x,))
buf0, buf1, buf2 = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
steps = ((lambda: buf0.copy_(x + OFFSET), (x, buf0)), (lambda: buf1.copy_(torch.log(buf0)), (buf0, buf1)),
         (lambda: buf2.copy_(buf1 * 2), (buf1, buf2)))
for site, (step, args) in zip(sites, steps):
    run.launch += 1
    if run.level: run.before(site, args)
    step()
    if run.level: run.after(site, args)
if run.level >= 3: run.end(("buf2",), (buf2,))
'''

NAN_CALLS = "m.take_log(m.scale(m.shift(x), 2.0))"
CLEAN_CALLS = "m.scale(m.shift(x), 2.0)"


def make_dumps(root, calls, offset, level=10):
    """A dump directory with a `-calls` folder and a run folder, and the log written beside;
    returns (dump dir, calls folder, run folder, log); below level 10, the log only."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{CALLS_MODULE}.py").write_text(CALLS_SOURCE)
    dump_dir, log = root / "dumps", root / "debug.log"
    code = (f"import torch, {CALLS_MODULE} as m\nx = torch.tensor([[0.25, 1.0, 2.0], [3.0, 4.0, 5.0]])\n"
            f"{calls}\n" + RUN_DRIVER.replace("OFFSET", repr(offset)))
    run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_DUMP_DIR=dump_dir,
                                   AOTI_DEBUG_LOGDEST=log, PYTHONPATH=root))
    if level < 10:
        return None, None, None, str(log)
    folders = sorted(os.listdir(dump_dir))
    calls_dir = next(d for d in folders if d.endswith("-calls"))
    run_dir = next(d for d in folders if d.endswith("-model-run1"))
    return str(dump_dir), str(dump_dir / calls_dir), str(dump_dir / run_dir), str(log)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("untrusted")
    return {"nan": make_dumps(root / "nan", NAN_CALLS, 1.0),
            "clean": make_dumps(root / "clean", CLEAN_CALLS, 10.0), "root": root}


def copy(folder, tmp_path, name="copy"):
    target = tmp_path / name / os.path.basename(folder)
    shutil.copytree(folder, target)
    return str(target)


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lines_of(folder):
    with open(os.path.join(folder, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def rewrite(folder, entries, tail="\n"):
    with open(os.path.join(folder, "manifest.jsonl"), "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries[:-1]) + json.dumps(entries[-1]) + tail)


def in_fresh_process(*argv, timeout=60):
    """The command in a fresh interpreter: a hang fails the test instead of stopping it."""
    return subprocess.run([sys.executable, "-m", "aoti_debug", *argv], capture_output=True, text=True,
                          timeout=timeout, env=clean_env())


# -- 9. numbers too long for int() -------------------------------------------------------

@pytest.mark.parametrize("head, problem", [
    (f"[pid {'9' * 5000}] launch 1.2 ",
     f"pid '{'9' * 60}... (5000 characters)' is not a process id (a decimal of at most 20 digits)"),
    (f"[pid 4242] launch 1.{'9' * 5000} ",
     f"id '1.{'9' * 58}... (5002 characters)' holds a number of more than 20 digits"),
], ids=["pid", "launch-number"])
def test_a_5000_digit_number_in_a_header_is_exit_2_naming_the_line(tmp_path, capsys, head, problem):
    text = nan_model_log().text()
    bad = text.replace("[pid 4242] launch 1.2 ", head, 1)
    line = bad.splitlines().index(next(l for l in bad.splitlines() if "9" * 5000 in l)) + 1
    log, good = write_log(tmp_path, "bad.log", bad), write_log(tmp_path, "good.log", text)
    for argv in (["nan-origin", log], ["report", log, "-o", str(tmp_path / "r.html")],
                 ["diff", log, good], ["diff", good, log]):
        assert cli(capsys, *argv) == (2, "", f"aoti-debug {argv[0]}: {log}:{line}: {problem}\n")


def test_a_5000_digit_source_line_is_shown_as_text(tmp_path, capsys):
    source = "/srv/app/model.py:" + "7" * 5000
    log = write_log(tmp_path, "x.log", nan_model_log().text().replace("/srv/app/model.py:12", source))
    code, out, _ = cli(capsys, "nan-origin", log)
    assert code == 1 and out.splitlines()[1] == f"  source: {source}"
    code, out, _ = cli(capsys, "report", log, "-o", str(tmp_path / "r.html"))
    assert (code, out) == (
        0, f"wrote {tmp_path}/r.html: 4 launches/calls; NaN/Inf origin: 1.2 cpp_fused_log_1\n")
    page = (tmp_path / "r.html").read_text()
    assert f'<td class="mono">{source}</td>' in page and "#L7777" not in page


def test_long_container_lengths_and_counts_are_damage_not_numbers():
    w = LogWriter(with_banner=False)
    w.record("call", "1", "f", ["  arg[0] xs:", f"    list(len={'3' * 5000})", "      [0]: 1"])
    w.record("return", "1", "f", ["  output:", "    Tensor(", "      shape=(2,)",
                                  "      dtype=torch.float32", f"      nan_count={'1' * 5000}", "    )"])
    call, ret = parse_records(w.text())
    assert call.damage == "x.log:2: 'arg[0] xs' has no value that can be read"
    assert ret.damage == (f"x.log:10: 'nan_count={'1' * 50}... (5010 characters)' is not a count "
                          "(expected a whole number of at most 20 digits)")
    assert records.parse_number("1" * 5000) is None and records.parse_number("1_000") is None
    assert records.parse_number("18446744073709551615") == 2**64 - 1


def parse_records(text):
    return records.parse(text, "x.log").records


# -- 10. manifests with valid JSON of the wrong types --------------------------------------

RUN_PROBLEMS = [   # (line, field, value, what the message says is expected)
    (3, "time", "yesterday", "a number of seconds since 1970, before the year 10000"),
    (3, "index", {"k": 1}, "a whole number from 0 to 2**63-1"),
    (3, "run", True, "a whole number from 0 to 2**63-1"),
    (2, "kernel", ["cpp_fused_add_0"], "a string without control characters"),
    (2, "kernel", "cpp_\u001b[2Jx", "a string without control characters"),
    (2, "nodes", "add mul", "a string without spaces or control characters"),
    (1, "inputs", "arg0_1", "a list of non-empty strings without `:` or control characters"),
    (3, "files", {"name": "buf0"}, "a list of objects"),
    (8, "launches", -1, "a whole number from 0 to 2**63-1"),
]


@pytest.mark.parametrize("line, field, value, expected", RUN_PROBLEMS)
def test_a_run_manifest_field_of_the_wrong_type_is_exit_2(made, tmp_path, capsys, line, field, value,
                                                          expected):
    folder = copy(made["clean"][2], tmp_path)
    entries = lines_of(folder)
    entries[line - 1][field] = value
    rewrite(folder, entries)
    problem = f"{folder}/manifest.jsonl:{line}: field '{field}' is {json.dumps(value)} (expected {expected})"
    problem = untrusted.printable(problem)
    for argv in (["nan-origin", folder], ["diff", made["clean"][2], folder],
                 ["report", folder, "-o", str(tmp_path / "r.html")], ["replay", "--dir", folder]):
        assert cli(capsys, *argv) == (2, "", f"aoti-debug {argv[0]}: {problem}\n"), argv


@pytest.mark.parametrize("change, problem", [
    (lambda e: e[2]["files"][0].update(file="../../inputs.pt"),
     ":3: field 'files[0].file' is \"../../inputs.pt\" (expected the name of a file in the dump folder "
     "(no `/`), or null)"),
    (lambda e: e[2]["files"][0].update(role="sideways"),
     ":3: field 'files[0].role' is \"sideways\" (expected \"in\", \"out\" or \"inout\")"),
    (lambda e: e[2].update(id="1.9"),
     ":3: field 'id' is \"1.9\" (expected \"1.1\", from 'run' and 'index')"),
    (lambda e: e[2].update(kind="bogus"),
     ":3: kind \"bogus\" with event \"after\" is not a line aoti-debug writes (expected one of run/run, "
     "launch/before, launch/after, run-end/run-end, call/before, call/after)"),
    (lambda e: e[3].pop("time"),
     ":4: field 'time' is missing (expected a number of seconds since 1970, before the year 10000)"),
    (lambda e: e[3].update(run=2, id="2.2"),
     ":4: field 'run' is 2, but line 1 says 1 (a dump folder holds one run)"),
    (lambda e: e.__setitem__(4, [1, 2]), ":5: not a JSON object"),
])
def test_inconsistent_run_manifests_are_exit_2(made, tmp_path, capsys, change, problem):
    folder = copy(made["clean"][2], tmp_path)
    entries = lines_of(folder)
    change(entries)
    rewrite(folder, entries)
    assert cli(capsys, "nan-origin", folder) == (
        2, "", f"aoti-debug nan-origin: {folder}/manifest.jsonl{problem}\n")


def test_a_calls_manifest_field_of_the_wrong_type_is_exit_2(made, tmp_path, capsys):
    folder = copy(made["clean"][1], tmp_path)
    entries = lines_of(folder)
    entries[1]["index"] = "2"
    rewrite(folder, entries)
    problem = f"{folder}/manifest.jsonl:2: field 'index' is \"2\" (expected a whole number from 0 to 2**63-1)"
    for argv in (["nan-origin", folder], ["replay", "--dir", folder]):
        assert cli(capsys, *argv) == (2, "", f"aoti-debug {argv[0]}: {problem}\n")
    entries[1]["index"] = 1
    entries[1]["files"][1]["file"] = "call000001_secrets.txt"
    rewrite(folder, entries)
    assert cli(capsys, "nan-origin", folder)[2] == (
        f"aoti-debug nan-origin: {folder}/manifest.jsonl:2: field 'files[1].file' is "
        '"call000001_secrets.txt" (expected null or a file name of the folder ending _inputs.pt or '
        "_outputs.pt)\n")


# -- 11. FIFOs, devices and endless lines ------------------------------------------------

def test_a_fifo_named_like_a_log_is_refused_without_blocking(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    write_log(folder, "a.log", nan_model_log())
    os.mkfifo(folder / "b.log")
    message = f"{folder}/b.log: is a FIFO, not a regular file (only regular files are read)\n"
    for argv in (["nan-origin", str(folder)], ["diff", str(folder), str(folder / "a.log")],
                 ["report", str(folder), "-o", str(tmp_path / "r.html")],
                 ["nan-origin", str(folder / "b.log")]):
        proc = in_fresh_process(*argv)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"aoti-debug {argv[0]}: {message}")


def test_devices_are_refused_before_they_are_read(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.log")
    for path, what in (("/dev/zero", "/dev/zero: is a character device, not a regular file (only regular "
                                      "files are read)"),
                       (str(tmp_path), f"{tmp_path}/zero.log: {LINK}")):
        proc = in_fresh_process("nan-origin", path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"aoti-debug nan-origin: {what}\n")


def test_a_fifo_manifest_or_tensor_file_is_refused_without_blocking(made, tmp_path):
    folder = copy(made["clean"][2], tmp_path)
    os.unlink(os.path.join(folder, "launch000002_out_buf1.pt"))
    os.mkfifo(os.path.join(folder, "launch000002_out_buf1.pt"))
    proc = in_fresh_process("nan-origin", folder)
    assert (proc.returncode, proc.stderr) == (2, (
        f"aoti-debug nan-origin: {folder}/launch000002_out_buf1.pt: is a FIFO, not a regular file "
        "(only regular files are read); without it, whether NaN/Inf appear cannot be told\n"))
    os.unlink(os.path.join(folder, "manifest.jsonl"))
    os.mkfifo(os.path.join(folder, "manifest.jsonl"))
    for argv in (["nan-origin", folder], ["replay", "--dir", folder]):
        proc = in_fresh_process(*argv)
        assert (proc.returncode, proc.stderr) == (2, (
            f"aoti-debug {argv[0]}: {folder}/manifest.jsonl: is a FIFO, not a regular file "
            "(only regular files are read)\n"))


def test_a_line_longer_than_the_limit_is_exit_2_naming_it(made, tmp_path, capsys):
    limit = untrusted.LINE_LIMIT
    assert limit == 16 * 2**20
    text = nan_model_log().text().splitlines(keepends=True)
    log = tmp_path / "long.log"
    log.write_text("".join(text[:7]) + "x" * limit + "\n" + "".join(text[7:]))     # after the banner
    code, _, _ = cli(capsys, "nan-origin", str(log))       # a line at the limit is read (a foreign line)
    assert code == 1
    log.write_text("".join(text[:7]) + "x" * (limit + 1) + "\n" + "".join(text[7:]))
    problem = f"line longer than {limit} bytes (the limit for one line of a log or manifest)"
    assert cli(capsys, "nan-origin", str(log)) == (2, "", f"aoti-debug nan-origin: {log}:8: {problem}\n")
    folder = copy(made["clean"][2], tmp_path)
    with open(os.path.join(folder, "manifest.jsonl"), "a") as f:
        f.write(" " * (limit + 1))
    assert cli(capsys, "nan-origin", folder) == (
        2, "", f"aoti-debug nan-origin: {folder}/manifest.jsonl:9: {problem}\n")


# -- 12. tensor files that cannot be read are unknown --------------------------------------

def garble(folder, name, content=b"garbage\n"):
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(content)
    return path


GARBAGE = ("cannot be read as a torch.save file (not a ZIP archive: only the format torch.save and "
           "aoti-debug's runtimes write is read, not torch's legacy one)")
# nan-origin when launch 1.2's outputs (the NaN) cannot be read, and launch 1.3 sees NaN in its inputs
HIDDEN_ORIGIN = ("no launch or call whose outputs can be read turned finite inputs into NaN/Inf: "
                 "NaN/Inf were already in the inputs")
# a crafted log's launch ids are R.K; a dump's are read under its instance (model:R.K)
MAYBE_EARLIER = ("note: the outputs of 1 earlier launch cannot be read, so NaN/Inf may have appeared "
                 "earlier: 1.2 cpp_fused_log_1")
MAYBE_EARLIER_DUMPED = MAYBE_EARLIER.replace("earlier: 1.2", "earlier: model:1.2")


def test_replay_of_a_run_with_garbage_inputs_names_the_file(made, tmp_path, capsys):
    folder = copy(made["nan"][2], tmp_path)
    path = garble(folder, "inputs.pt")
    assert cli(capsys, "replay", "--dir", folder) == (
        2, "", f"aoti-debug replay: {path}: {GARBAGE} (the run cannot be reproduced)\n")


def test_nan_origin_never_says_no_nan_when_a_tensor_file_cannot_be_read(made, tmp_path, capsys):
    folder = copy(made["clean"][2], tmp_path)
    assert cli(capsys, "nan-origin", folder) == (0, "no NaN/Inf in the 3 launches of the log\n", "")
    path = garble(folder, "inputs.pt")
    assert cli(capsys, "nan-origin", folder) == (2, "", (
        f"aoti-debug nan-origin: {path}: {GARBAGE}; without it, whether NaN/Inf appear cannot be told\n"))
    os.unlink(os.path.join(folder, "launch000003_out_buf2.pt"))
    # a file the manifest names that is gone is a gap of the run: said first, exit 4
    code, out, err = cli(capsys, "nan-origin", folder)
    assert (code, err, out.splitlines()[0]) == (4, "", "the run is incomplete: records or tensors were lost:")
    assert out.splitlines()[1].startswith(f"  {folder}/launch000003_out_buf2.pt: named by {folder}/manifest.jsonl:")
    assert out.splitlines()[2] == "cannot tell whether NaN/Inf appear: 2 file(s) or record(s) cannot be read"


def test_nan_origin_names_the_files_it_could_not_read(made, tmp_path, capsys):
    folder = copy(made["nan"][2], tmp_path)
    inputs = garble(folder, "inputs.pt")
    code, out, err = cli(capsys, "nan-origin", folder)
    assert (code, err) == (1, "")
    assert out.splitlines()[0].startswith("NaN/Inf origin: launch model:1.2 cpp_fused_log_1 ")
    assert out.splitlines()[-1] == f"note: {inputs}: {GARBAGE}; its tensors are unknown"
    # the origin's output cannot be read: the next launch sees NaN in its inputs, and that is all
    path = garble(folder, "launch000002_out_buf1.pt")
    code, out, _ = cli(capsys, "nan-origin", folder)
    assert (code, out.splitlines()[0]) == (1, HIDDEN_ORIGIN)
    assert out.splitlines()[-3:] == [
        MAYBE_EARLIER_DUMPED, f"note: {inputs}: {GARBAGE}; its tensors are unknown",
        f"note: {path}: {GARBAGE}; its tensors are unknown"]


def test_diff_shows_a_file_it_cannot_read_as_unknown_not_as_a_divergence(made, tmp_path, capsys):
    a = made["clean"][2]
    b = copy(a, tmp_path)
    path = garble(b, "launch000002_out_buf1.pt")
    code, out, err = cli(capsys, "diff", a, b)
    assert code == 2 and "DIFFERS" not in out
    assert out.splitlines()[2:] == [
        "A          B          kernel           status        max abs  max rel  largest delta",
        "model:1.1  model:1.1  cpp_fused_add_0  identical     0        0        0 (bit for bit)",
        f"model:1.2  model:1.2  cpp_fused_log_1  not compared  -        -        unknown: {path}: {GARBAGE}",
        "model:1.3  model:1.3  cpp_fused_mul_2  identical     0        0        0 (bit for bit)",
        "1 aligned launch(es) could not be compared (no statistics or outputs)",
        "cannot tell whether A and B agree: 1 file(s) or record(s) cannot be read "
        f"(first: {path}: {GARBAGE})"]
    assert err == (f"aoti-debug diff: {path}: {GARBAGE}; without it, whether A and B agree "
                   "cannot be told\n")
    os.unlink(path)             # gone: a gap of B's run, said first (exit 4), not unreadable input
    code, out, err = cli(capsys, "diff", a, b)
    assert (code, err, out.splitlines()[2:4]) == (4, "", [
        "B: the run is incomplete: records or tensors were lost:",
        f"B:   {path}: named by {b}/manifest.jsonl:5 but absent"])


def test_diff_of_a_tensor_that_was_not_dumped_is_not_compared(made, tmp_path, capsys):
    a = made["clean"][2]
    b = copy(a, tmp_path)
    entries = lines_of(b)
    entries[4]["files"][0].update(file=None, error="dtype not supported (float8_e4m3fn)")
    entries[4]["status"] = "incomplete"
    rewrite(b, entries)
    code, out, _ = cli(capsys, "diff", a, b)
    assert code == 0 and "DIFFERS" not in out
    assert out.splitlines()[4] == ("model:1.2  model:1.2  cpp_fused_log_1  not compared  -        -        "
                                   "outputs without statistics")


def test_replay_of_calls_marks_an_unreadable_recording_unknown(made, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(made["root"] / "clean"))
    folder = copy(made["clean"][1], tmp_path)
    replay = ("replay", "--dir", folder, "--allow-module", CALLS_MODULE)
    assert cli(capsys, *replay) == (0, (
        f"PASS call 1 {CALLS_MODULE}.shift max_abs=0 max_rel=0\n"
        f"PASS call 2 {CALLS_MODULE}.scale max_abs=0 max_rel=0\n"
        "2 passed, 0 failed\n"), "")
    path = garble(folder, "call000002_inputs.pt")
    assert cli(capsys, *replay) == (2, (
        f"PASS call 1 {CALLS_MODULE}.shift max_abs=0 max_rel=0\n"
        f"UNKNOWN call 2 {CALLS_MODULE}.scale {path}: {GARBAGE}\n"
        "1 passed, 0 failed, 1 unknown\n"), (
        f"aoti-debug replay: {path}: {GARBAGE}; without it, whether the replay matches the recording "
        "cannot be told\n"))
    torch.save({"args": 3, "kwargs": {}}, path)
    assert cli(capsys, *replay)[1].splitlines()[1] == (
        f'UNKNOWN call 2 {CALLS_MODULE}.scale {path}: does not hold {{"args": [...], "kwargs": {{...}}}} '
        "(keyword names: strings without `:` or control characters)")


def test_dumped_files_that_would_take_hours_are_refused(made, tmp_path, capsys):
    folder = copy(made["clean"][2], tmp_path)
    path = os.path.join(folder, "launch000002_out_buf1.pt")
    torch.save(torch.zeros(1).expand(2**33), path)        # 8 bytes on disk, 2**33 elements
    assert cli(capsys, "nan-origin", folder)[2] == (
        f"aoti-debug nan-origin: {path}: holds a tensor of 8589934592 elements (at most 4294967296 "
        "are read); without it, whether NaN/Inf appear cannot be told\n")
    nested = []
    for _ in range(100):
        nested = [nested]
    torch.save(nested, path)
    assert cli(capsys, "nan-origin", folder)[2].startswith(
        f"aoti-debug nan-origin: {path}: nests containers more than 64 deep; without it")
    torch.save(torch.eye(3).to_sparse(), path)
    assert cli(capsys, "nan-origin", folder)[2].startswith(
        f"aoti-debug nan-origin: {path}: holds a torch.sparse_coo tensor (only strided tensors are "
        "dumped); without it")


def test_a_dumped_value_that_no_record_can_hold_is_unknown(made, tmp_path, capsys):
    folder = copy(made["clean"][2], tmp_path)
    torch.save({("a]",): torch.ones(2)}, os.path.join(folder, "launch000003_out_buf2.pt"))
    assert cli(capsys, "nan-origin", folder) == (2, "", (
        f"aoti-debug nan-origin: {folder}/manifest.jsonl:7: a dumped value cannot be written as a log "
        "record; without it, whether NaN/Inf appear cannot be told\n"))


# -- 13. what a fuzzer found in the parser and the report ----------------------------------

def test_unicode_digits_are_not_numbers():
    w = LogWriter(with_banner=False)
    w.launch("1.\u00b2", "k", "add", "m.py:\u00b2", inputs=[("in x", T(0.0, 1.0, 0.5))],
             outputs=[("out y", T(0.0, 1.0, 0.5))])
    w.record("call", "1", "f", ["  arg[\u0663] x: 1"])
    log = records.parse(w.text(), "x.log")
    (launch,) = log.launches
    assert (launch.run, launch.index) == (None, None)
    assert launch.origin.file_and_line == ("m.py:\u00b2", None)
    assert log.calls[0].inputs[0].label == "arg[\u0663] x"
    assert 'm.py:\u00b2' in report.render(log).html


# -- 14. never silent, never a terminal escape -------------------------------------------

def test_a_damaged_manifest_line_in_the_middle_is_exit_2_and_a_torn_last_line_is_skipped(
        made, tmp_path, capsys):
    folder = copy(made["nan"][2], tmp_path)
    good = cli(capsys, "nan-origin", folder)
    manifest = os.path.join(folder, "manifest.jsonl")
    text = open(manifest).read()
    with open(manifest, "w") as f:                         # the process died writing run-end
        f.write(text[:-40])
    # the torn line is skipped: the run never finished, said first; the origin before it stands
    code, out, err = cli(capsys, "nan-origin", folder)
    assert (code, err) == (good[0], good[2]) and out.endswith("\n" + good[1])
    assert out.splitlines()[:2] == ["the run never finished:", out.splitlines()[1]]
    assert out.splitlines()[1].endswith("model-run1/manifest.jsonl:1); what came after launch model:1.3 "
                                        "cpp_fused_mul_2 is missing")
    with open(manifest, "w") as f:
        f.write(text[:-40] + "\n")                          # a whole line, damaged
    assert cli(capsys, "nan-origin", folder)[2].startswith(
        f"aoti-debug nan-origin: {manifest}:8: not a JSON line (JSONDecodeError: ")
    lines = text.splitlines(keepends=True)
    with open(manifest, "w") as f:
        f.write("".join(lines[:3]) + lines[3][:50] + "\n" + "".join(lines[4:]))
    assert cli(capsys, "nan-origin", folder)[2].startswith(
        f"aoti-debug nan-origin: {manifest}:4: not a JSON line (JSONDecodeError: ")


def test_names_from_a_log_cannot_drive_the_terminal(tmp_path, capsys):
    evil = "cpp_\x1b]0;owned\x07_log_\x9b2J_1"
    shown = "cpp_\\x1b]0;owned\\x07_log_\\x9b2J_1"
    log = write_log(tmp_path, "x.log", nan_model_log().text().replace("cpp_fused_log_1", evil))
    clean = write_log(tmp_path, "y.log", nan_model_log(nan_at=0).text())
    code, out, _ = cli(capsys, "nan-origin", log)
    assert code == 1 and out.splitlines()[0] == f"NaN/Inf origin: launch 1.2 {shown} (pid 4242, x.log:68)"
    code, out, _ = cli(capsys, "diff", clean, log)
    assert code == 1 and f"1.2  1.2  cpp_fused_log_1 / {shown}  DIFFERS" in out
    code, out, _ = cli(capsys, "report", log, "-o", str(tmp_path / "r.html"))
    assert out.endswith(f"NaN/Inf origin: 1.2 {shown}\n")
    missing = str(tmp_path / "gone\x1b[2J.log")
    assert cli(capsys, "nan-origin", missing)[2] == (
        f"aoti-debug nan-origin: {tmp_path}/gone\\x1b[2J.log: no such file or directory, and as a glob "
        "it matches none (expected logs or dump directories written by aoti-debug)\n")
    assert untrusted.printable("a\u202eb\u2028c\td") == "a\\u202eb\\u2028c\\x09d"


def test_the_html_report_escapes_every_name_from_the_log(tmp_path):
    w = LogWriter()
    w.launch("1.1", "<script>alert(1)</script>", "<b>n</b>", '"><img src=x onerror=alert(1)>:7',
             inputs=[("in <x>", T(0.0, 1.0, 0.5))], outputs=[("out &y", T("nan", "nan", "nan", nan=6))])
    w.record("note", "-", "<i>topic</i>", ["  <marquee>message</marquee>"])
    w.raw("<blink>foreign line</blink>\n")
    text = report.render(records.parse(w.text(), "/logs/<x>.log")).html
    for raw in ("<script>alert", "<img", "<b>n", "<i>topic", "<marquee>", "<blink>", "in <x>", "&y<"):
        assert raw not in text
    for escaped in ("&lt;script&gt;alert(1)&lt;/script&gt;", "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;:7",
                    "&lt;b&gt;n&lt;/b&gt;", "&lt;i&gt;topic&lt;/i&gt;", "&lt;marquee&gt;message",
                    "in &lt;x&gt;", "out &amp;y", "&lt;x&gt;.log"):
        assert escaped in text


def test_what_the_parser_leaves_out_is_said(tmp_path, capsys):
    log = write_log(tmp_path, "x.log", "program says hello\n" + nan_model_log().text())
    code, out, _ = cli(capsys, "nan-origin", log)
    assert code == 1 and out.splitlines()[-1] == (
        f"note: {log}: 1 line(s) that are not aoti-debug records were left out (first: line 1)")


def test_a_damaged_record_is_unknown_and_named(tmp_path, capsys):
    text = nan_model_log().text()
    lines = text.splitlines()
    end = next(i for i, l in enumerate(lines) if "launch-end 1.2" in l)
    n = lines.index("      nan_count=2", end)
    lines[n] = "      nan_cXunt=2"
    log = write_log(tmp_path, "x.log", "\n".join(lines) + "\n")
    code, out, _ = cli(capsys, "nan-origin", log)
    assert (code, out.splitlines()[0]) == (1, HIDDEN_ORIGIN)
    assert out.splitlines()[-2:] == [
        MAYBE_EARLIER, f"note: {log}:{n + 1}: line 'nan_cXunt=2' cannot be read; its tensors are unknown"]
    code, out, err = cli(capsys, "diff", write_log(tmp_path, "y.log", text), log)
    assert code == 2 and "1.2  1.2  cpp_fused_log_1  not compared  unknown: " in out
    assert err == (f"aoti-debug diff: {log}:{n + 1}: line 'nan_cXunt=2' cannot be read; without it, "
                   "whether A and B agree cannot be told\n")


# cut_status: a log cut inside a header never finished (exit 3), whether the cut header still
# names its launch (a launch that never finished) or names none (its run has no run-end)
@pytest.mark.parametrize("bad, problem, cut_status", [
    ("[2026-11-21 05:30:45.000220] [pid 4242] launch",
     "not a record header (expected `[timestamp] [pid N] kind id name`)", 3),
    ("[2026-11-21 05:30:4X.000220] [pid 4242] launch 1.2 cpp_fused_log_1",
     "timestamp '2026-11-21 05:30:4X.000220' is not of the form YYYY-MM-DD hh:mm:ss.micro", 3),
    ("[2026-11-21 05:30:45.000220] [pid 42 42] launch 1.2 cpp_fused_log_1",
     "pid '42 42' is not a process id (a decimal of at most 20 digits)", 3),
])
def test_a_damaged_header_is_exit_2_but_a_header_cut_by_the_end_of_the_file_is_not(tmp_path, capsys,
                                                                                   bad, problem, cut_status):
    lines = nan_model_log().text().splitlines()
    n = next(i for i, l in enumerate(lines) if l.endswith("] launch 1.2 cpp_fused_log_1"))
    log = write_log(tmp_path, "x.log", "\n".join(lines[:n] + [bad] + lines[n + 1:]) + "\n")
    assert cli(capsys, "nan-origin", log) == (2, "", f"aoti-debug nan-origin: {log}:{n + 1}: {problem}\n")
    cut = write_log(tmp_path, "cut.log", "\n".join(lines[:n] + [bad]))
    assert cli(capsys, "nan-origin", cut)[0] == cut_status


def test_tolerances_that_are_not_numbers_are_refused(tmp_path, capsys):
    log = write_log(tmp_path, "x.log", nan_model_log())
    assert cli(capsys, "diff", log, log, "--atol", "nan") == (
        2, "", "aoti-debug diff: --atol nan / --rtol 0.001: tolerances must be >= 0\n")


def test_one_error_type():
    for error in (records.LogInputError, dumps.InputError):
        assert issubclass(error, untrusted.InputError)
    from aoti_debug.analysis import diff, replay
    assert issubclass(diff.DiffInputError, untrusted.InputError)
    assert issubclass(replay.ReplayInputError, untrusted.InputError)


def test_replay_comparing_a_tensor_with_a_recorded_number_is_a_mismatch():
    """A damaged recording may hold a number where the function returns a tensor."""
    from aoti_debug.analysis import replay
    assert replay.compare(1, torch.ones(2), 1e-6, 1e-5) == (False, 0.0, 0.0, "output: expected int, got a tensor")


def test_a_source_line_that_cannot_be_read_damages_its_record():
    """Without it, `source:` would fall back to the launch's line: the wrong place."""
    w = LogWriter(with_banner=False)
    w.record("launch", "1.1", "cpp_fused_log_sqrt_0", ["  origin: nodes=log,sqrt source=/srv/app/model.py:12",
                                                       "  source-line: /srv/app/model.py:13",
                                                       "  output-source: buf1"])
    (launch,) = parse_records(w.text())
    assert launch.damage == "x.log:3: line 'source-line: /srv/app/model.py:13' cannot be read"
    assert launch.unparsed == ["  source-line: /srv/app/model.py:13", "  output-source: buf1"]


# -- issue 40: links, surrogates, meta tensors, ZIP bombs, counts, CRLF, rings, timeline ----------

LINK = "is a symbolic link, which is not followed (only regular files are read: a file outside the " \
       "folder must not be reached through a link)"
LOG_OPS = [{"node": "log", "op": "aten.log.default", "args": [{"input": "buf0"}], "holds": ["buf1"]}]


def with_ops(folder):
    """The run folder with launch 1.2's ops (log of buf0), so that extract and check re-run it."""
    entries = lines_of(folder)
    next(e for e in entries if e.get("id") == "1.2" and e["event"] == "before")["ops"] = LOG_OPS
    rewrite(folder, entries)
    return folder


def test_a_link_in_a_dump_folder_is_refused_never_followed(made, tmp_path, capsys):
    folder = with_ops(copy(made["nan"][2], tmp_path))
    secret = tmp_path / "secret.pt"
    torch.save(torch.full((2, 3), 7.0), secret)
    link = os.path.join(folder, "launch000002_in_buf0.pt")
    os.unlink(link)
    os.symlink(secret, link)
    out = tmp_path / "out"
    assert cli(capsys, "extract", "1.2", "--dir", folder, "-o", str(out)) == (
        2, "", f"aoti-debug extract: {link}: {LINK}\n")
    assert not out.exists()
    code, out_text, _ = cli(capsys, "nan-origin", folder)
    assert code == 1 and out_text.splitlines()[-1] == f"note: {link}: {LINK}; its tensors are unknown"
    os.unlink(os.path.join(folder, "manifest.jsonl"))
    os.symlink("/etc/passwd", os.path.join(folder, "manifest.jsonl"))
    for argv in (["nan-origin", folder], ["timeline", folder, "-o", str(tmp_path / "t.json")]):
        assert cli(capsys, *argv) == (2, "", f"aoti-debug {argv[0]}: {folder}/manifest.jsonl: {LINK}\n")


def test_a_run_folder_reached_through_a_link_is_refused(made, tmp_path, capsys):
    elsewhere = with_ops(copy(made["nan"][2], tmp_path))
    root = tmp_path / "dumps"
    root.mkdir()
    os.symlink(elsewhere, root / "123-model-run1")
    why = f"{root}/123-model-run1: is a symbolic link to a folder, which is not followed"
    for argv in (["check", str(root)], ["replay", str(root)], ["extract", "1.2", "--dir", str(root), "-o",
                                                                str(tmp_path / "x")]):
        code, out, err = cli(capsys, *argv)
        assert (code, out) == (2, ""), (argv, out, err)
        assert err.startswith(f"aoti-debug {argv[0]}: {why} ("), (argv, err)


def test_extract_never_writes_through_a_link_or_into_a_fifo(made, tmp_path, capsys):
    folder = with_ops(copy(made["nan"][2], tmp_path))
    out, target = tmp_path / "out", tmp_path / "target.py"
    out.mkdir()
    target.write_text("print('mine')\n")
    os.symlink(target, out / "repro.py")
    assert cli(capsys, "extract", "1.2", "--dir", folder, "-o", str(out)) == (2, "", (
        f"aoti-debug extract: {out}/repro.py: is a symbolic link, which is not followed (only regular "
        "files are written: a file outside the folder must not be reached through a link)\n"))
    assert target.read_text() == "print('mine')\n"
    # every target is checked before any is written: a refusal leaves nothing behind
    assert sorted(os.listdir(out)) == ["repro.py"]
    os.unlink(out / "repro.py")
    os.mkfifo(out / "repro.py")          # no reader: opening it for writing would block
    assert cli(capsys, "extract", "1.2", "--dir", folder, "-o", str(out)) == (2, "", (
        f"aoti-debug extract: {out}/repro.py: is a FIFO, not a regular file (only regular files are "
        "written)\n"))
    assert sorted(os.listdir(out)) == ["repro.py"]
    os.unlink(out / "repro.py")
    code, text, _ = cli(capsys, "extract", "1.2", "--dir", folder, "-o", str(out))
    assert (code, text.splitlines()[-1]) == (0, f"run it: python {out}/repro.py")


def test_a_lone_surrogate_in_a_manifest_is_shown_escaped(made, tmp_path, capsys):
    folder = with_ops(copy(made["nan"][2], tmp_path))
    entries = lines_of(folder)
    for e in entries:
        if e.get("id") == "1.2":
            e["kernel"] = "log_\ud800"          # json.dumps writes it as \ud800
    rewrite(folder, entries)
    code, out, err = cli(capsys, "nan-origin", folder)
    assert (code, err) == (1, "") and out.splitlines()[0].startswith(
        "NaN/Inf origin: launch model:1.2 log_\\ud800 (pid ")
    assert cli(capsys, "diff", made["nan"][2], folder)[0] == 0
    code, out, err = cli(capsys, "extract", "1.2", "--dir", folder, "-o", str(tmp_path / "x"))
    assert code == 0 and "Launch 1.2 log_\\\\ud800," in (tmp_path / "x" / "repro.py").read_text()
    # a real recording: a log_api function raised with a path from os.fsdecode
    calls = copy(made["nan"][1], tmp_path)
    entries = lines_of(calls)
    entries[-1].update(status="raised", error="FileNotFoundError: " + os.fsdecode(b"/data/\xff.bin"))
    entries[-1]["files"] = []
    rewrite(calls, entries)
    for argv in (["nan-origin", calls], ["report", calls, "-o", str(tmp_path / "r.html")],
                 ["timeline", calls, "-o", str(tmp_path / "t.json")]):
        code, out, err = cli(capsys, *argv)
        assert code in (0, 1) and err == "" and "\ud800" not in out, argv
    from aoti_debug.analysis import load
    raised = [r for r in load.read(calls).records if r.kind == "raise"]
    assert [r.notes for r in raised] == [["exception: FileNotFoundError: /data/\\udcff.bin"]]


def test_a_meta_tensor_file_is_unknown_not_a_crash(made, tmp_path, capsys):
    folder = with_ops(copy(made["nan"][2], tmp_path))
    path = os.path.join(folder, "launch000002_out_buf1.pt")
    torch.save(torch.empty(2, 3, device="meta"), path)
    why = f"{path}: holds a tensor on device meta, which has no values to read (a dump holds tensors " \
          "with their values)"
    code, out, err = cli(capsys, "diff", made["nan"][2], folder)
    assert code == 2 and err == f"aoti-debug diff: {why}; without it, whether A and B agree cannot be told\n"
    code, out, err = cli(capsys, "check", folder)
    assert code == 2 and err.endswith(f"{why}\n"), err


def rezip(src, dst, compression, change=lambda name, data: data):
    import zipfile
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, change(info.filename, zin.read(info)))


def test_a_zip_bomb_is_refused_before_it_is_inflated(made, tmp_path, capsys):
    import zipfile
    folder = copy(made["clean"][2], tmp_path)
    path = os.path.join(folder, "launch000002_out_buf1.pt")
    plain = str(tmp_path / "plain.pt")
    torch.save(torch.zeros(2**20), plain)                   # 4 MiB of zeros, stored
    rezip(plain, path, zipfile.ZIP_DEFLATED)                # a few KB, inflating to 4 MiB
    size = os.path.getsize(path)
    assert size < 10000
    assert cli(capsys, "nan-origin", folder)[2] == (
        f"aoti-debug nan-origin: {path}: its record 'plain/data/0' declares 4194304 bytes, more than the "
        f"file's {size} (refused before inflating: a file torch.save or aoti-debug writes stores its "
        "records uncompressed); without it, whether NaN/Inf appear cannot be told\n")
    # stored, but the record is not what the tensor's metadata says it holds
    rezip(plain, path, zipfile.ZIP_STORED, lambda n, d: d + bytes(64) if n.endswith("data/0") else d)
    assert cli(capsys, "nan-origin", folder)[2] == (
        f"aoti-debug nan-origin: {path}: its record 'plain/data/0' holds 4194368 bytes, but the tensor "
        "metadata says 4194304 (refused before inflating); without it, whether NaN/Inf appear cannot be told\n")


def test_a_legacy_torch_save_file_is_refused_before_torch_load_allocates_what_it_declares(made, tmp_path,
                                                                                          capsys):
    """torch's pre-ZIP format declares each storage's size ahead of its bytes, and torch.load
    allocates that size before reading: such a file is never handed to it (neither writer makes
    one)."""
    import struct
    folder = copy(made["clean"][2], tmp_path)
    path = os.path.join(folder, "launch000002_out_buf1.pt")
    torch.save(torch.zeros(4), path, _use_new_zipfile_serialization=False)
    data = open(path, "rb").read()
    at = data.rfind(struct.pack("<q", 4))            # the storage's element count, before its bytes
    assert at == len(data) - 8 - 16
    with open(path, "wb") as f:                      # now it declares 2**40 elements (4 TiB)
        f.write(data[:at] + struct.pack("<q", 2**40) + data[at + 8:])
    assert cli(capsys, "nan-origin", folder)[2] == (
        f"aoti-debug nan-origin: {path}: {GARBAGE}; without it, whether NaN/Inf appear cannot be told\n")


@pytest.mark.parametrize("count", ["nan", "-1", "1.5", "inf"])
def test_a_nan_count_that_is_not_a_count_is_damage_never_no_nan(tmp_path, capsys, count):
    text = nan_model_log().text()
    lines = text.splitlines()
    end = next(i for i, l in enumerate(lines) if "launch-end 1.2" in l)
    n = lines.index("      nan_count=2", end)
    lines[n] = f"      nan_count={count}"
    log = write_log(tmp_path, "x.log", "\n".join(lines) + "\n")
    code, out, _ = cli(capsys, "nan-origin", log)
    assert (code, out.splitlines()[0]) == (1, HIDDEN_ORIGIN)
    assert out.splitlines()[-1] == (f"note: {log}:{n + 1}: 'nan_count={count}' is not a count (expected a "
                                    "whole number of at most 20 digits); its tensors are unknown")


def test_a_crlf_copy_of_a_log_reads_as_the_log(tmp_path, capsys):
    text = nan_model_log().text()
    lf = write_log(tmp_path, "lf.log", text)
    crlf = write_log(tmp_path, "crlf.log", text.replace("\n", "\r\n"))
    expected = cli(capsys, "nan-origin", lf)
    assert expected[0] == 1
    assert cli(capsys, "nan-origin", crlf) == (expected[0], expected[1].replace("lf.log", "crlf.log"), "")
    assert cli(capsys, "diff", lf, crlf)[0] == 0


def test_a_ring_that_is_a_link_or_a_fifo_is_named_and_refused(tmp_path, capsys):
    (tmp_path / "elsewhere").write_bytes(b"x" * 64)
    os.symlink(tmp_path / "elsewhere", tmp_path / "101-blackbox.ring")
    os.mkfifo(tmp_path / "102-blackbox.ring")
    link, fifo = str(tmp_path / "101-blackbox.ring"), str(tmp_path / "102-blackbox.ring")
    fifo_says = f"{fifo}: is a FIFO, not a regular file (only regular files are read)"
    assert cli(capsys, "blackbox", "recover", link) == (2, "", f"aoti-debug blackbox: {link}: {LINK}\n")
    assert cli(capsys, "blackbox", "recover", fifo) == (2, "", f"aoti-debug blackbox: {fifo_says}\n")
    assert cli(capsys, "blackbox", "recover", str(tmp_path)) == (
        2, "", f"aoti-debug blackbox: {link}: {LINK}\naoti-debug blackbox: {fifo_says}\n")


def test_timeline_names_the_files_it_could_not_read_on_stderr(made, tmp_path, capsys):
    folder = copy(made["nan"][2], tmp_path)
    paths = [garble(folder, n) for n in sorted(os.listdir(folder)) if n.startswith("launch")]
    out = tmp_path / "t.json"
    code, text, err = cli(capsys, "timeline", folder, "-o", str(out))
    assert code == 4 and text.endswith(     # the trace is written, and the run is not whole in it
        "; 6 dumped file(s) or record(s) cannot be read (their values are unknown in the trace)\n")
    assert err.splitlines() == [f"aoti-debug timeline: unknown in the trace: {p}: {GARBAGE}" for p in paths]
