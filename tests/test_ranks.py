"""One job, many logs: ranks in the records, and nan-origin, diff --ranks and report over
the logs of several processes (hand-made logs in the exact format; the real torchrun job
is tests/test_distributed.py)."""

import pytest

from aoti_debug.analysis import load, nan_origin, records
from aoti_debug.analysis.mask import mask
from aoti_debug.cli import main
from test_analysis_logs import RULE, T, item

SRC = "/srv/app/model.py"
WORLD = 4


def ranked_log(rank, pid, runs=3, nan_from=None, start_us=100, thread=None):
    """Level-5 log of one rank: `runs` runs of two launches (mul, then log); from run
    `nan_from` on, launch R.2 turns finite inputs into NaN."""
    thread = thread or pid
    micro = start_us
    parts = [f"{RULE}\n[2026-11-24 10:00:00.{micro:06d}] [pid {pid}] aoti-debug - System Information\n"
             f"{RULE}\naoti-debug version: 0.1.0\nPyTorch version: 2.13.0+cpu\nPlatform: Linux x86_64\n"
             f"Rank: {rank} of {WORLD}\n{RULE}\n"]

    def rec(kind, ident, name, body=(), step=10):
        nonlocal micro
        micro += step
        parts.append(f"[2026-11-24 10:00:00.{micro:06d}] [pid {pid}] {kind} {ident} {name}\n"
                     + "".join(f"{line}\n" for line in body))

    def items(pairs):
        return [line for label, value in pairs for line in item(label, value)]

    for r in range(1, runs + 1):
        bad = nan_from is not None and r >= nan_from
        rec("run", r, f"model thread={thread} rank={rank}/{WORLD}", items([("in x", T(0.5, 2.0, 1.0))]))
        rec("launch", f"{r}.1", "cpp_fused_mul_0", [f"  origin: nodes=mul source={SRC}:5"]
            + items([("in x", T(0.5, 2.0, 1.0))]))
        rec("launch-end", f"{r}.1", "cpp_fused_mul_0", items([("out buf0", T(-1.0, 4.0, 2.0))]), step=40)
        rec("launch", f"{r}.2", "cpp_fused_log_1", [f"  origin: nodes=log source={SRC}:6"]
            + items([("in buf0", T(-1.0, 4.0, 2.0))]))
        out = T(0.0, 1.386294, 0.6, nan=1) if bad else T(0.0, 1.386294, 0.7)
        rec("launch-end", f"{r}.2", "cpp_fused_log_1", items([("out buf1", out)]), step=40)
        rec("run-end", r, "model", items([("out buf1", out)]))
    return "".join(parts)


@pytest.fixture
def job(tmp_path):
    """Four rank logs; rank 2 goes bad from run 3, rank 0 from run 3 too but later in time."""
    def write(nan=None, **kw):
        nan = {2: 3} if nan is None else nan
        paths = []
        for rank in range(WORLD):
            # rank 0 starts 5 ms later: its NaN, at the same run, comes after rank 2's
            text = ranked_log(rank, 100 + rank, nan_from=nan.get(rank),
                              start_us=5100 if rank == 0 else 100 + rank, **kw)
            path = tmp_path / f"debug_rank{rank}.log"
            path.write_text(text)
            paths.append(str(path))
        return paths
    return write


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- records --------------------------------------------------------------------

def test_ranks_and_threads_are_read_from_banners_and_run_headers(job):
    log = load.read_many(job())
    assert [(p.pid, p.rank, p.world, p.label) for p in log.processes()] == [
        (101, 1, 4, "rank 1 (pid 101)"), (102, 2, 4, "rank 2 (pid 102)"),
        (103, 3, 4, "rank 3 (pid 103)"), (100, 0, 4, "rank 0 (pid 100)")]
    runs = [r for r in log.records if r.kind == "run"]
    assert len(runs) == 12
    assert {(r.name, r.thread, r.rank, r.world) for r in runs if r.pid == 102} == {("model", 102, 2, 4)}


