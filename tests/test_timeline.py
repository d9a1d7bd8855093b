"""`aoti-debug timeline`: one job's logs as a trace for Perfetto's UI and chrome://tracing.

Fast: hand-written logs (test_analysis_logs.py's builders, which are held
against the Python logger's formatter), no torch.  The Chrome JSON is read
back as JSON, the Perfetto trace through the perfetto package's protos.
"""

from __future__ import annotations

import calendar
import json
import subprocess
import sys

import pytest

from aoti_debug.analysis import load
from aoti_debug.analysis.mask import mask
from aoti_debug.cli import main
from conftest import REPO, clean_env
from test_analysis_logs import RULE, SRC, LogWriter, T

EPOCH_US = calendar.timegm((2026, 11, 21, 5, 30, 45)) * 10**6     # 2026-11-21 05:30:45 UTC
PIDS = [4100, 4101, 4102, 4103]
TIDS = [5100, 5101, 5102, 5103]


def at(micro):
    """µs since the epoch of `2026-11-21 05:30:45.<micro>`."""
    return EPOCH_US + micro


def rank_banner(pid, rank, world=4):
    return (f"{RULE}\n[2026-11-21 05:30:45.000050] [pid {pid}] aoti-debug - System Information\n{RULE}\n"
            f"aoti-debug version: 0.1.0\nPyTorch version: 2.13.0+cpu\nPlatform: Linux x86_64\n"
            f"Rank: {rank} of {world}\n{RULE}\n")


def rank_log(rank):
    """Rank `rank` of 4, level 5: run 1 of model m, two launches; on rank 2 the second
    one writes a NaN.  Ranks start 3 µs apart so their records interleave."""
    pid, tid, bad = PIDS[rank], TIDS[rank], rank == 2
    w = LogWriter(pid, with_banner=False, start_us=100 + 3 * rank).raw(rank_banner(pid, rank))
    w.run(1, model=f"m thread={tid} rank={rank}/4", inputs=[("in x", T(-1.0, 1.0, 0.0))])
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:11",
             inputs=[("in x", T(-1.0, 1.0, 0.0)), ("in alpha", "2.000000")],
             outputs=[("out buf0", T(0.0, 2.0, 1.0))])
    w.launch("1.2", "cpp_fused_log_1", "log", f"{SRC}:12",
             inputs=[("in buf0", T(0.0, 2.0, 1.0))],
             outputs=[("out buf1", T(-1.0, 0.693147, 0.1, nan=1 if bad else 0))])
    w.run_end(1, model="m", outputs=[("out buf1", T(-1.0, 0.693147, 0.1, nan=1 if bad else 0))])
    return w


@pytest.fixture
def rank_logs(tmp_path):
    return [str(rank_log(r).write(tmp_path / f"rank{r}.log")) for r in range(4)]


