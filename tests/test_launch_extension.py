"""torch.compile's compiled launch functions (native/launch_ext.py,
cpp_runtime/src/pylaunch.cpp): the records they write are those of
launches.py's own functions byte for byte, in every case those handle; a
build that fails falls back to those with one warning; a build is made once
per cache."""

import os
import re
import shutil
import subprocess

import pytest

from aoti_debug.analysis.mask import mask
from conftest import WRITER, clean_env, records, run_python

pytestmark = pytest.mark.skipif(WRITER == "python", reason="the extension writes through the compiled core, "
                                "which AOTID_TEST_WRITER=python has not")

# Every case Run.before / Run.after handle, through the functions the generated
# wrapper calls (Model.calls): CPU tensors (a parameter, a view, integers), every
# scalar kind, a string, a list, a negative view, an int beyond int64, a tensor
# subclass, a second site the kernel filter leaves out (AOTI_DEBUG_KERNELS), a
# site launched again, a launch of more values and dimensions than the
# extension stages in place (41 values, 320 sizes and strides) with an int of
# more than one digit; then what each path wrote: (records the extension wrote,
# records it handed to the Run) or None.
CASES = r"""
import os, sys, torch
from aoti_debug.runtime.launches import Model, Site
class Sub(torch.Tensor):
    pass
m = Model("cases", int(os.environ["LEVEL"]), "", "off", False, torch.__version__)
site = Site("cpp_fused_kinds_0", "mul", "m.py:3", "fc", (("weight", "in"), ("buf0", "inout"), ("idx", "in"),
            ("view", "in"), ("none", "in"), ("n", "in"), ("alpha", "in"), ("flag", "in"), ("buf1", "out")))
other = Site("cpp_fused_other_1", "add", "m.py:5", "fc", (("buf2", "inout"),))
wide = Site("cpp_fused_kinds_wide_2", "cat", "m.py:7", "fc", tuple((f"buf{3 + i}", "in") for i in range(40))
            + (("big", "in"),))
parts = [torch.full((1, 2, 1, 2), float(i)) for i in range(40)]
weight = torch.nn.Parameter(torch.linspace(-1, 1, 6).reshape(2, 3))
buf0, idx, buf1 = torch.arange(6.0), torch.tensor([3, -2, 7]), torch.zeros(2, 2)
view = torch.arange(12.0).reshape(3, 4).t()[1:]
for r in range(2):
    run = m.begin_run(("w", "x"), (weight, buf0))
    launch, launch_end = m.calls
    launch(run, site, weight, buf0, idx, view, None, 7, 0.25, True, None)
    launch_end(run, site, None, buf0, None, None, None, None, None, None, buf1)
    launch(run, other, torch.ones(3))
    launch_end(run, other, torch.ones(3))
    launch(run, site, "text", [1, 2], torch.ones(3).neg()._neg_view(), 2 ** 70, -5, 1.5, False, None, None)
    launch_end(run, site, None, torch.ones(3).as_subclass(Sub), None, None, None, None, None, None, torch.ones(1))
    launch(run, site, weight, buf0, idx, view, None, -7, float("inf"), False, None)
    launch_end(run, site, None, buf0, None, None, None, None, None, None, buf1)
    launch(run, wide, *parts, 2 ** 40)
    launch_end(run, wide, *parts, -(2 ** 40))
    run.end(("y",), (buf1,))
from aoti_debug.native import launch_ext
print(launch_ext._module.counts() if launch_ext._module is not None else None)
"""


def run_cases(tmp_path, name, level, **env):
    log = tmp_path / f"{name}.log"
    proc = run_python(CASES, env=clean_env(LEVEL=level, AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=log,
                                           AOTI_DEBUG_KERNELS="*kinds*", **env))
    return mask(log.read_text()), proc.stdout.strip().splitlines()[-1], proc.stderr