def test_a_run_header_alone_gives_the_rank(tmp_path):
    text = ("[2026-11-24 10:00:00.000001] [pid 7] run 1 m#2 thread=9 rank=5\n"
            "[2026-11-24 10:00:00.000002] [pid 8] call 1 f.g thread=8\n")
    log = records.parse(text)
    assert [(r.name, r.thread, r.rank, r.world) for r in log.records] == [
        ("m#2", 9, 5, None), ("f.g", 8, None, None)]
    assert [p.label for p in log.processes()] == ["rank 5 (pid 7)", "pid 8"]


def test_masking_hides_thread_ids_of_run_and_call_headers_only():
    text = ("[2026-11-24 10:00:00.000001] [pid 7] run 1 m thread=9 rank=5/8\n"
            "  in s: \"thread=4\"\n"
            "[2026-11-24 10:00:00.000002] [pid 7] launch 1.1 thread=3\n")
    assert mask(text) == ("[TIMESTAMP] [pid PID] run 1 m thread=TID rank=5/8\n  in s: \"thread=4\"\n"
                          "[TIMESTAMP] [pid PID] launch 1.1 thread=3\n")


# -- nan-origin -----------------------------------------------------------------

def test_nan_origin_names_the_first_rank_then_the_others_in_the_order_they_went_bad(job, capsys):
    paths = job(nan={2: 3, 0: 3})
    code, out, err = cli(capsys, "nan-origin", *paths)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "NaN/Inf origin: launch 3.2 cpp_fused_log_1 (rank 2, pid 102, debug_rank2.log:239)"
    assert lines[1:3] == [f"  source: {SRC}:6", "  nodes:  log"]
    assert lines[-5:] == [
        "4 processes, in the order NaN/Inf appeared (timestamps as written: clocks of one machine):",
        "  rank 2 (pid 102): origin launch 3.2 cpp_fused_log_1 at [2026-11-24 10:00:00.000452]",
        "  rank 0 (pid 100): origin launch 3.2 cpp_fused_log_1 at [2026-11-24 10:00:00.005450], "
        "+4.998 ms after the first",
        "  rank 1 (pid 101): no NaN/Inf in 6 launches",
        "  rank 3 (pid 103): no NaN/Inf in 6 launches"]


def test_nan_origin_keeps_the_job_notes_when_a_rank_went_bad(job, capsys):
    paths = job(nan={2: 3})
    with open(paths[1], "a") as f:
        f.write("program output between records\n")
    code, out, err = cli(capsys, "nan-origin", *paths)
    assert (code, err) == (1, "")
    assert out.splitlines()[-1] == (f"note: {paths[1]}: 1 line(s) that are not aoti-debug records were "
                                    "left out (first: line 285)")


def test_a_log_without_records_in_a_directory_is_named(job, tmp_path, capsys):
    job(nan={})
    cut = tmp_path / "debug_rank4.log"
    cut.write_text("===")                  # a rank killed inside its first write
    code, out, _ = cli(capsys, "nan-origin", str(tmp_path))
    assert code == 0
    assert out.splitlines()[-2:] == ["no NaN/Inf in the 24 launches of the log",
                                     f"note: {cut}: holds no aoti-debug record (left out)"]


def test_two_ranks_with_one_pid_are_refused_not_merged(tmp_path, capsys):
    """Containers on two machines can give two ranks one pid: read as one process, their
    launches would pair with each other's ends."""
    paths = []
    for rank in (0, 1):
        path = tmp_path / f"node{rank}.log"
        path.write_text(ranked_log(rank, 7, nan_from=None, start_us=100 + rank))
        paths.append(str(path))
    code, out, err = cli(capsys, "nan-origin", *paths)
    assert (code, out) == (2, "")
    assert err == (f"aoti-debug nan-origin: {paths[0]} and {paths[1]}: pid 7 is rank 0 in one and rank 1 in "
                   "the other (processes of different machines or containers that share a pid); records "
                   "are grouped by pid, so read them apart: one command per machine's logs\n")