def timeline(capsys, *argv):
    code = main(["timeline", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def of(events, ph, **match):
    return [e for e in events if e["ph"] == ph and all(e.get(k) == v for k, v in match.items())]


def metadata(events, name):
    """{(pid, tid): args} of one kind of metadata event."""
    return {(e["pid"], e["tid"]): e["args"] for e in of(events, "M", name=name)}


def assert_nested(events):
    """Complete events of each thread nest: none starts inside another and ends after it."""
    by_thread = {}
    for e in of(events, "X"):
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        open_ = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ and open_[-1] <= start:
                open_.pop()
            assert not open_ or end <= open_[-1], (start, end, open_)
            open_.append(end)


def tensor(mn, mx, mean, nan="0", inf="0", flag="no", shape="(2, 3)"):
    return {"shape": shape, "dtype": "torch.float32", "min": mn, "max": mx, "mean": mean,
            "nan_count": nan, "inf_count": inf, "nan_inf": flag}


# -- four ranks, Chrome JSON ---------------------------------------------------------

def test_four_ranks_as_chrome_json(tmp_path, capsys, rank_logs):
    out = tmp_path / "trace.json"
    assert timeline(capsys, *rank_logs, "-o", out) == (
        0, f"wrote {out}: 4 process(es), 4 thread track(s), 8 launch slice(s), 4 run(s), "
           "1 instant event(s)\n", "")
    document = json.loads(out.read_text())
    assert document["displayTimeUnit"] == "ms"
    events = document["traceEvents"]
    names = metadata(events, "process_name")
    assert list(names) == [(pid, pid) for pid in PIDS]          # written in rank order
    assert [a["name"] for a in names.values()] == [f"rank {r} (pid {PIDS[r]})" for r in range(4)]
    assert {k[0]: a["sort_index"] for k, a in metadata(events, "process_sort_index").items()} == \
        {pid: r for r, pid in enumerate(PIDS)}
    assert metadata(events, "thread_name") == {(pid, tid): {"name": f"thread {tid}"}
                                               for pid, tid in zip(PIDS, TIDS)}

    launches = of(events, "X", cat="launch")
    assert len(launches) == len(load.read_many(rank_logs).launches) == 8
    assert sorted((e["pid"], e["tid"], e["name"]) for e in launches) == sorted(
        (pid, tid, kernel) for pid, tid in zip(PIDS, TIDS) for kernel in ("cpp_fused_add_0", "cpp_fused_log_1"))
    # rank 2's records: banner, run at .000116, 1.1 at .000126-.000166, 1.2 at .000176-.000216
    (log_2,) = of(events, "X", cat="launch", pid=4102, name="cpp_fused_log_1")
    assert (log_2["ts"], log_2["dur"]) == (at(176), 40)
    assert log_2["args"] == {
        "id": "1.2", "log": "rank2.log:56", "run": "run 1 m", "nodes": "log", "source": f"{SRC}:12",
        "inputs": {"in buf0": tensor("0.000000", "2.000000", "1.000000")},
        "outputs": {"out buf1": tensor("-1.000000", "0.693147", "0.100000", nan="1", flag="yes")},
        "inputs_nan_inf": "no", "outputs_nan_inf": "yes", "end": "its launch-end record"}
    (add_0,) = of(events, "X", cat="launch", pid=4100, name="cpp_fused_add_0")
    assert add_0["args"]["inputs"]["in alpha"] == "2.000000"
    assert add_0["args"]["outputs_nan_inf"] == "no"

    runs = of(events, "X", cat="run")
    assert [(e["pid"], e["tid"], e["name"]) for e in runs] == [(p, t, "run 1 m") for p, t in zip(PIDS, TIDS)]
    for run in runs:
        mine = of(events, "X", cat="launch", pid=run["pid"])
        assert len(mine) == 2 and run["args"]["launches"] == 2
        assert all(run["ts"] < e["ts"] and e["ts"] + e["dur"] < run["ts"] + run["dur"] for e in mine)
    assert runs[2]["args"]["rank"] == "2/4" and runs[2]["args"]["thread"] == 5102
    assert (runs[2]["ts"], runs[2]["dur"]) == (at(116), 110)
    assert_nested(events)

    (nan,) = of(events, "i")
    assert (nan["name"], nan["cat"], nan["pid"], nan["tid"], nan["s"], nan["ts"]) == (
        "NaN/Inf: cpp_fused_log_1", "nan-inf", 4102, 5102, "t", at(216))
    assert nan["args"] == {"id": "1.2", "nan_count": 1, "inf_count": 0,
                           "outputs": {"out buf1": {"nan_count": "1", "inf_count": "0"}}}


def test_a_glob_names_the_logs(tmp_path, capsys, rank_logs):
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, tmp_path / "rank*.log", "-o", out)
    assert (code, text) == (0, f"wrote {out}: 4 process(es), 4 thread track(s), 8 launch slice(s), "
                               "4 run(s), 1 instant event(s)\n")
    assert [a["name"] for a in metadata(read_json(out), "process_name").values()] == \
        [f"rank {r} (pid {PIDS[r]})" for r in range(4)]


# -- four ranks, Perfetto protobuf ---------------------------------------------------

def read_trace(path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    trace = Trace()
    trace.ParseFromString(path.read_bytes())
    return trace


@pytest.mark.parametrize("name,argv", [("trace.pftrace", []), ("trace.perfetto-trace", []),
                                       ("trace.json", ["--format", "perfetto"])])
def test_four_ranks_as_perfetto_protobuf(tmp_path, capsys, rank_logs, name, argv):
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    out = tmp_path / name
    code, text, _ = timeline(capsys, *rank_logs, "-o", out, *argv)
    assert (code, text) == (0, f"wrote {out}: 4 process(es), 4 thread track(s), 8 launch slice(s), "
                               "4 run(s), 1 instant event(s)\n")
    packets = read_trace(out).packet
    descriptors = [p.track_descriptor for p in packets if p.HasField("track_descriptor")]
    processes = [d for d in descriptors if d.HasField("process")]
    threads = [d for d in descriptors if d.HasField("thread")]
    assert [(d.process.pid, d.process.process_name, d.sibling_order_rank) for d in processes] == \
        [(PIDS[r], f"rank {r} (pid {PIDS[r]})", r) for r in range(4)]
    parent = {d.uuid: d.process.pid for d in processes}
    assert [(parent[d.parent_uuid], d.thread.pid, d.thread.tid, d.thread.thread_name) for d in threads] == \
        [(pid, pid, tid, f"thread {tid}") for pid, tid in zip(PIDS, TIDS)]
    track_of = {d.uuid: (d.thread.pid, d.thread.tid) for d in threads}

    events = [p for p in packets if p.HasField("track_event")]
    assert all(p.trusted_packet_sequence_id == 1 for p in packets)
    assert [p.timestamp for p in events] == sorted(p.timestamp for p in events)
    kinds = [p.track_event.type for p in events]
    assert kinds.count(TrackEvent.TYPE_SLICE_BEGIN) == kinds.count(TrackEvent.TYPE_SLICE_END) == 12
    # per thread track, in order: the run, then each launch inside it
    opened = {}
    for p in events:
        e = p.track_event
        stack = opened.setdefault(track_of[e.track_uuid], [])
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            stack.append(e.name)
            opened.setdefault(("names",) + track_of[e.track_uuid], []).append((e.name, len(stack)))
        elif e.type == TrackEvent.TYPE_SLICE_END:
            stack.pop()
    for pid, tid in zip(PIDS, TIDS):
        assert opened[("names", pid, tid)] == [("run 1 m", 1), ("cpp_fused_add_0", 2), ("cpp_fused_log_1", 2)]

    (instant,) = [p for p in events if p.track_event.type == TrackEvent.TYPE_INSTANT]
    assert (instant.track_event.name, track_of[instant.track_event.track_uuid], instant.timestamp) == (
        "NaN/Inf: cpp_fused_log_1", (4102, 5102), at(216) * 1000)
    (begin,) = [p for p in events if p.track_event.name == "cpp_fused_log_1"
                and track_of[p.track_event.track_uuid] == (4102, 5102)]
    assert begin.timestamp == at(176) * 1000
    args = {a.name: a for a in begin.track_event.debug_annotations}
    assert (args["id"].string_value, args["source"].string_value, args["outputs_nan_inf"].string_value) == \
        ("1.2", f"{SRC}:12", "yes")
    (out_buf1,) = args["outputs"].dict_entries
    assert out_buf1.name == "out buf1"
    assert {a.name: a.string_value for a in out_buf1.dict_entries} == \
        tensor("-1.000000", "0.693147", "0.100000", nan="1", flag="yes")


# -- threads and runs --------------------------------------------------------------------

def level1_log():
    """Level 1: headers only, no launch-end and no run-end."""
    w = LogWriter(4242)
    w.record("run", "1", "m thread=7001")                    # .000110
    for k, kernel in enumerate(("cpp_fused_add_0", "cpp_fused_log_1", "cpp_fused_sum_2"), 1):
        w.record("launch", f"1.{k}", kernel, step=20 if k > 1 else 10)   # .000120, .000140, .000160
    return w


def test_level1_launches_last_until_the_next_record_of_their_run(tmp_path, capsys):
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, level1_log().write(tmp_path / "l1.log"), "-o", out)
    assert (code, text) == (0, f"wrote {out}: 1 process(es), 1 thread track(s), 3 launch slice(s), "
                               "1 run(s), 0 instant event(s)\n")
    events = read_json(out)
    assert [(e["name"], e["ts"], e["dur"], e["args"]["end"]) for e in of(events, "X", cat="launch")] == [
        ("cpp_fused_add_0", at(120), 20, "no launch-end record: the next launch record of its run"),
        ("cpp_fused_log_1", at(140), 20, "no launch-end record: the next launch record of its run"),
        ("cpp_fused_sum_2", at(160), 0, "unknown: no launch-end record and no later record of its run")]
    (run,) = of(events, "X", cat="run")
    assert (run["ts"], run["dur"], run["args"]["end"]) == (at(110), 50, "no run-end record: the end of its last launch")
    assert {e["tid"] for e in of(events, "X")} == {7001}
    assert of(events, "X", cat="launch")[0]["args"]["outputs_nan_inf"] == "unknown"
    assert_nested(events)


def two_threads_log():
    """One process, model m on two threads at once (runs 1 and 2), run 1 inside a log_api call."""
    w = LogWriter(4242)
    w.record("call", "1", "__main__.serve thread=7001")      # .000110
    w.record("run", "1", "m thread=7001")                    # .000120
    w.record("run", "2", "m thread=7002")                    # .000130
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:11")   # .000140 - .000180
    w.launch("2.1", "cpp_fused_add_0", "add", f"{SRC}:11")   # .000190 - .000230
    w.record("run-end", "2", "m")                            # .000240
    w.record("run-end", "1", "m")                            # .000250
    w.record("return", "1", "__main__.serve")                # .000260
    return w


def test_two_threads_of_one_process_are_two_tracks(tmp_path, capsys):
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, two_threads_log().write(tmp_path / "t.log"), "-o", out)
    assert (code, text) == (0, f"wrote {out}: 1 process(es), 2 thread track(s), 2 launch slice(s), "
                               "2 run(s), 0 instant event(s)\n")
    events = read_json(out)
    assert metadata(events, "process_name") == {(4242, 4242): {"name": "pid 4242"}}
    assert metadata(events, "thread_name") == {(4242, 7001): {"name": "thread 7001"},
                                               (4242, 7002): {"name": "thread 7002"}}
    assert sorted((e["tid"], e["cat"], e["name"], e["ts"], e["dur"]) for e in of(events, "X")) == [
        (7001, "call", "__main__.serve", at(110), 150),
        (7001, "launch", "cpp_fused_add_0", at(140), 40),
        (7001, "run", "run 1 m", at(120), 130),
        (7002, "launch", "cpp_fused_add_0", at(190), 40),
        (7002, "run", "run 2 m", at(130), 110)]
    (call,) = of(events, "X", cat="call")
    assert call["args"] == {"id": "1", "log": "t.log:8", "thread": 7001, "inputs": {}, "outputs": {},
                            "outputs_nan_inf": "no", "end": "its return record"}
    assert_nested(events)


