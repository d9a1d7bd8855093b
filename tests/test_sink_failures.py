"""A log that cannot be written: one line on stderr, the model runs on, and
the next write that succeeds says how many records were lost (issue: nothing
is dropped silently).  Both writers run the same cases: the registry's
write_record in the compiled core and the Python writer used without it."""

import os
import signal

import pytest

from conftest import banners, clean_env, run_package, run_python, without_torch_logs
from aoti_debug.analysis.mask import mask
from aoti_debug.analysis import records as records_mod

# Writes records 1-4 to `log`; the file-size limit lets record 2 in only in
# part (a short write) and record 3 not at all, then is lifted for record 4.
# SIGXFSZ ignored (as Python sets it) or at its default action, which kills
# the process (a C++ server's): the writer holds it around its writes, under
# a file-size limit the process had from its start.
SCRIPT = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.{disposition})
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
from aoti_debug.runtime import format as fmt, sink
if {writer!r} == "python":
    sink.native = lambda: None
elif sink.native() is None:
    sys.exit("the compiled core is not available")
log = {log!r}
def rec(i):
    return fmt.record(fmt.header("note", "-", "r%d" % i, os.getpid()), ["  body of record %d" % i])
sink.write(log, rec(1))
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(log) + 10, hard))
sink.write(log, rec(2))
sink.write(log, rec(3))
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
sink.write(log, rec(4))
sink.write(log, rec(5))
"""

LOST_LINE = "aoti-debug: cannot write the log to {} ({}); records are lost until a write succeeds\n"


@pytest.mark.parametrize("disposition", ["SIG_IGN", "SIG_DFL"])
@pytest.mark.parametrize("writer", ["native", "python"])
def test_lost_records_are_counted_and_said_once(tmp_path, writer, disposition):
    log = tmp_path / "log.txt"
    proc = run_python(SCRIPT.format(writer=writer, log=str(log), disposition=disposition))
    assert proc.stderr == LOST_LINE.format(log, "File too large")
    raw = log.read_text()
    lines = raw.split("\n")
    cut = lines[lines.index("  body of record 1") + 1]     # record 2's first 10 bytes
    assert len(cut) == 10 and cut.startswith("[20")
    text = mask(raw)
    r = "[TIMESTAMP] [pid PID] note - r{0}\n  body of record {0}\n"
    assert text == (banners(text)[0] + r.format(1) + cut + "\n"
                    + "[TIMESTAMP] [pid PID] note - log\n"
                    + f"  2 records lost: writing {log} failed (File too large)\n"
                    + r.format(4) + r.format(5))
    # the analysis reads such a log: the cut line is left out with a word, not an error
    parsed = records_mod.parse(raw, str(log))
    assert [(r.kind, r.name) for r in parsed.records] == [
        ("note", "r1"), ("note", "log"), ("note", "r4"), ("note", "r5")]
    assert parsed.left_out == [f"{log}: 1 line(s) that are not aoti-debug records were left out "
                               f"(first: line {lines.index(cut) + 1})"]


def test_dev_full_leaves_one_line_and_the_model_runs_on(packages):
    pt2 = packages.get("mlp", AOTI_DEBUG_LOGLEVEL="5")
    plain = run_package(pt2, "mlp", AOTI_DEBUG_LOGLEVEL="0")
    proc = run_package(pt2, "mlp", AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST="/dev/full")
    assert proc.stdout == plain.stdout and proc.stdout.startswith("OUTPUT ")
    assert without_torch_logs(proc.stderr) == LOST_LINE.format("/dev/full", "No space left on device")


def test_records_after_a_failure_parse_whole():
    text = ("[2026-01-01 00:00:00.000000] [pid 7] note - r1\n  a\n"
            "[2026-01-01 00:00:00.000000] [pid 7] laun\n"
            "[2026-01-01 00:00:00.000000] [pid 7] note - log\n  1 record lost: writing x failed (y)\n")
    parsed = records_mod.parse(text, "x")
    assert [r.name for r in parsed.records] == ["r1", "log"]
    assert parsed.records[1].notes == ["1 record lost: writing x failed (y)"]
    assert parsed.left_out == ["x: 1 line(s) that are not aoti-debug records were left out (first: line 3)"]


@pytest.mark.parametrize("writer", ["native", "python"])
def test_a_record_with_a_lone_surrogate_is_written_escaped(tmp_path, writer):
    """A path from os.fsdecode of bytes that are not UTF-8 holds a lone surrogate: the call
    record is written with it escaped, not lost."""
    log = tmp_path / "log.txt"
    run_python(f"""
        import os, sys
        from aoti_debug import log_api
        from aoti_debug.runtime import sink
        if {writer!r} == "python":
            sink.native = lambda: None
        elif sink.native() is None:
            sys.exit("the compiled core is not available")

        @log_api
        def size(path):
            return len(path)

        size(os.fsdecode(b"\\xff.txt"))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=str(log)))
    text = mask(log.read_text())
    assert '\n[TIMESTAMP] [pid PID] call 1 __main__.size thread=TID\n  arg[0] path: "\\udcff.txt"\n' in text
    assert text.endswith("[TIMESTAMP] [pid PID] return 1 __main__.size\n  output: 5\n")