@pytest.mark.parametrize("level", ["1", "3", "5"])
def test_the_extension_writes_the_records_launches_py_writes(tmp_path, level):
    """Byte for byte the records of launches.py's functions (ctypes), and of
    the Python writer: each record the core renders is the extension's; a
    value it does not render as format.py does (a string, a list, a negative
    view, an int beyond int64, a subclass) hands that record to the Run, as
    does the filter's first look at a site the filter leaves out."""
    ext, counts, _ = run_cases(tmp_path, "ext", level, AOTI_DEBUG_LAUNCH_EXTENSION="1")
    slow, none, _ = run_cases(tmp_path, "ctypes", level, AOTI_DEBUG_LAUNCH_EXTENSION="0")
    assert ext == slow and none == "None"
    heads = [r.splitlines()[0] for r in records(ext)]
    ids = [f"{kind} cases:{r}.{k} {kernel}" for r in (1, 2)
           for k, kernel in ((1, "cpp_fused_kinds_0"), (3, "cpp_fused_kinds_0"), (4, "cpp_fused_kinds_0"),
                             (5, "cpp_fused_kinds_wide_2"))
           for kind in (("launch", "launch-end") if level != "1" else ("launch",))]
    assert [h for h in heads if " launch" in h] == ["[TIMESTAMP] [pid PID] " + i for i in ids]
    # per run: the filtered-out site's launch handed over (the Run marks it in flight
    # without a record); at level 3 and 5 the string's launch and the subclass's
    # launch-end too
    handed = {"1": 1, "3": 3, "5": 3}[level]
    assert counts == str((2 * (10 - handed), 2 * handed))


BROKEN = r"""
import torch
from aoti_debug.native import launch_ext
flags = launch_ext.flags
launch_ext.flags = lambda: flags() + ("-include", "/nonexistent/aotid-missing.h")
""" + CASES


def test_a_failed_build_falls_back_with_one_warning(tmp_path):
    """A build that fails (here: a header the compiler cannot find) is said once,
    with the compiler's error, and the records are launches.py's, whole."""
    slow, _, _ = run_cases(tmp_path, "ctypes", "3", AOTI_DEBUG_LAUNCH_EXTENSION="0")
    log = tmp_path / "broken.log"
    proc = run_python(BROKEN, env=clean_env(LEVEL="3", AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=log,
                                            AOTI_DEBUG_KERNELS="*kinds*", AOTI_DEBUG_LAUNCH_EXTENSION="1"))
    assert mask(log.read_text()) == slow and proc.stdout.strip() == "None"
    said = [line for line in proc.stderr.splitlines() if "aoti-debug" in line]
    assert len(said) == 2, proc.stderr
    assert re.fullmatch(r"aoti-debug: building torch\.compile's launch extension for torch \S+ in \S+ "
                        r"\(once per torch release; 15 s to 30 s measured on 2 cores\)", said[0]), said
    assert said[1].endswith(
        "RuntimeWarning: aoti-debug: torch.compile's launch extension unavailable (building src/pylaunch.cpp "
        "failed: <command-line>: fatal error: /nonexistent/aotid-missing.h: No such file or directory); its "
        "launch records are written through ctypes instead (the same records, slower)"), said


@pytest.mark.slow
def test_a_cache_builds_the_extension_once(tmp_path):
    """The first process that needs the extension builds it into the cache (saying so);
    the next one loads it from there."""
    from aoti_debug.native import core
    cache = tmp_path / "cache"
    cache.mkdir()
    built = core.build()   # the core from the session's cache: only the extension is built here
    shutil.copy(built, cache / built.name)
    said, files = [], []
    for name in ("first", "second"):
        log, counts, stderr = run_cases(tmp_path, name, "3", AOTI_DEBUG_CACHE_DIR=cache,
                                        AOTI_DEBUG_LAUNCH_EXTENSION="1")
        said.append([line for line in stderr.splitlines() if line.startswith("aoti-debug")])
        files.append(sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.iterdir()
                            if p.name.startswith("aotid_pylaunch_")))
        assert counts == "(14, 6)"
    assert len(said[0]) == 2 and said[0][0].startswith("aoti-debug: building torch.compile's launch extension ")
    assert said[0][1].startswith(f"aoti-debug: built {cache}{os.sep}aotid_pylaunch_")
    assert said[1] == [] and files[0] == files[1] and len(files[0]) == 1