def ambiguous_log():
    """Models a and b both in their run 1 at once, on two threads: a launch `1.K` cannot
    be told to be a's or b's from the log."""
    w = LogWriter(4242)
    w.record("run", "1", "a thread=7001")                    # .000110
    w.record("run", "1", "b thread=7002")                    # .000120
    w.record("launch", "1.1", "cpp_fused_a_0", ["  origin: nodes=a source=-"])   # .000130
    w.record("launch", "1.1", "cpp_fused_b_0", ["  origin: nodes=b source=-"])   # .000140
    w.record("launch-end", "1.1", "cpp_fused_a_0")           # .000150
    w.record("launch-end", "1.1", "cpp_fused_b_0")           # .000160
    w.record("run-end", "1", "a")                            # .000170
    w.record("run-end", "1", "b")                            # .000180
    w.record("run", "2", "a thread=7001")                    # .000190: alone again
    w.record("launch", "2.1", "cpp_fused_a_0", ["  origin: nodes=a source=-"])   # .000200
    w.record("launch-end", "2.1", "cpp_fused_a_0")           # .000210
    w.record("run-end", "2", "a")                            # .000220
    return w


def test_a_launch_of_two_runs_open_with_its_number_is_on_thread_unknown(tmp_path, capsys):
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, ambiguous_log().write(tmp_path / "a.log"), "-o", out)
    assert (code, text) == (0, f"wrote {out}: 1 process(es), 4 thread track(s), 3 launch slice(s), "
                               "3 run(s), 0 instant event(s)\n"
                               "note: pid 4242: 2 launch(es) on 'thread unknown': "
                               "2 runs numbered 1 were open at once (a, b)\n"
                               "note: pid 4242 thread unknown: 1 slice(s) cross others of the thread; "
                               "they are on 1 further track(s)\n")
    events = read_json(out)
    threads = {args["name"]: tid for (_, tid), args in metadata(events, "thread_name").items()}
    assert list(threads) == ["thread 7001", "thread 7002", "thread unknown", "thread unknown (overlap 1)"]
    assert (threads["thread 7001"], threads["thread 7002"]) == (7001, 7002)
    assert threads["thread unknown"] not in (4242, 7001, 7002)
    launches = {(e["name"], e["args"]["id"]): e for e in of(events, "X", cat="launch")}
    assert launches[("cpp_fused_a_0", "1.1")]["tid"] == threads["thread unknown"]
    assert launches[("cpp_fused_b_0", "1.1")]["tid"] == threads["thread unknown (overlap 1)"]
    assert launches[("cpp_fused_a_0", "1.1")]["args"]["run"] == \
        "unknown: 2 runs numbered 1 were open at once (a, b)"
    assert (launches[("cpp_fused_a_0", "2.1")]["tid"], launches[("cpp_fused_a_0", "2.1")]["args"]["run"]) == \
        (7001, "run 2 a")
    assert sorted((e["tid"], e["name"]) for e in of(events, "X", cat="run")) == [
        (7001, "run 1 a"), (7001, "run 2 a"), (7002, "run 1 b")]
    assert_nested(events)