# A log whose reader went away, in a process that set SIGPIPE back to its default
# action (a C++ server that never ignored it; Python itself ignores it).  `dest`:
# stdout or stderr on a pipe whose read end is closed (`| head -1` that has
# exited), or a FIFO path whose reader closes it after the first record.
PIPE_SCRIPT = """
import os, signal, sys, threading
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
from aoti_debug.runtime import format as fmt, sink
if {writer!r} == "python":
    sink.native = lambda: None
elif sink.native() is None:
    sys.exit("the compiled core is not available")
def rec(i):
    return fmt.record(fmt.header("note", "-", "r%d" % i, os.getpid()), ["  body of record %d" % i])
report = open({report!r}, "w")
def state(when):
    pending = sorted(int(s) for s in signal.sigpending())
    blocked = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    report.write("%s: pending %s, blocked %s\\n" % (when, pending, blocked))
dest = {dest!r}
if dest in ("stdout", "stderr"):
    read, write = os.pipe()
    os.dup2(write, 1 if dest == "stdout" else 2)
else:
    os.mkfifo(dest)
    read = os.open(dest, os.O_RDONLY | os.O_NONBLOCK)
    sink.write(dest, rec(0))
    report.write("read %r\\n" % os.read(read, 1 << 16).decode()[-31:])
os.close(read)
sink.write(dest, rec(1))
sink.write(dest, rec(2))
state("after")
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGPIPE}})   # a thread that blocks it itself
sink.write(dest, rec(3))
state("blocked")
signal.pthread_kill(threading.get_ident(), signal.SIGPIPE)     # ... and has one pending
sink.write(dest, rec(4))
state("pending")
signal.sigtimedwait({{signal.SIGPIPE}}, 0)
report.write("alive\\n")
"""