def test_nan_origin_takes_globs_and_a_clean_job_exits_0(job, tmp_path, capsys):
    job(nan={})
    code, out, _ = cli(capsys, "nan-origin", str(tmp_path / "debug_rank*.log"))
    assert code == 0
    assert out.splitlines() == [
        "4 processes, in the order NaN/Inf appeared (timestamps as written: clocks of one machine):",
        "  rank 0 (pid 100): no NaN/Inf in 6 launches", "  rank 1 (pid 101): no NaN/Inf in 6 launches",
        "  rank 2 (pid 102): no NaN/Inf in 6 launches", "  rank 3 (pid 103): no NaN/Inf in 6 launches",
        "no NaN/Inf in the 24 launches of the log"]


def test_a_glob_that_matches_nothing_is_a_usage_error(tmp_path, capsys):
    code, out, err = cli(capsys, "nan-origin", str(tmp_path / "rank*.log"))
    assert (code, out) == (2, "")
    assert err == (f"aoti-debug nan-origin: {tmp_path}/rank*.log: no such file or directory, and as a "
                   "glob it matches none (expected logs or dump directories written by aoti-debug)\n")


def test_by_process_orders_by_time_and_keeps_each_finding_to_its_process(job):
    ranked = nan_origin.by_process(load.read_many(job(nan={2: 3, 0: 2})))
    # by time, not by run number: rank 0 went bad at an earlier run, but started 5 ms later
    assert [(p.rank, f.origin.event.title if f.origin else None) for p, f in ranked.order] == [
        (2, "3.2 cpp_fused_log_1"), (0, "2.2 cpp_fused_log_1"), (1, None), (3, None)]
    assert ranked.first is ranked.order[0][1]
    # each finding is its process's own: rank 0's later origin is not rank 2's
    assert ranked.first.other_origins == []
    assert [(c.event.pid, c.event.title) for c in ranked.order[1][1].other_origins] == [
        (100, "3.2 cpp_fused_log_1")]


# -- diff --ranks ---------------------------------------------------------------

def test_diff_ranks_names_the_first_launch_where_one_rank_differs(job, capsys):
    code, out, err = cli(capsys, "diff", "--ranks", *job())
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[:5] == [
        "reference: rank 0 (pid 100)",
        "rank 1 (pid 101): agrees: 3 run(s), 6 aligned launch(es) compared",
        "rank 2 (pid 102): differs from run 3: launch 3.2 cpp_fused_log_1",
        "rank 3 (pid 103): agrees: 3 run(s), 6 aligned launch(es) compared",
        "first divergence: rank 2 (pid 102), run 3, launch 3.2 cpp_fused_log_1 "
        "(A: rank 0 (pid 100), B: rank 2 (pid 102))"]
    assert lines[5:8] == [f"  source: {SRC}:6", "  nodes:  log",
                          "  out buf1 nan_count 0 vs 1"]


def test_diff_ranks_of_agreeing_replicas_exits_0(job, capsys):
    code, out, _ = cli(capsys, "diff", "--ranks", *job(nan={}))
    assert code == 0
    assert out.splitlines()[1:] == [f"rank {r} (pid {100 + r}): agrees: 3 run(s), 6 aligned launch(es) "
                                    "compared" for r in (1, 2, 3)]


def test_diff_ranks_never_says_a_rank_that_crashed_agrees(job, tmp_path, capsys):
    paths = job(nan={})
    with open(paths[3]) as f:
        text = f.read()
    cut = text.index("\n[", text.index("launch 3.2 cpp_fused_log_1"))     # 3.2 never ended
    with open(paths[3], "w") as f:
        f.write(text[:cut + 1] + "[2026-11-24 10:00:00.900000] [pid 103] crash 3.2 cpp_fused_log_1\n"
                "  signal: SIGSEGV\n")
    code, out, _ = cli(capsys, "diff", "--ranks", *paths)
    assert code == 3            # the job never finished: said first, never a clean verdict
    assert out.splitlines()[:2] == [
        "the run never finished:",
        "  launch 3.2 cpp_fused_log_1 (rank 3, pid 103) never finished (crash: signal: SIGSEGV); its outputs "
        "are unknown"]
    assert out.splitlines()[-2:] == [
        "rank 3 (pid 103): agrees where compared: 3 run(s), 5 aligned launch(es) compared; 1 aligned "
        "launch(es) could not be compared (no statistics or outputs); this rank crashed in 3.2 "
        "cpp_fused_log_1 (signal: SIGSEGV)",
        "  run 3 (A: the reference, B: this rank): the model's outputs are only in A (B: it has no "
        "run-end record for the run: the run was cut short): not compared"]
    page = tmp_path / "job.html"
    assert cli(capsys, "report", *paths, "-o", str(page))[0] == 3
    assert ("agrees where compared (3 run(s); 1 aligned launch(es) could not be compared (no statistics "
            "or outputs); this rank crashed in 3.2 cpp_fused_log_1 (signal: SIGSEGV))") in page.read_text()