# -- instants ----------------------------------------------------------------------------

NAN_NOTE = (f"launch 1.2 cpp_fused_log_1 (source {SRC}:12) wrote 2 NaN into buf1 (first at flat index 0); "
            "its inputs held no NaN, so this launch is where NaN first appears")


def instants_log():
    w = LogWriter(4242)
    w.record("note", "-", "input-check", ["  x.shape[1] is 5, expected 4"])           # .000110
    w.record("run", "1", "m thread=7001")                                             # .000120
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:11", outputs=[("out buf0", T(0.0, 1.0, 0.5))])
    w.launch("1.2", "cpp_fused_log_1", "log", f"{SRC}:12",                            # .000180 - .000220
             outputs=[("out buf1", T(-1.0, 1.0, 0.0, nan=2, inf=1))])
    w.record("note", "-", "nan-check", [f"  {NAN_NOTE}"])                             # .000230
    w.record("launch", "1.3", "cpp_fused_sum_2", ["  origin: nodes=sum_1 source=-"])  # .000240
    w.record("crash", "1.3", "cpp_fused_sum_2", ["  signal: SIGSEGV"])                # .000250
    w.record("crash", "-", "-", ["  signal: SIGABRT"])                                # .000260
    w.record("call", "1", "__main__.f thread=7001")                                   # .000270
    w.record("raise", "1", "__main__.f", ["  exception: ValueError: bad input"])      # .000280
    return w


