"""A real distributed job: torchrun starts four processes that join a gloo process group,
and each runs the same instrumented AOTI artifact four times, with a collective after every
call; on rank 2 only, from its third call, the inputs make `log` produce NaN.  The job's four
logs (AOTI_DEBUG_LOGDEST=debug_rank%r.log) are read back by nan-origin, diff --ranks, report
and timeline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from aoti_debug.cli import main
from conftest import PLANTED, TESTS, clean_env, run_package

pytestmark = pytest.mark.slow

WORLD = 4
JOB = r"""
import sys; sys.path.insert(0, {tests!r})
import torch, torch.distributed as dist
import models
from aoti_debug import log_api

@log_api
def checksum(outputs):
    return sum(float(o.float().sum()) for o in outputs)

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch._inductor.aoti_load_package({pt2!r})
for call in range(1, 5):
    bug = "log" if rank == 2 and call >= 3 else None
    outputs = model(*models.planted_inputs(bug))
    checksum(outputs)
    calls = torch.ones(1)
    dist.all_reduce(calls)              # every rank is at the same call
    assert int(calls.item()) == dist.get_world_size()
dist.barrier()                          # no rank tears the group down while another still uses it
dist.destroy_process_group()
# gloo's worker threads can abort the interpreter's teardown ("terminate called without
# an active exception", now and then on a loaded machine); every record is flushed already
import os; sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""