# The core as one built from other sources would answer: its aotid_py_record_abi
# says another layout of the Values the extension hands it (detail/py_record.h).
OTHER_CORE = r"""
import ctypes
from aoti_debug.native import core
lib = core.lib()
print(hex(lib.aotid_py_record_abi()))
other_abi = ctypes.CFUNCTYPE(ctypes.c_uint64)(lambda: lib.aotid_py_record_abi() ^ 1)
class OtherCore:
    def __getattr__(self, name):
        return other_abi if name == "aotid_py_record_abi" else getattr(lib, name)
core.lib = lambda: OtherCore()
""" + CASES


def test_a_core_of_another_record_abi_is_refused_with_one_warning(tmp_path):
    """The extension hands the core the shim's own Value structs: a core that
    reports another layout of them is not used (a struct read by another
    layout would be misread); the wrapper keeps launches.py's functions,
    said once, and the records are theirs, whole."""
    slow, _, _ = run_cases(tmp_path, "ctypes", "3", AOTI_DEBUG_LAUNCH_EXTENSION="0")
    log = tmp_path / "other.log"
    proc = run_python(OTHER_CORE, env=clean_env(LEVEL="3", AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=log,
                                                AOTI_DEBUG_KERNELS="*kinds*", AOTI_DEBUG_LAUNCH_EXTENSION="1"))
    abi, counts = proc.stdout.strip().splitlines()
    assert mask(log.read_text()) == slow and counts == "None"
    said = [line for line in proc.stderr.splitlines() if "aoti-debug" in line]
    other = f"{int(abi, 16) ^ 1:x}"
    assert len(said) == 1 and said[0].endswith(
        f"RuntimeWarning: aoti-debug: torch.compile's launch extension unavailable (RuntimeError: the compiled "
        f"core's record ABI is {other}, this extension's {abi[2:]} (detail/py_record.h): they were built from "
        "different versions of aoti-debug); its launch records are written through ctypes instead (the same "
        "records, slower)"), proc.stderr


# A run's texts as the compiled core keeps them: made by the core, counted and
# freed through a stand-in for the loaded library.
RUN_TEXTS = r"""
import gc, os, torch
from aoti_debug.native import core, launch_ext
from aoti_debug.runtime import launches
from aoti_debug.runtime.launches import Model, Site
if os.environ["AOTI_DEBUG_LAUNCH_EXTENSION"] == "1":
    launch_ext.build()   # so that the run below uses it
core.lib()
real = core._held  # the handle a run's calls go through (ctypes.PyDLL: they keep the GIL)
made, freed = [], []
class Counting:
    def __getattr__(self, name):
        return getattr(real, name)
    def aotid_record_texts(self, *texts):
        made.append(real.aotid_record_texts(*texts))
        return made[-1]
    def aotid_record_texts_free(self, at):
        freed.append(at)
        real.aotid_record_texts_free(at)
core._held = Counting()
m = Model("texts", 3, "", "off", False, torch.__version__)
site = Site("cpp_fused_t_0", "add", "m.py:1", "", (("buf0", "inout"),))
for r in range(2):
    run = m.begin_run(("x",), (torch.ones(2),))
    launch, launch_end = m.calls
    for _ in range(3):
        launch(run, site, torch.ones(2))
        launch_end(run, site, torch.ones(2))
    texts = list(run._texts)
    run.end(("y",), (torch.ones(2),))
    del run
    gc.collect()
print("ctypes" if m.calls[0] is launches.launch else "extension", len(made), len(freed), freed == made[:len(freed)], texts[:3] == [b"/dev/null", b"texts", torch.__version__.encode()])
"""


def test_a_runs_texts_are_made_once_in_the_core_and_freed_with_the_run(tmp_path):
    """The destination and model name a record takes are the core's own
    strings, made once a run (core.record_texts, aotid_record_texts) rather
    than from C strings each record, and freed when the run's texts go."""
    # one a run, made for its `run` record (with its facts) and kept for its
    # launches; the extension holds the last run's until another run's come
    for path, expect in (("1", "extension 2 1 True True"), ("0", "ctypes 2 2 True True")):
        proc = run_python(RUN_TEXTS, env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST="/dev/null",
                                                   AOTI_DEBUG_LAUNCH_EXTENSION=path))
        assert proc.stdout.strip().splitlines()[-1] == expect, (path, proc.stdout, proc.stderr)


