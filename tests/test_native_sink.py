"""Destinations, banner, process registry and crash trailer of the C++ runtime
(cpp_runtime/include/aoti_debug/detail/registry.h: sink.h, banner.h,
process_registry.h, crash_handler.h) through aoti_debug.native.core,
mostly in fresh interpreters so that each process starts with no registry."""

from __future__ import annotations

import ctypes
import os
import platform
import re
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from aoti_debug.native import core as _native

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}"
RULE = "=" * 80


@pytest.fixture(scope="session")
def native():
    assert _native.lib() is not None
    return _native


def test_the_calls_that_keep_the_gil_are_refused_through_the_cdll_handle(native):
    """A call of _HELD through the CDLL handle would run without the GIL, and the
    core's hooks (PyEval_SaveThread) would then release it again: a fatal error
    of the interpreter.  lib() refuses each by name; _need_held() has them."""
    for name in native._HELD:
        with pytest.raises(TypeError, match=rf"^{name} keeps the GIL through its call: call it through "
                                            r"native\.core\._need_held\(\) \(a ctypes\.PyDLL handle\), not through lib\(\)$"):
            getattr(native.lib(), name)()
        assert list(getattr(native._need_held(), name).argtypes) == native._SIGNATURES[name][1]
    assert isinstance(native._need_held(), ctypes.PyDLL) and not isinstance(native.lib(), ctypes.PyDLL)
    assert native.lib().aotid_stats_size() == ctypes.sizeof(native._StatsC)  # the others stay


def mask(text: str) -> str:
    text = re.sub(rf"\[{TS}\]", "[TIMESTAMP]", text)
    return re.sub(r"\[pid \d+\]", "[pid PID]", text)


def banner(torch_version: str) -> str:
    return (f"{RULE}\n[TIMESTAMP] [pid PID] aoti-debug - System Information\n{RULE}\n"
            f"aoti-debug version: 0.1.0\nPyTorch version: {torch_version}\n"
            f"Platform: {platform.system()} {platform.machine()}\n{RULE}\n")


def child_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AOTI_DEBUG_", "AOT_INDUCTOR_", "TORCHINDUCTOR_"))
           or k == "AOTI_DEBUG_CACHE_DIR"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_child(code: str, check=True, **env):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(**env),
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def rec(name: str, body_lines: int = 0, width: int = 0) -> str:
    """A record as the logger would build it (fixed timestamp: this tests transport)."""
    text = f"[2026-01-01 00:00:00.000000] [pid 1] note - {name}\n"
    for k in range(body_lines):
        text += f"  line {k} of {name} " + "x" * width + "\n"
    return text


def split_records(text: str):
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("[") or not out:
            out.append(line)
        else:
            out[-1] += line
    return out


# ---------------------------------------------------------------- writing

def test_eight_threads_records_intact(native, tmp_path):
    path = tmp_path / "threads.log"
    expected = {t: [rec(f"t{t}-{i}", 3, 120) for i in range(200)] for t in range(8)}

    def worker(t):
        for r in expected[t]:
            native.sink_write(str(path), r, "1.2.3")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lines = path.read_text().splitlines(keepends=True)
    assert mask("".join(lines[:7])) == banner("1.2.3")  # one banner, first
    records = split_records("".join(lines[7:]))
    assert len(records) == 1600
    for t in range(8):  # intact, and each thread's records in its own order
        mine = [mask(r) for r in records if f"note - t{t}-" in r]
        assert mine == [mask(r) for r in expected[t]]   # stamped again as written


