"""A run cut short, or with records or tensors lost, is never a clean verdict
(aoti_debug/analysis/completeness.py, docs/analysis.md "Exit status"): every
analysis command says what is missing and exits 3 (never finished) or 4
(records or tensors lost); a finding made before the first gap still exits 1.

The logs and dump folders are crafted by each test; the commands run in this process."""

import json
import os
import shutil

import pytest

from aoti_debug.cli import main
from test_analysis_logs import SRC, LogWriter, T, write_log

torch = pytest.importorskip("torch")

LOST_NOTE = "2 records lost: writing /data/x/4242.log failed (No space left on device)"
STOP_NOTE = ("cannot write 'dumps/4242-model-run1/launch000002_in_arg0_1.pt' (No space left on device); "
             "no more dumps, logging goes on at level 5")


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def first_launch(w):
    w.run(1, inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))])
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:11", inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))],
             outputs=[("out buf0", T(-2.0, 4.0, 1.0))])
    return w


def cut_log(tmp_path):
    """A SIGKILL after launch 1.1's records: no run-end."""
    return write_log(tmp_path, "cut.log", first_launch(LogWriter()))


def lost_log(tmp_path):
    """The logger lost launch 1.2's records to a full disk, said so, and went on."""
    w = first_launch(LogWriter())
    w.record("note", "-", "log", [f"  {LOST_NOTE}"])
    w.launch("1.3", "cpp_fused_mul_2", "mul", f"{SRC}:13", inputs=[("in buf1", T(0.0, 1.0, 0.5))],
             outputs=[("out buf2", T(0.0, 2.0, 1.0))])
    w.run_end(1, outputs=[("out buf2", T(0.0, 2.0, 1.0))])
    return write_log(tmp_path, "lost.log", w)


def whole_log(tmp_path):
    return write_log(tmp_path, "whole.log", first_launch(LogWriter()).run_end(1))


def line_of(path, ending):
    return next(n for n, text in enumerate(open(path), 1) if text.rstrip("\n").endswith(ending))


NEVER = "the run never finished:"
CUT = ("  run 1 model (pid 4242) never finished (no run-end record, cut.log:8); what came after launch 1.1 "
       "cpp_fused_add_0 is missing")
INCOMPLETE = "the run is incomplete: records or tensors were lost:"


def test_a_log_cut_between_launches_never_finished(tmp_path, capsys):
    log = cut_log(tmp_path)
    assert cli(capsys, "nan-origin", log) == (3, f"{NEVER}\n{CUT}\nno NaN/Inf in the 1 launch of the log\n", "")
    assert cli(capsys, "diff", whole_log(tmp_path), log)[:2] == (3, (
        f"A: {tmp_path}/whole.log\nB: {log}\nB: {NEVER}\nB: {CUT}\n"
        "A    B    kernel           status  largest delta\n"
        "1.1  1.1  cpp_fused_add_0  ok      0\n"
        "the logs agree: 1 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)\n"))
    page = tmp_path / "r.html"
    assert cli(capsys, "report", log, "-o", str(page)) == (3, (
        f"wrote {page}: the run never finished: {CUT.strip()}; 1 launches/calls\n"), "")
    html = page.read_text()
    assert ('<div class="finding crashed" id="crashes"><p>The run never finished</p><ul><li>'
            f"{CUT.strip()}</li></ul></div>") in html
    trace = tmp_path / "t.json"
    code, out, _ = cli(capsys, "timeline", log, "-o", str(trace))
    assert (code, out.splitlines()[1:3]) == (3, [NEVER, CUT])


def test_records_the_logger_lost_are_an_incomplete_run(tmp_path, capsys):
    log = lost_log(tmp_path)
    lost = f"  {log}:{line_of(log, '] note - log')}: pid 4242: {LOST_NOTE}"
    assert cli(capsys, "nan-origin", log) == (4, f"{INCOMPLETE}\n{lost}\nno NaN/Inf in the 2 launches of the log\n",
                                              "")
    code, out, _ = cli(capsys, "diff", whole_log(tmp_path), log)
    assert (code, out.splitlines()[2:4]) == (4, [f"B: {INCOMPLETE}", f"B: {lost}"])
    page = tmp_path / "r.html"
    assert cli(capsys, "report", log, "-o", str(page)) == (4, (
        f"wrote {page}: the run is incomplete: {lost.strip()}; 2 launches/calls\n"), "")
    assert (f'<p>The run is incomplete: records or tensors were lost</p><ul><li>{lost.strip()}</li></ul>'
            in page.read_text())
    code, out, _ = cli(capsys, "timeline", log, "-o", str(tmp_path / "t.json"))
    assert (code, out.splitlines()[1:3]) == (4, [INCOMPLETE, lost])