# What WAITING and RING_BUSY do once their `launches` (counting into `done`) are
# defined: run them on a thread, and print once it has made no progress for 0.5 s
# (it waits) while the main thread runs; `drain` reads what the FIFO holds.
STALLED = r"""
worker = threading.Thread(target=launches)
worker.start()
seen, still = -1, 0
while still < 5:  # the launching thread has made no progress for 0.5 s: it waits
    time.sleep(0.1)
    still, seen = (still + 1 if done[0] == seen else 0), done[0]
print("waiting after", seen, "of", n, "launches, main thread running")
got = bytearray()
def drain():
    try:
        while True:
            got.extend(os.read(reader, 1 << 16))  # the writers keep it open: no end of file
    except BlockingIOError:
        pass
"""

# A thread launching N times at level 3 while its write must wait: on a FIFO
# destination nobody reads ("pipe"), or (to a regular file) on the process lock
# that another thread holds while its own write waits on that FIFO ("lock").
# The main thread must run meanwhile (the GIL released while waiting); then it
# drains the FIFO and everything is written.
WAITING = r"""
import os, threading, time, torch
from aoti_debug.native import core
from aoti_debug.native import launch_ext
from aoti_debug.runtime.launches import Model, Site
fifo, mode, n = os.environ["FIFO"], os.environ["MODE"], 400
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there to open it, reading nothing yet
site = Site("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"), ("arg0_1", "in")),
            "  source-line: m.py:12 nodes=add\n")
buf0, arg0_1 = torch.zeros(16), torch.ones(16)
m = Model("gil", 3, "", "off", False, torch.__version__)
run = m.begin_run(("x",), (arg0_1,))
launch, launch_end = m.calls
assert (launch_ext._module is not None) == (os.environ.get("AOTI_DEBUG_LAUNCH_EXTENSION") != "0")
if mode == "lock":  # a write of 256 KiB to the FIFO holds the process lock until it is read
    other = threading.Thread(target=core.sink_write, args=(fifo, "x" * (256 << 10) + "\n"))
    other.start()
    time.sleep(0.3)
done = [0]
def launches():
    for _ in range(n):
        launch(run, site, buf0, arg0_1)
        launch_end(run, site, buf0, None)
        done[0] += 1
""" + STALLED + r"""while worker.is_alive() or (mode == "lock" and other.is_alive()):
    drain()
    worker.join(0.02)
drain()
print("written", got.count(b"] launch gil:1."), got.count(b"] launch-end gil:1."), b"x" * (256 << 10) in got)
print(launch_ext._module.counts() if launch_ext._module is not None else (800, 0))
"""

# The launch functions, the extension's or launches.py's through ctypes (AOTI_DEBUG_LAUNCH_EXTENSION=0)
PATHS = {"extension": {}, "ctypes": {"AOTI_DEBUG_LAUNCH_EXTENSION": "0"}}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mode", ["pipe", "lock"])
def test_a_launch_waiting_on_its_write_lets_other_python_threads_run(tmp_path, mode, path):
    """The write of a record waits (a full FIFO, or the process lock another
    thread holds while writing one): the GIL is released meanwhile, so the
    main thread runs, drains the FIFO, and every record is written.  On either
    path: both hold the GIL through a record but where it waits."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    log = tmp_path / "gil.log"
    dest = fifo if mode == "pipe" else log
    proc = run_python(WAITING, timeout=120, env=clean_env(FIFO=fifo, MODE=mode, AOTI_DEBUG_LOGLEVEL="3",
                                                        AOTI_DEBUG_LOGDEST=dest, **PATHS[path]))
    lines = proc.stdout.strip().splitlines()
    waited = re.fullmatch(r"waiting after (\d+) of 400 launches, main thread running", lines[-3])
    assert waited and int(waited.group(1)) < 400, proc.stdout
    if mode == "pipe":
        assert lines[-2] == "written 400 400 False"
    else:
        assert int(waited.group(1)) == 0  # the lock was taken before its first launch
        assert lines[-2] == "written 0 0 True"
        text = log.read_text()
        assert text.count("] launch gil:1.") == 400 and text.count("] launch-end gil:1.") == 400
    assert lines[-1] == "(800, 0)"  # every record the extension's own



# A thread launching N times at level 0 with the black box on, while another
# thread's dump holds the ring: a dump past AOTI_DEBUG_DUMP_MAX_SIZE_GB writes
# its note with the ring held, and the note waits on the process lock that a
# third thread holds while its write to a FIFO nobody reads waits.  The
# launching thread must wait for the ring with the GIL released, so that the
# main thread runs, sees it wait, drains the FIFO and everything finishes.
RING_BUSY = r"""
import os, threading, time, torch
from aoti_debug.native import core
from aoti_debug.runtime.launches import Model, Site
fifo, n = os.environ["FIFO"], 200
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there to open it, reading nothing yet
site = Site("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"),), "")
buf0 = torch.zeros(1 << 16)  # 256 KiB: its copy in the dump is past the limit
m = Model("busy", 0, "", "off", False, torch.__version__, blackbox=64)
run = m.begin_run(("x",), (buf0,))
filler = threading.Thread(target=core.sink_write, args=(fifo, "x" * (256 << 10) + "\n"))
filler.start()
time.sleep(0.3)
dumper = threading.Thread(target=core.blackbox_fired, args=("planted", b"busy", 1, 0, 1, 0, ()))
dumper.start()
folder = os.path.join(os.environ["AOTI_DEBUG_DUMP_DIR"], f"{os.getpid()}-blackbox")
deadline = time.monotonic() + 60
while not os.path.isdir(folder) and time.monotonic() < deadline:  # made with the ring held
    time.sleep(0.01)