def test_two_processes_share_a_file(tmp_path):
    path = tmp_path / "two.log"
    code = f"""
        import sys
        from aoti_debug.native import core as _native
        for i in range(300):
            _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - p%s-%d\\n"
                               % (sys.argv[1], i) + "  " + "y" * 3000 + "\\n", "v")
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(p)],
                              env=child_env()) for p in (1, 2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    text = mask(path.read_text())
    assert text.count(banner("v")) == 2  # one banner per destination per process
    records = split_records(text.replace(banner("v"), ""))
    assert len(records) == 600
    for p in (1, 2):
        assert [r for r in records if f"note - p{p}-" in r] == [
            f"[TIMESTAMP] [pid PID] note - p{p}-{i}\n  " + "y" * 3000 + "\n" for i in range(300)]


def test_banner_once_per_destination_and_exact(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    proc = run_child(f"""
        from aoti_debug.native import core as _native
        for dest in ({str(a)!r}, {str(b)!r}, {str(a)!r}, "stdout", "stdout", "stderr", "stderr"):
            _native.sink_write(dest, "[2026-01-01 00:00:00.000000] [pid 1] note - to-" + dest[-5:] + "\\n",
                               "2.13.0+cpu")
    """)
    one = "[2026-01-01 00:00:00.000000] [pid 1] note - to-{}\n"
    assert mask(a.read_text()) == mask(banner("2.13.0+cpu") + one.format("a.log") * 2)
    assert mask(b.read_text()) == mask(banner("2.13.0+cpu") + one.format("b.log"))
    assert mask(proc.stdout) == mask(banner("2.13.0+cpu") + one.format("tdout") * 2)
    assert mask(proc.stderr) == mask(banner("2.13.0+cpu") + one.format("tderr") * 2)


def test_percent_i_mkdir_p_and_mode(tmp_path):
    dest = str(tmp_path / "x" / "y" / "log_%i_%i.txt")
    proc = run_child(f"""
        import os
        os.umask(0o022)
        from aoti_debug.native import core as _native
        _native.sink_write({dest!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - hi\\n", "v")
        print(os.getpid())
    """)
    pid = int(proc.stdout)
    path = tmp_path / "x" / "y" / f"log_{pid}_{pid}.txt"
    assert mask(path.read_text()) == banner("v") + "[TIMESTAMP] [pid PID] note - hi\n"
    # private whatever the umask lets through: the log and the folders made for it
    assert [oct(os.stat(p).st_mode & 0o777) for p in (tmp_path / "x", tmp_path / "x" / "y", path)] == [
        "0o700", "0o700", "0o600"]


def test_unopenable_destination_falls_back_to_stderr_with_one_note(tmp_path):
    (tmp_path / "file.txt").write_text("not a directory")
    dest = str(tmp_path / "file.txt" / "sub" / "x_%i.log")
    proc = run_child(f"""
        import os
        from aoti_debug.native import core as _native
        for i in range(2):
            _native.sink_write({dest!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - r%d\\n" % i, "v")
        print(os.getpid())
    """)
    pid = int(proc.stdout)
    expanded = dest.replace("%i", str(pid))
    assert mask(proc.stderr) == (
        banner("v")
        + "[TIMESTAMP] [pid PID] note - settings\n"
        + f"  AOTI_DEBUG_LOGDEST={dest!r} is not valid: cannot open {expanded} (Not a directory); "
          "keeping stderr\n"
        + "[TIMESTAMP] [pid PID] note - r0\n"
        + "[TIMESTAMP] [pid PID] note - r1\n")


def test_note_once_per_process(tmp_path):
    path = tmp_path / "n.log"
    run_child(f"""
        from aoti_debug.native import core as _native
        for _ in range(3):
            _native.write_note({str(path)!r}, "settings", "first line\\nsecond line", once=True, torch_version="v")
        _native.write_note({str(path)!r}, "other", "x", once=False, torch_version="v")
        _native.write_note({str(path)!r}, "other", "x", once=False, torch_version="v")
    """)
    assert mask(path.read_text()) == banner("v") + (
        "[TIMESTAMP] [pid PID] note - settings\n  first line\n  second line\n"
        + "[TIMESTAMP] [pid PID] note - other\n  x\n" * 2)


def test_registry_is_published_and_forked_child_starts_its_own(tmp_path):
    path = tmp_path / "fork.log"
    proc = run_child(f"""
        import ctypes, os
        from aoti_debug.native import core as _native
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_char_p
        _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - parent\\n", "v")
        print(libc.getenv(b"AOTI_DEBUG_RUNTIME_REGISTRY").decode(), os.getpid())
        child = os.fork()
        if child == 0:
            _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - child\\n", "v")
            os._exit(0)
        os.waitpid(child, 0)
        _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - parent2\\n", "v")
    """)
    value, pid = proc.stdout.split()
    assert re.fullmatch(rf"{pid}:0x[0-9a-f]+:6", value)   # config.h AOTI_DEBUG_REGISTRY_ABI
    r = "[TIMESTAMP] [pid PID] note - {}\n"
    assert mask(path.read_text()) == (banner("v") + r.format("parent") + banner("v")
                                      + r.format("child") + r.format("parent2"))


COPY_SRC = r"""
// A second copy of the runtime, as another artifact would carry it.
#include "aoti_debug/detail/registry.h"
extern "C" __attribute__((visibility("default"))) void copy_write(const char* dest, const char* text) {
  aoti_debug::detail::write_record(dest, text, "copy-version");
}
extern "C" __attribute__((visibility("default"))) long long copy_next_call() {
  return aoti_debug::detail::next_call_number();
}
"""


@pytest.fixture(scope="session")
def second_copy(tmp_path_factory):
    d = tmp_path_factory.mktemp("copy")
    (d / "copy.cpp").write_text(COPY_SRC)
    out = d / "libcopy.so"
    subprocess.run(["c++", "-O1", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden",
                    "-I", _native.include_dir(), str(d / "copy.cpp"), "-o", str(out)], check=True)
    return out


def test_copies_in_one_process_share_the_registry(second_copy, tmp_path):
    path = tmp_path / "shared.log"
    proc = run_child(f"""
        import ctypes
        from aoti_debug.native import core as _native
        copy = ctypes.CDLL({str(second_copy)!r})
        _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - python\\n", "py-version")
        copy.copy_write({str(path).encode()!r}, b"[2026-01-01 00:00:00.000000] [pid 1] note - copy\\n")
        copy.copy_next_call.restype = ctypes.c_longlong
        print(_native.next_call_number(), copy.copy_next_call(), _native.next_call_number())
    """)
    assert proc.stdout.split() == ["1", "2", "3"]
    assert mask(path.read_text()) == banner("py-version") + (
        "[TIMESTAMP] [pid PID] note - python\n"
        "[TIMESTAMP] [pid PID] note - copy\n")


def test_stale_registry_variable_is_ignored(tmp_path):
    path = tmp_path / "stale.log"
    proc = run_child(f"""
        import os
        from aoti_debug.native import core as _native
        _native.sink_write({str(path)!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - ok\\n", "v")
    """, AOTI_DEBUG_RUNTIME_REGISTRY="1:0x10:1")
    assert proc.returncode == 0
    assert mask(path.read_text()) == banner("v") + "[TIMESTAMP] [pid PID] note - ok\n"


# ---------------------------------------------------------------- crash trailer

def crash_child(tmp_path, body: str, files=("crash.log",)):
    paths = [str(tmp_path / f) for f in files]
    code = f"""
        import ctypes, os, signal, faulthandler
        from aoti_debug.native import core as _native
        paths = {paths!r}
        for p in paths:
            _native.sink_write(p, "[2026-01-01 00:00:00.000000] [pid 1] note - before\\n", "v")
        _native.install_crash_handler()
        _native.install_crash_handler()  # once per process, whoever asks
    """ + textwrap.indent(textwrap.dedent(body), " " * 8)
    proc = run_child(code, check=False)
    return proc, [mask((tmp_path / f).read_text()) for f in files]


BEFORE = "[TIMESTAMP] [pid PID] note - before\n"


def test_crash_trailer_segfault_names_launch_and_dies_with_sigsegv(native, tmp_path):
    proc, (text,) = crash_child(tmp_path, """
        _native.set_inflight(1, 3, "cpp_fused_relu_1", "ranker#2")
        ctypes.string_at(0)
    """)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    assert text == (banner("v") + BEFORE
                    + "[TIMESTAMP] [pid PID] crash ranker#2:1.3 cpp_fused_relu_1\n  signal: SIGSEGV\n")


def test_crash_trailer_abort_without_launch_in_flight(native, tmp_path):
    proc, (text,) = crash_child(tmp_path, """
        _native.set_inflight(2, 1, "k")
        _native.clear_inflight()
        os.abort()
    """)
    assert proc.returncode == -signal.SIGABRT
    assert text == banner("v") + BEFORE + "[TIMESTAMP] [pid PID] crash - -\n  signal: SIGABRT\n"


def test_crash_trailer_call_in_flight_goes_to_every_destination(native, tmp_path):
    proc, texts = crash_child(tmp_path, """
        _native.set_inflight(-1, 7, "mylib::op")
        os.kill(os.getpid(), signal.SIGFPE)
    """, files=("one.log", "two.log"))
    assert proc.returncode == -signal.SIGFPE
    for text in texts:
        assert text == banner("v") + BEFORE + "[TIMESTAMP] [pid PID] crash 7 mylib::op\n  signal: SIGFPE\n"


def test_crash_handler_chains_to_the_previous_handler(native, tmp_path):
    (tmp_path / "crash.log").write_text("")
    proc = run_child(f"""
        import ctypes, faulthandler
        faulthandler.enable()  # installed first: ours must hand the signal on to it
        from aoti_debug.native import core as _native
        _native.sink_write({str(tmp_path / "crash.log")!r}, "[2026-01-01 00:00:00.000000] [pid 1] note - before\\n", "v")
        _native.install_crash_handler()
        _native.set_inflight(4, 2, "triton_poi_fused_0")
        ctypes.string_at(0)
    """, check=False)
    assert proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert mask((tmp_path / "crash.log").read_text()).endswith(
        "[TIMESTAMP] [pid PID] crash 4.2 triton_poi_fused_0\n  signal: SIGSEGV\n")


def test_crash_in_other_thread_names_newest_launch(native, tmp_path):
    proc, (text,) = crash_child(tmp_path, """
        import threading
        t = threading.Thread(target=lambda: _native.set_inflight(5, 9, "from_worker"))
        t.start(); t.join()
        os.abort()  # main thread has no launch in flight: the newest one is named
    """)
    assert proc.returncode == -signal.SIGABRT
    assert text.endswith("[TIMESTAMP] [pid PID] crash 5.9 from_worker\n  signal: SIGABRT\n")


def test_the_core_stamps_its_headers_with_the_time_of_the_write(native, tmp_path):
    """A header the core formats leaves its time for the write to fill in (one
    clock read a record): what reaches the file is the time of the write, UTC."""
    import datetime
    log = str(tmp_path / "log.txt")
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    native.write_launch(log, "m", 1, 1, "k", "  origin: nodes=- source=-\n", False)
    native.write_launch(log, "m", 1, 2, "k", "", False)
    after = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with open(log) as f:
        heads = [line for line in f.read().split(f"{RULE}\n")[-1].splitlines() if line.startswith("[")]
    assert [h.split("] ", 2)[2] for h in heads] == ["launch m:1.1 k", "launch m:1.2 k"]
    stamps = [datetime.datetime.strptime(h[1:27], "%Y-%m-%d %H:%M:%S.%f") for h in heads]
    assert before <= stamps[0] <= stamps[1] <= after, (before, stamps, after)