def test_nan_checks_crashes_and_raises_are_instants(tmp_path, capsys):
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, instants_log().write(tmp_path / "i.log"), "-o", out)
    assert (code, text) == (3, f"wrote {out}: 1 process(es), 1 thread track(s), 3 launch slice(s), "
                               "1 run(s), 6 instant event(s)\n"   # a crashed run: written, and said
                               "the run never finished:\n"
                               "  launch 1.3 cpp_fused_sum_2 never finished (crash: signal: SIGSEGV); its outputs "
                               "are unknown\n"
                               "  crash trailer - - (pid 4242): signal: SIGABRT\n"
                               "  run 1 m (pid 4242) never finished (no run-end record, i.log:10); what came after "
                               "launch 1.3 cpp_fused_sum_2 is missing\n")
    events = read_json(out)
    assert [(e["name"], e["cat"], e["s"], e["tid"], e["ts"]) for e in of(events, "i")] == [
        ("NaN/Inf: cpp_fused_log_1", "nan-inf", "t", 7001, at(220)),
        ("nan-check", "check", "t", 7001, at(230)),
        ("crash: cpp_fused_sum_2", "crash", "t", 7001, at(250)),
        ("raise: __main__.f", "raise", "t", 7001, at(280)),
        ("input-check", "check", "p", 4242, at(110)),
        ("crash", "crash", "p", 4242, at(260))]
    by_name = {e["name"]: e["args"] for e in of(events, "i")}
    assert by_name["NaN/Inf: cpp_fused_log_1"] == {
        "id": "1.2", "nan_count": 2, "inf_count": 1, "outputs": {"out buf1": {"nan_count": "2", "inf_count": "1"}}}
    assert by_name["nan-check"] == {"log": "i.log:45", "lines": [NAN_NOTE], "launch": "1.2"}
    assert by_name["input-check"] == {"log": "i.log:8", "lines": ["x.shape[1] is 5, expected 4"]}
    assert by_name["crash: cpp_fused_sum_2"] == {"id": "1.3", "log": "i.log:49", "signal": ["signal: SIGSEGV"]}
    assert by_name["crash"] == {"id": "-", "log": "i.log:51", "signal": ["signal: SIGABRT"]}
    assert by_name["raise: __main__.f"] == {"id": "1", "log": "i.log:54",
                                            "exception": ["exception: ValueError: bad input"]}
    (crashed,) = of(events, "X", name="cpp_fused_sum_2")
    assert (crashed["ts"], crashed["dur"], crashed["args"]["end"]) == (at(240), 10, "its crash trailer")
    (call,) = of(events, "X", cat="call")
    assert (call["ts"], call["dur"], call["args"]["exception"]) == (at(270), 10, ["exception: ValueError: bad input"])
    assert_nested(events)