@pytest.fixture(scope="module")
def job(packages, tmp_path_factory):
    """Runs the job once; returns the folder with its logs."""
    pt2 = packages.get("planted", **PLANTED)
    folder = tmp_path_factory.mktemp("job")
    script = folder / "job.py"
    script.write_text(JOB.format(tests=TESTS, pt2=pt2))
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    proc = subprocess.run(
        [torchrun, "--standalone", f"--nproc-per-node={WORLD}", str(script)], cwd=folder,
        env=clean_env(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="warn",
                      AOTI_DEBUG_LOGDEST=str(folder / "debug_rank%r.log"), OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


def logs(folder):
    return [str(folder / f"debug_rank{r}.log") for r in range(WORLD)]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_each_rank_writes_its_own_log_with_its_rank(job):
    assert sorted(p.name for p in job.glob("*.log")) == [f"debug_rank{r}.log" for r in range(WORLD)]
    for rank, path in enumerate(logs(job)):
        text = open(path).read()
        assert text.count(f"\nRank: {rank} of {WORLD}\n") == 1       # one banner per process
        runs = re.findall(r"\] run (\d+) planted thread=(\d+) rank=(\d+)/(\d+)\n", text)
        assert [(r, rk, w) for r, _, rk, w in runs] == [(str(n), str(rank), str(WORLD)) for n in (1, 2, 3, 4)]
        # the model ran on the main thread, whose id is the process id; so did the logged call
        pid = re.search(r"\[pid (\d+)\]", text).group(1)
        assert {t for _, t, _, _ in runs} == {pid}
        assert re.findall(r"\] call (\d+) __main__.checksum thread=(\d+)\n", text) == [
            (str(n), pid) for n in (1, 2, 3, 4)]


def test_nan_origin_names_rank_2_its_planted_launch_and_line(job, capsys):
    from models import line_of
    code, out, err = cli(capsys, "nan-origin", str(job / "debug_rank*.log"))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    head = re.fullmatch(r"NaN/Inf origin: launch planted:3\.(\d+) (\S+) \(rank 2, pid \d+, debug_rank2\.log:\d+\)",
                        lines[0])
    assert head, lines[0]
    assert lines[1] == f"  source: {line_of('planted.log')}"
    assert "log" in lines[2][len("  nodes:  "):].split(", ")
    order = lines[lines.index("4 processes, in the order NaN/Inf appeared "
                              "(timestamps as written: clocks of one machine):") + 1:]
    assert re.fullmatch(rf"  rank 2 \(pid \d+\): origin launch planted:3\.{head[1]} {head[2]} at \[\S+ \S+\]", order[0])
    events = [len(re.findall(r"\] (?:launch|call) ", open(logs(job)[r]).read())) for r in (0, 1, 3)]
    assert [re.sub(r"pid \d+", "pid N", line) for line in order[1:]] == [
        f"  rank {r} (pid N): no NaN/Inf in {n} launches and calls" for r, n in zip((0, 1, 3), events)]


def test_diff_ranks_names_rank_2s_first_differing_launch(job, capsys):
    code, out, err = cli(capsys, "diff", "--ranks", *logs(job))
    assert (code, err) == (1, "")
    lines = [re.sub(r"pid \d+", "pid N", line) for line in out.splitlines()]
    assert lines[:4] == ["reference: rank 0 (pid N)",
                         "rank 1 (pid N): agrees: 4 run(s), 12 aligned launch(es) compared",
                         lines[2], "rank 3 (pid N): agrees: 4 run(s), 12 aligned launch(es) compared"]
    differs = re.fullmatch(r"rank 2 \(pid N\): differs from run 3: launch planted:3\.(\d+) (\S+)", lines[2])
    assert differs, lines[2]
    assert lines[4] == (f"first divergence: rank 2 (pid N), run 3, launch planted:3.{differs[1]} {differs[2]} "
                        "(A: rank 0 (pid N), B: rank 2 (pid N))")


def test_report_shows_the_four_ranks_side_by_side(job, capsys, tmp_path):
    out_html = tmp_path / "job.html"
    code, out, _ = cli(capsys, "report", *logs(job), "-o", str(out_html))
    assert code == 0
    assert out.endswith("; 4 processes side by side\n")
    page = out_html.read_text()
    head = re.search(r'<table id="ranks-table"><thead>(.*?)</thead>', page).group(1)
    assert re.findall(r"<th>(rank \d) \(pid \d+\)</th>", head) == [f"rank {r}" for r in range(WORLD)]


def test_timeline_of_the_job_has_four_processes_a_slice_per_launch_and_rank_2s_nan(job, capsys, tmp_path):
    out = tmp_path / "job.json"
    code, text, err = cli(capsys, "timeline", str(job / "debug_rank*.log"), "-o", str(out))
    launches = [len(re.findall(r"\] launch ", open(p).read())) for p in logs(job)]
    assert (code, err) == (0, "")
    instants = re.fullmatch(rf"wrote {re.escape(str(out))}: 4 process\(es\), 4 thread track\(s\), "
                            rf"{sum(launches)} launch slice\(s\), 16 run\(s\), (\d+) instant event\(s\)\n", text)
    assert instants, text
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    pid_of = {int(re.match(r"rank (\d) \(pid (\d+)\)", n)[1]): p for p, n in names.items()}
    assert sorted(pid_of) == [0, 1, 2, 3] and all(names[pid_of[r]] == f"rank {r} (pid {pid_of[r]})"
                                                  for r in range(WORLD))
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "launch"]
    assert [sum(1 for e in slices if e["pid"] == pid_of[r]) for r in range(WORLD)] == launches
    nan = [(e["pid"], e["args"]["id"]) for e in events if e["ph"] == "i" and e["cat"] == "nan-inf"
           and not e["args"]["id"].startswith("call ")]
    assert [p for p, _ in nan] == [pid_of[2]] * 2 and [i.split(".")[0] for _, i in nan] == ["planted:3", "planted:4"]
    # every instant (NaN/Inf, the NaN check's warnings) is rank 2's
    marks = [e for e in events if e["ph"] == "i"]
    assert len(marks) == int(instants[1]) and {e["pid"] for e in marks} == {pid_of[2]}
    assert {e["cat"] for e in marks} == {"nan-inf", "check"}


def test_timeline_of_the_job_in_perfetto_format_reads_back_through_its_protos(job, capsys, tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent
    out = tmp_path / "job.pftrace"
    code, _, _ = cli(capsys, "timeline", *logs(job), "-o", str(out))
    assert code == 0
    trace = Trace()
    trace.ParseFromString(out.read_bytes())
    descriptors = [p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")]
    assert sorted(re.sub(r"\d+\)$", "N)", d.process.process_name) for d in descriptors if d.HasField("process")) \
        == [f"rank {r} (pid N)" for r in range(WORLD)]
    begins = [p.track_event.name for p in trace.packet if p.HasField("track_event")
              and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    kernels = [m for p in logs(job) for m in re.findall(r"\] launch \S+ (\S+)\n", open(p).read())]
    assert sorted(n for n in begins if not n.startswith(("run ", "__main__."))) == sorted(kernels)


def test_dump_directories_named_by_rank_are_read_as_one_job(packages, tmp_path, capsys):
    """Level 10 with AOTI_DEBUG_DUMP_DIR=dumps/rank%r: the C++ shim expands %r, its manifests
    carry the rank, and nan-origin over the folders (a glob) names the rank that went bad."""
    pt2 = packages.get("planted", AOTI_DEBUG_LOGLEVEL="10")      # test_analysis_dumps' package
    for rank, bug in ((0, None), (1, "log")):
        run_package(pt2, "planted", inputs=f"models.planted_inputs({bug!r})", AOTI_DEBUG_LOGLEVEL="10",
                    AOTI_DEBUG_DUMP_DIR=str(tmp_path / "dumps" / "rank%r"), RANK=str(rank), WORLD_SIZE="2",
                    AOTI_DEBUG_LOGDEST=str(tmp_path / f"rank{rank}.log"))
    assert sorted(os.listdir(tmp_path / "dumps")) == ["rank0", "rank1"]
    for rank in (0, 1):
        (folder,) = [d for d in (tmp_path / "dumps" / f"rank{rank}").iterdir() if d.is_dir()]
        run = json.loads((folder / "manifest.jsonl").read_text().splitlines()[0])
        assert (run["event"], run["rank"], run["world"], run["thread"]) == ("run", rank, 2, run["pid"])
    code, out, err = cli(capsys, "nan-origin", str(tmp_path / "dumps" / "rank*"))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert re.fullmatch(r"NaN/Inf origin: launch planted:1\.\d+ \S+ \(rank 1, pid \d+, \d+-planted-run1/manifest\.jsonl:\d+\)",
                        lines[0]), lines[0]
    order = lines[lines.index("2 processes, in the order NaN/Inf appeared "
                              "(timestamps as written: clocks of one machine):") + 1:]
    assert re.fullmatch(r"  rank 1 \(pid \d+\): origin launch planted:1\.\d+ \S+ at .*", order[0]), order
    assert re.fullmatch(r"  rank 0 \(pid \d+\): no NaN/Inf in \d+ launches", order[1]), order