def test_an_origin_found_before_the_first_gap_stands(tmp_path, capsys):
    """NaN/Inf at 1.1, then records lost: exit 1, the gap said first.  Lost before the
    origin: the origin may be in what was lost, so the gap is the verdict."""
    nan = [("out buf0", T(-2.0, 4.0, "nan", nan=1))]
    w = LogWriter()
    w.run(1).launch("1.1", "cpp_fused_log_0", "log", f"{SRC}:11", inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))],
                    outputs=nan)
    w.record("note", "-", "log", [f"  {LOST_NOTE}"]).run_end(1)
    code, out, _ = cli(capsys, "nan-origin", write_log(tmp_path, "after.log", w))
    assert (code, out.splitlines()[:3]) == (1, [INCOMPLETE, out.splitlines()[1],
                                                "NaN/Inf origin: launch 1.1 cpp_fused_log_0 (pid 4242, after.log:9)"])
    w = LogWriter()
    w.run(1).record("note", "-", "log", [f"  {LOST_NOTE}"])
    w.launch("1.2", "cpp_fused_log_1", "log", f"{SRC}:12", inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))],
             outputs=nan).run_end(1)
    code, out, _ = cli(capsys, "nan-origin", write_log(tmp_path, "before.log", w))
    assert (code, out.splitlines()[0], out.splitlines()[2].split(" (")[0]) == (
        4, INCOMPLETE, "NaN/Inf origin: launch 1.2 cpp_fused_log_1")


def test_a_run_stopped_by_a_raising_check_is_not_cut_short(tmp_path, capsys):
    """AOTI_DEBUG_NAN_CHECK=raise ends the run at the launch its note names, as asked: no run-end,
    and not a gap.  The same run with a launch after the note was not stopped there."""
    nan = [("out buf0", T(-2.0, 4.0, "nan", nan=1))]
    note = ("  launch model:1.1 cpp_fused_log_0 (source model.py:11) wrote 1 NaN into buf0 (first at flat "
            "index 0); its inputs held no NaN, so this launch is where NaN first appears")

    def log(name, after_note=False):
        w = LogWriter()
        w.run(1).launch("model:1.1", "cpp_fused_log_0", "log", f"{SRC}:11",
                        inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))], outputs=nan)
        w.record("note", "-", "nan-check", [note])
        if after_note:
            w.launch("model:1.2", "cpp_fused_exp_1", "exp", f"{SRC}:12", inputs=[("in buf0", T(0.0, 1.0, 0.5))],
                     outputs=[("out buf1", T(1.0, 2.0, 1.5))])
        return write_log(tmp_path, name, w)
    code, out, _ = cli(capsys, "nan-origin", log("raised.log"))
    assert (code, out.splitlines()[0]) == (1, "NaN/Inf origin: launch model:1.1 cpp_fused_log_0 (pid 4242, "
                                              "raised.log:9)"), out
    code, out, _ = cli(capsys, "nan-origin", log("went-on.log", after_note=True))
    assert (code, out.splitlines()[:2]) == (1, [NEVER, "  run 1 model (pid 4242) never finished (no run-end "
                                                "record, went-on.log:8); what came after launch model:1.2 "
                                                "cpp_fused_exp_1 is missing"]), out


# -- dump folders -----------------------------------------------------------------