def test_instants_in_the_perfetto_trace_are_on_their_threads_and_the_process(tmp_path, capsys):
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    out = tmp_path / "trace.pftrace"
    assert timeline(capsys, instants_log().write(tmp_path / "i.log"), "-o", out)[0] == 3   # it crashed
    packets = read_trace(out).packet
    names = {p.track_descriptor.uuid: p.track_descriptor.name for p in packets if p.HasField("track_descriptor")}
    instants = [(p.track_event.name, names[p.track_event.track_uuid]) for p in packets
                if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_INSTANT]
    assert instants == [("input-check", "pid 4242"), ("NaN/Inf: cpp_fused_log_1", "thread 7001"),
                        ("nan-check", "thread 7001"), ("crash: cpp_fused_sum_2", "thread 7001"),
                        ("crash", "pid 4242"), ("raise: __main__.f", "thread 7001")]


# -- what cannot be placed, and bad input ----------------------------------------------------

def test_masked_timestamps_and_pids_are_counted_not_placed(tmp_path, capsys):
    log = tmp_path / "masked.log"
    log.write_text(mask(level1_log().text()))
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, log, "-o", out)
    assert (code, text) == (0, f"wrote {out}: 1 process(es), 0 thread track(s), 0 launch slice(s), 0 run(s), "
                               "0 instant event(s); not placed, without a readable timestamp: "
                               "3 launch(es), 1 run(s)\n")
    (name,) = metadata(read_json(out), "process_name").values()
    assert name == {"name": "pid PID (masked)"}