def test_diff_ranks_run_limits_the_comparison_to_one_run(job, capsys):
    code, out, _ = cli(capsys, "diff", "--ranks", "--run", "2", *job())
    assert code == 0
    assert "rank 2 (pid 102): agrees: 1 run(s), 2 aligned launch(es) compared" in out.splitlines()


def test_diff_ranks_needs_two_processes_and_plain_diff_two_logs(job, capsys):
    paths = job()
    code, out, err = cli(capsys, "diff", "--ranks", paths[1])
    assert (code, out) == (2, "")
    assert err == (f"aoti-debug diff: {paths[1]}: --ranks compares the processes of one job, and this "
                   "holds one process (rank 1 (pid 101)) (expected the logs of two or more ranks)\n")
    code, out, err = cli(capsys, "diff", *paths[:3])
    assert (code, out) == (2, "")
    assert err == "aoti-debug diff: expected two logs, A and B, and got 3 (or --ranks with the logs of one job)\n"


# -- the runtimes ------------------------------------------------------------------

@pytest.mark.parametrize("writer", ["compiled core", "Python writer"])
def test_the_python_runtime_writes_the_rank_in_the_banner_and_run_header(tmp_path, writer):
    from conftest import clean_env, run_python
    proc = run_python(f"""
        import threading
        from aoti_debug.runtime import sink
        if {writer == "Python writer"}:
            sink.native = lambda: None       # as when the core cannot be built
        from aoti_debug.runtime.launches import Model
        Model("m", 1).begin_run()
        print(threading.get_native_id())
    """, env=clean_env(RANK="3", WORLD_SIZE="8", AOTI_DEBUG_LOGLEVEL="1",
                       AOTI_DEBUG_LOGDEST=str(tmp_path / "debug_rank%r.log")))
    assert [p.name for p in tmp_path.iterdir()] == ["debug_rank3.log"]
    text = (tmp_path / "debug_rank3.log").read_text()
    assert f" run 1 m thread={proc.stdout.strip()} rank=3/8\n" in text
    assert mask(text).split("\n", 5)[5] == (
        f"Platform: {records.parse(text).banners[0].facts['Platform']}\nRank: 3 of 8\n{RULE}\n"
        "[TIMESTAMP] [pid PID] run 1 m thread=TID rank=3/8\n")


def test_info_shows_the_rank_and_refuses_percent_r_without_one(monkeypatch, tmp_path, capsys):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AOTI_DEBUG_LOGDEST", str(tmp_path / "r%r.log"))
    code, out, err = cli(capsys, "info")
    assert code == 2
    assert "  Rank                           none (RANK and LOCAL_RANK unset)\n" in out
    assert err == (f"\nerror: AOTI_DEBUG_LOGDEST='{tmp_path}/r%r.log' is not valid: %r becomes the "
                   "process's rank, read from RANK, else LOCAL_RANK (torchrun sets both), and neither "
                   "is set to a whole number\n")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    code, out, err = cli(capsys, "info")
    assert (code, err) == (0, "")
    assert "  Rank                           1 of 2\n" in out
    assert f"  AOTI_DEBUG_LOGDEST             {tmp_path}/r1.log\n" in out
    assert list(tmp_path.iterdir()) == []       # tried, left nothing behind