@pytest.mark.parametrize("dest", ["stdout", "stderr", "fifo"])
@pytest.mark.parametrize("writer", ["native", "python"])
def test_a_closed_pipe_fails_the_write_and_never_kills_the_process(tmp_path, writer, dest):
    report, fifo = tmp_path / "report.txt", str(tmp_path / "log.fifo")
    proc = run_python(PIPE_SCRIPT.format(writer=writer, dest=fifo if dest == "fifo" else dest,
                                         report=str(report)), check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    pipe = int(signal.SIGPIPE)
    # none of ours is left pending, the thread's mask and its own pending SIGPIPE are kept
    assert report.read_text() == ("read '] note - r0\\n  body of record 0\\n'\n" if dest == "fifo" else "") + (
        f"after: pending [], blocked []\nblocked: pending [], blocked [{pipe}]\n"
        f"pending: pending [{pipe}], blocked [{pipe}]\nalive\n")
    # the lost line goes to stderr, unless stderr is the closed pipe itself
    said = {"stdout": LOST_LINE.format("stdout", "Broken pipe"), "stderr": "",
            "fifo": LOST_LINE.format(fifo, "Broken pipe")}[dest]
    assert proc.stderr == said


@pytest.mark.parametrize("writer", ["native", "python"])
def test_a_fifo_without_a_reader_falls_back_to_stderr(tmp_path, writer):
    """Opening a FIFO that no one reads would block the model until a reader comes."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = run_python(f"""
        import os, sys
        from aoti_debug.runtime import format as fmt, sink
        if {writer!r} == "python":
            sink.native = lambda: None
        elif sink.native() is None:
            sys.exit("the compiled core is not available")
        for i in (1, 2):
            sink.write({str(fifo)!r}, fmt.record(fmt.header("note", "-", "r%d" % i, os.getpid()), []))
    """, timeout=60)
    text = mask(proc.stderr)
    assert text == (banners(text)[0]
                    + "[TIMESTAMP] [pid PID] note - settings\n"
                    + f"  AOTI_DEBUG_LOGDEST={str(fifo)!r} is not valid: cannot open {fifo} "
                      "(No such device or address); keeping stderr\n"
                    + "[TIMESTAMP] [pid PID] note - r1\n[TIMESTAMP] [pid PID] note - r2\n")


def test_info_tries_a_fifo_destination_without_opening_it(tmp_path):
    """`aoti-debug info` tries the destination as a run would open it: a FIFO without a
    reader would block it, and opened and closed with one it would end the reader's input."""
    import threading
    from aoti_debug.runtime import sink
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    result = []
    tried = threading.Thread(target=lambda: result.append(sink.try_destination(str(fifo), 1)), daemon=True)
    tried.start()
    tried.join(10)
    hung = tried.is_alive()
    if hung:         # a reader lets the blocked open return
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        tried.join()
    assert (hung, result) == (False, [None])


NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")


@as_root
@pytest.mark.parametrize("planted", ["link", "file"])
@pytest.mark.parametrize("writer", ["native", "python"])
def test_a_log_path_another_user_planted_is_never_written(tmp_path, writer, planted):
    """In a sticky, world-writable directory another user can plant a link at the log's path
    (to a file only the victim may write) or a file of their own: neither is followed or
    appended to; the records go to stderr after one note, as for any path that cannot be opened."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim, log = tmp_path / "victim.txt", shared / "log.txt"
    victim.write_text("root's own\n")
    if planted == "link":
        os.symlink(victim, log)
        os.lchown(log, NOBODY, NOBODY)
        why = "a symbolic link another user owns, which is not followed"
    else:
        log.write_text("theirs\n")
        os.chown(log, NOBODY, NOBODY)
        why = "a file another user owns, which is not appended to"
    proc = run_python(f"""
        import os, sys
        from aoti_debug.runtime import format as fmt, sink
        if {writer!r} == "python":
            sink.native = lambda: None
        elif sink.native() is None:
            sys.exit("the compiled core is not available")
        sink.write({str(log)!r}, fmt.record(fmt.header("note", "-", "r1", os.getpid()), []))
    """, timeout=60)
    assert victim.read_text() == "root's own\n"
    assert planted == "link" or log.read_text() == "theirs\n"
    text = mask(proc.stderr)
    assert text == (banners(text)[0] + "[TIMESTAMP] [pid PID] note - settings\n"
                    + f"  AOTI_DEBUG_LOGDEST={str(log)!r} is not valid: cannot open {log} ({why}); keeping stderr\n"
                    + "[TIMESTAMP] [pid PID] note - r1\n")


@pytest.mark.parametrize("writer", ["native", "python"])
def test_a_new_log_and_its_folders_are_private(tmp_path, writer):
    log = tmp_path / "logs" / "day" / "log.txt"
    run_python(f"""
        import os, sys
        from aoti_debug.runtime import format as fmt, sink
        if {writer!r} == "python":
            sink.native = lambda: None
        elif sink.native() is None:
            sys.exit("the compiled core is not available")
        os.umask(0o022)
        sink.write({str(log)!r}, fmt.record(fmt.header("note", "-", "r1", os.getpid()), []))
    """, timeout=60)
    modes = [oct(os.lstat(p).st_mode & 0o777) for p in (tmp_path / "logs", log.parent, log)]
    assert modes == ["0o700", "0o700", "0o600"]