def test_masked_pids_and_thread_ids_get_ids_of_their_own(tmp_path, capsys):
    w = LogWriter("PID")
    w.record("run", "1", "m thread=TID")
    w.record("launch", "1.1", "cpp_fused_add_0")
    out = tmp_path / "trace.json"
    code, text, _ = timeline(capsys, w.write(tmp_path / "masked.log"), "-o", out)
    assert (code, text) == (0, f"wrote {out}: 1 process(es), 1 thread track(s), 1 launch slice(s), 1 run(s), "
                               "0 instant event(s)\n")
    events = read_json(out)
    made_up = 2**22                  # past every Linux pid and tid
    assert metadata(events, "thread_name") == {(made_up, made_up + 1): {"name": "thread TID (masked)"}}
    assert metadata(events, "process_name") == {(made_up, made_up): {"name": "pid PID (masked)"}}
    assert [(e["name"], e["args"]["thread"]) for e in of(events, "X", cat="run")] == [("run 1 m", "TID (masked)")]


def test_timestamps_are_microseconds_since_the_epoch_or_none():
    from aoti_debug.analysis.timeline import micros
    assert micros("2026-11-21 05:30:45.000120") == at(120)
    assert micros("1970-01-01 00:00:00.000001") == 1
    for unreadable in ("TIMESTAMP", "2026-13-01 00:00:00.000000", "2026-11-21 05:30:60.000000",
                       "1969-12-31 23:59:59.999999", "9999-01-01 00:00:00.000000", "2026-11-21 05:30:45"):
        assert micros(unreadable) is None, unreadable


def test_a_missing_log_is_exit_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert timeline(capsys, missing, "-o", tmp_path / "t.json") == (
        2, "", f"aoti-debug timeline: {missing}: no such file or directory "
               "(expected a log file written by aoti-debug, or a dump directory)\n")
    assert not (tmp_path / "t.json").exists()


def test_a_glob_that_matches_nothing_is_exit_2(tmp_path, capsys):
    assert timeline(capsys, tmp_path / "rank*.log", "-o", tmp_path / "t.json") == (
        2, "", f"aoti-debug timeline: {tmp_path}/rank*.log: no such file or directory, and as a glob "
               "it matches none (expected logs or dump directories written by aoti-debug)\n")


@pytest.mark.parametrize("where", ["missing-dir/t.json", "."])
def test_an_output_that_cannot_be_written_is_exit_2(tmp_path, capsys, rank_logs, where):
    target = tmp_path / where
    code, out, err = timeline(capsys, rank_logs[0], "-o", target)
    why = "No such file or directory" if where != "." else "Is a directory"
    assert (code, out, err) == (2, "", f"aoti-debug timeline: {target}: cannot be written ({why}); "
                                       "expected a path to a file in a writable directory\n")


def test_without_perfetto_the_protobuf_format_says_how_to_install_it(tmp_path, capsys, monkeypatch, rank_logs):
    for name in [m for m in sys.modules if m == "perfetto" or m.startswith("perfetto.")] + ["perfetto"]:
        monkeypatch.setitem(sys.modules, name, None)        # `import perfetto` raises ImportError
    code, out, err = timeline(capsys, rank_logs[0], "-o", tmp_path / "t.pftrace")
    assert (code, out) == (2, "")
    assert err.startswith("aoti-debug timeline: writing a Perfetto trace needs the perfetto package, "
                          "which cannot be imported (")
    assert err.endswith("): pip install perfetto (or pip install 'aoti-debug[timeline]'), "
                        "or write the JSON trace (-o timeline.json), which needs nothing\n")
    assert not (tmp_path / "t.pftrace").exists()


def test_only_the_perfetto_format_imports_perfetto(tmp_path, rank_logs):
    code = f"""
import sys
from aoti_debug.cli import main
assert main(["timeline", {rank_logs[0]!r}, "-o", {str(tmp_path / 't.json')!r}]) == 0
assert main(["nan-origin", {rank_logs[2]!r}]) == 1
assert "perfetto" not in sys.modules, "perfetto imported"
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_text_from_the_log_is_escaped(tmp_path, capsys):
    w = LogWriter(4242)
    w.record("run", "1", "m thread=7001")
    w.record("launch", "1.1", "cpp_\x1b[31mevil\u202e_0")
    out = tmp_path / "trace.json"
    assert timeline(capsys, w.write(tmp_path / "e.log"), "-o", out)[0] == 0
    (launch,) = of(read_json(out), "X", cat="launch")
    assert launch["name"] == "cpp_\\x1b[31mevil\\u202e_0"