print(os.getpid(), "dumping", os.path.isdir(folder), dumper.is_alive())
done = [0]
def launches():
    for _ in range(n):
        run.launch += 1
        if run.checks: run.checks_before(site, (buf0,))
        if run.checks: run.checks_after(site, (buf0,))
        done[0] += 1
""" + STALLED + r"""while worker.is_alive() or filler.is_alive() or dumper.is_alive():
    drain()
    worker.join(0.02)
drain()
print("launched", done[0], b"x" * (256 << 10) in got)
print(got[got.rfind(b"\n[", 0, got.index(b"] note - flight-recorder")) + 1:].decode())  # after the banner
"""


def test_a_launch_waiting_for_the_black_box_ring_lets_other_python_threads_run(tmp_path):
    """Another thread's dump holds the black box's ring for as long as its folder
    takes to write (here: until a note it writes can go out): a launch that
    would append to the ring meanwhile releases the GIL first, so the process's
    other Python threads run.  With the GIL held, the main thread could not
    drain the FIFO the note waits behind, and the process would hang."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    dumps = tmp_path / "dumps"
    proc = run_python(RING_BUSY, timeout=120, env=clean_env(
        FIFO=fifo, AOTI_DEBUG_LOGDEST=fifo, AOTI_DEBUG_DUMP_DIR=dumps, AOTI_DEBUG_BLACKBOX_MAX_MB=1,
        AOTI_DEBUG_DUMP_MAX_SIZE_GB=0.000977))  # room for the 1 MiB ring, not for the run's 256 KiB input too
    lines = proc.stdout.splitlines()
    pid = lines[0].split()[0]
    assert lines[:3] == [f"{pid} dumping True True", "waiting after 0 of 200 launches, main thread running",
                         "launched 200 True"], proc.stdout + proc.stderr
    assert mask("\n".join(lines[3:])) == (
        "[TIMESTAMP] [pid PID] note - flight-recorder\n"
        "  AOTI_DEBUG_DUMP_MAX_SIZE_GB=0.000977 would be exceeded; no more dumps, logging goes on at level 5\n"
        "[TIMESTAMP] [pid PID] note - blackbox\n"
        f"  planted: the black box is in '{dumps / (pid + '-blackbox')}': the last 0 launches of 1 run\n")