def run_folder(root, launches=1, run_end=True):
    """A level-10 run folder of a torch.compile'd model, as launches.py writes it: launch K
    computes exp of its input, and its `ops` let `check` re-run it."""
    folder = os.path.join(root, "4242-model-run1")
    os.makedirs(folder)
    x = torch.tensor([0.5, 1.0, 2.0, 3.0])
    torch.save([x], os.path.join(folder, "inputs.pt"))
    lines = [{"event": "run", "status": "ok", "kind": "run", "run": 1, "model": "model", "pid": 4242,
              "inputs": ["arg0_1"], "files": [{"name": "inputs", "role": "in", "file": "inputs.pt"}],
              "bytes": 0, "time": 1000.0}]
    for k in range(1, launches + 1):
        inp, out = f"launch{k:06d}_in_arg0_1.pt", f"launch{k:06d}_out_buf0.pt"
        torch.save(x, os.path.join(folder, inp))
        torch.save(torch.exp(x), os.path.join(folder, out))
        ops = [{"node": "exp", "op": "aten.exp.default", "args": [{"input": "arg0_1", "shape": ["4"]}],
                "kwargs": {}, "own": True, "shape": ["4"], "dtype": "float32", "line": "m.py:1"}]
        base = {"kind": "launch", "run": 1, "index": k, "id": f"1.{k}", "kernel": f"cpp_fused_exp_{k - 1}",
                "nodes": "exp", "source": "m.py:1", "bytes": 0}
        lines += [{**base, "event": "before", "status": "running", "time": 1000.0 + k, "ops": ops,
                   "lines": "  holds: buf0=exp\n", "files": [{"name": "arg0_1", "role": "in", "file": inp}]},
                  {**base, "event": "after", "status": "ok", "time": 1000.5 + k,
                   "files": [{"name": "buf0", "role": "out", "file": out}]}]
    if run_end:
        lines.append({"event": "run-end", "status": "ok", "kind": "run-end", "run": 1, "model": "model",
                      "launches": launches, "files": [], "bytes": 0, "time": 1100.0})
    with open(os.path.join(folder, "manifest.jsonl"), "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_a_whole_dump_is_clean(tmp_path, capsys):
    run_folder(str(tmp_path / "d"), launches=2)
    assert cli(capsys, "nan-origin", str(tmp_path / "d")) == (0, "no NaN/Inf in the 2 launches of the log\n", "")
    assert cli(capsys, "check", str(tmp_path / "d"))[:2] == (0, (
        "1.1 cpp_fused_exp_0  ok  max_abs=0 max_rel=0 max_ulp=0.441\n"
        "1.2 cpp_fused_exp_1  ok  max_abs=0 max_rel=0 max_ulp=0.441\n"
        "2 launch(es): 2 within tolerance, 0 beyond, 0 not checkable\n"))


def test_a_dump_cut_between_launches_never_finished(tmp_path, capsys):
    d = str(tmp_path / "d")
    folder = run_folder(d, run_end=False)
    # nan-origin reads a dump's launches under its instance (model:1.1); check keeps the manifest's 1.1
    cut = ("  run 1 model (pid 4242) never finished (no run-end record, 4242-model-run1/manifest.jsonl:1); "
           "what came after launch model:1.1 cpp_fused_exp_0 is missing")
    assert cli(capsys, "nan-origin", d) == (3, f"{NEVER}\n{cut}\nno NaN/Inf in the 1 launch of the log\n", "")
    assert cli(capsys, "check", d)[:2] == (3, (
        f"{NEVER}\n  run 1 model (pid 4242) never finished (no run-end line, {folder}/manifest.jsonl:1); what "
        "came after launch 1.1 cpp_fused_exp_0 is missing\n"
        "1.1 cpp_fused_exp_0  ok  max_abs=0 max_rel=0 max_ulp=0.441\n"
        "1 launch(es): 1 within tolerance, 0 beyond, 0 not checkable\n"))
    box = tmp_path / "4242-blackbox"         # a black box writes no run-end line: not a gap
    shutil.copytree(folder, box / "4242-model-run1")
    assert cli(capsys, "nan-origin", str(box)) == (0, "no NaN/Inf in the 1 launch of the log\n", "")


def test_a_dump_whose_recorder_stopped_is_incomplete(tmp_path, capsys):
    """The recorder stopped on a full disk before launch 1.2: its log beside the dump says so."""
    d = tmp_path / "d"
    folder = run_folder(str(d), run_end=False)
    (d / "debug.log").write_text(f"[2026-11-21 05:30:45.123456] [pid 4242] note - flight-recorder\n  {STOP_NOTE}\n")
    stopped = f"  the recorder of pid 4242 stopped: {STOP_NOTE}"
    code, out, _ = cli(capsys, "nan-origin", str(d))
    assert (code, out.splitlines()[:4]) == (4, [
        INCOMPLETE, stopped, "  run 1 model (pid 4242): nothing was dumped after launch model:1.1 cpp_fused_exp_0 "
        "(no run-end record, 4242-model-run1/manifest.jsonl:1)", "no NaN/Inf in the 1 launch of the log"])
    code, out, _ = cli(capsys, "check", str(d))
    assert (code, out.splitlines()[:3]) == (4, [
        INCOMPLETE, stopped, "  run 1 model (pid 4242): nothing was dumped after launch 1.1 cpp_fused_exp_0 "
        f"(no run-end line, {folder}/manifest.jsonl:1)"])
    code, out, _ = cli(capsys, "report", str(d), "-o", str(tmp_path / "r.html"))
    assert code == 4 and f": the run is incomplete: {stopped.strip()} (and 1 more);" in out


def test_a_dumped_file_that_is_absent_is_an_incomplete_run(tmp_path, capsys):
    d = str(tmp_path / "d")
    folder = run_folder(d, launches=2)
    os.remove(os.path.join(folder, "launch000002_out_buf0.pt"))
    absent = f"  {folder}/launch000002_out_buf0.pt: named by {folder}/manifest.jsonl:5 but absent"
    code, out, _ = cli(capsys, "nan-origin", d)
    assert (code, out.splitlines()[:3]) == (4, [
        INCOMPLETE, absent, "cannot tell whether NaN/Inf appear: 1 file(s) or record(s) cannot be read"])
    assert cli(capsys, "check", d)[:2] == (4, (
        f"{INCOMPLETE}\n{absent}\n"
        "1.1 cpp_fused_exp_0  ok  max_abs=0 max_rel=0 max_ulp=0.441\n"
        "1.2 cpp_fused_exp_1  not checkable: launch000002_out_buf0.pt is absent (the manifest names it)\n"
        "2 launch(es): 1 within tolerance, 0 beyond, 1 not checkable\n"))
    code, out, _ = cli(capsys, "diff", d, d)
    assert (code, out.splitlines()[2:4]) == (4, [f"A: {INCOMPLETE}", f"A: {absent}"])
    code, out, _ = cli(capsys, "timeline", d, "-o", str(tmp_path / "t.json"))
    assert (code, out.splitlines()[1:3]) == (4, [INCOMPLETE, absent])


def calls_folder(root):
    """A Python `-calls` folder of one recorded torch.ops call (exp), as the recorder writes it."""
    folder = os.path.join(root, "4242-calls")
    os.makedirs(folder)
    x = torch.tensor([1.0, 2.0])
    torch.save({"args": [x], "kwargs": {}}, os.path.join(folder, "call000001_inputs.pt"))
    torch.save(torch.exp(x), os.path.join(folder, "call000001_outputs.pt"))
    base = {"index": 1, "kind": "call", "module": "torch._ops.aten", "name": "torch._ops.aten.aten::exp",
            "qualname": "aten::exp"}
    lines = [{**base, "event": "before", "status": "running", "time": 1000.0,
              "files": [{"file": "call000001_inputs.pt"}]},
             {**base, "event": "after", "status": "ok", "time": 1000.5,
              "files": [{"file": "call000001_inputs.pt"}, {"file": "call000001_outputs.pt"}]}]
    with open(os.path.join(folder, "manifest.jsonl"), "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_replay_of_a_call_cut_short_or_with_a_file_lost(tmp_path, capsys):
    folder = calls_folder(str(tmp_path / "ok"))
    assert cli(capsys, "replay", str(tmp_path / "ok")) == (
        0, "PASS call 1 torch._ops.aten.aten::exp max_abs=0 max_rel=0\n1 passed, 0 failed\n", "")
    shutil.copytree(tmp_path / "ok", tmp_path / "cut")
    cut = str(tmp_path / "cut" / "4242-calls")
    with open(os.path.join(cut, "manifest.jsonl")) as f:
        first = f.readline()
    with open(os.path.join(cut, "manifest.jsonl"), "w") as f:
        f.write(first)                  # killed during the call
    assert cli(capsys, "replay", str(tmp_path / "cut")) == (3, (
        f"{NEVER}\n  call 1 torch._ops.aten.aten::exp never finished ({cut}/manifest.jsonl:1 has no after line); "
        "its outputs are unknown\n"
        "SKIP call 1 torch._ops.aten.aten::exp nothing kept to compare: the call never returned\n"
        "0 passed, 0 failed, 1 skipped\n"), "")
    os.remove(os.path.join(folder, "call000001_outputs.pt"))
    code, out, _ = cli(capsys, "replay", str(tmp_path / "ok"))
    assert (code, out.splitlines()[:2], out.splitlines()[-1]) == (4, [
        INCOMPLETE, f"  {folder}/call000001_outputs.pt: named by {folder}/manifest.jsonl:2 but absent"],
        "0 passed, 0 failed, 1 unknown")