# Ten launches of one site at LEVEL to AOTI_DEBUG_LOGDEST, its tensor of NUMEL
# elements, after one (the site's handle, the run's texts), as the generated
# wrapper makes them, with the black box on where BOX is set; what the
# extension wrote ("-" where it is not loaded: launches.py's path, or level 0
# from the start) and how often the GIL was
# released during the ten, then during the run's end and the next run's
# start (tests/gil_releases.cpp, preloaded).
RELEASES = r"""
import ctypes, os, torch
from aoti_debug.native import launch_ext
from aoti_debug.runtime.launches import Model, Site
releases = ctypes.PyDLL(None).gil_releases  # a PyDLL call keeps the GIL
site = Site("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"),), "")
buf0 = torch.zeros(int(os.environ["NUMEL"]))
m = Model("gil", int(os.environ["AOTI_DEBUG_LOGLEVEL"]), "", "off", False, torch.__version__,
          blackbox=int(os.environ.get("BOX", "0")))
run = m.begin_run(("x",), (buf0,))
launch, launch_end = m.calls
def one():
    if run.level: launch(run, site, buf0)
    else: run.launch += 1
    if run.checks: run.checks_before(site, (buf0,))
    if run.level: launch_end(run, site, buf0)
    if run.checks: run.checks_after(site, (buf0,))
one()
before = releases()
for _ in range(10):
    one()
during = releases() - before
before = releases()
if run.level >= 3: run.end(("y",), (buf0,))
run = m.begin_run(("x",), (buf0,))
print(launch_ext._module.counts() if launch_ext._module is not None else "-", during, releases() - before)
"""


@pytest.fixture(scope="module")
def gil_releases(tmp_path_factory):
    """tests/gil_releases.cpp built, to preload."""
    from aoti_debug.native import build
    out = tmp_path_factory.mktemp("gil") / "gil_releases.so"
    subprocess.run([build._need_compiler(), "-shared", "-fPIC", "-O1", "-o", str(out),
                    os.path.join(os.path.dirname(__file__), "gil_releases.cpp"), "-ldl"], check=True)
    return str(out)


# the file systems local_file_system (sink-inl.h) knows, by `stat -f -c %t`
LOCAL_FS = {"ef53", "58465342", "9123683e", "1021994", "858458f6", "794c7630", "f2f52010"}


@pytest.mark.parametrize("path", ["extension", "ctypes"])
def test_the_gil_is_released_only_where_a_record_waits_or_reads_long(tmp_path, path, gil_releases):
    """On either path: held for a destination nothing can keep waiting
    (/dev/null, a file on a local file system) and for a level-5 record of
    small tensors; released around each record to a FIFO (its reader may not
    read), and around a level-5 record whose statistics read more than 2**24
    elements.  Every release of the process counts, torch's bindings' too
    (Tensor.is_neg() releases it)."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # room for every record: 64 KiB
    wrote = "(22, 0)" if path == "extension" else "-"  # the extension's: every record its own

    def releases(dest, level, numel=16, **box):
        proc = run_python(RELEASES, env=clean_env(AOTI_DEBUG_LOGDEST=dest, AOTI_DEBUG_LOGLEVEL=level, NUMEL=numel,
                                                  LD_PRELOAD=gil_releases, AOTI_DEBUG_DUMP_DIR=tmp_path / "dumps",
                                                  **box, **PATHS[path]))
        return proc.stdout.strip()

    try:
        assert releases(os.devnull, "3") == f"{wrote} 0 0"
        assert releases(os.devnull, "1") == f"{wrote} 0 0"  # a launch-end counts, writing nothing
        assert releases(os.devnull, "5") == f"{wrote} 0 0"
        assert releases(os.devnull, "5", numel=1 << 24) == f"{wrote} 0 0"
        # the launches' records, then the run-end record and the next run's, each of the large tensor
        assert releases(os.devnull, "5", numel=(1 << 24) + 1) == f"{wrote} 20 2"
        # the black box's copies too, at any level: a run's inputs, a launch's
        assert releases(os.devnull, "0", BOX="64") == "- 0 0"
        for level in ("1", "3"):
            assert releases(os.devnull, level, BOX="64") == f"{wrote} 0 0", level
        assert releases(os.devnull, "0", numel=(1 << 24) + 1, BOX="64") == "- 10 1"
        assert releases(fifo, "3") == f"{wrote} 20 2"  # the run-end and run records
        assert releases(fifo, "1") == f"{wrote} 10 1"  # the run record
        fs = subprocess.run(["stat", "-f", "-c", "%t", str(tmp_path)], capture_output=True, text=True).stdout
        if fs.strip() in LOCAL_FS:
            assert releases(tmp_path / "gil.log", "3") == f"{wrote} 0 0"
    finally:
        os.close(reader)

