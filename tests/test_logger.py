"""The Python logger: levels, value kinds, destinations, integrity."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from aoti_debug.analysis.mask import mask
from conftest import BANNER, banners, clean_env, records, run_python
from test_content_hash import reference_hash

# every record here is the Python runtime's: .ci/run runs the file once more on its
# pure-Python writer (conftest's AOTID_TEST_WRITER)
pytestmark = pytest.mark.python_writer

MODEL = '''
import enum, torch
from aoti_debug import log_api

class Mode(enum.Enum):
    FAST = 1

@log_api
def scale(x, factor=2.0, *, mode=Mode.FAST, tag="t"):
    return x * factor

@log_api()
def boom(n):
    raise ValueError(f"bad n={n}")

x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
y = scale(x, 3, tag='a"b')
try:
    boom(4)
except ValueError as exc:
    print("caught", exc, flush=True)
'''

TENSOR_IN = """\
    Tensor(
      shape=(2, 3)
      stride=(3, 1)
      dtype=torch.float32
      device=cpu
      requires_grad=False
      is_contiguous=True
"""


def run_model(tmp_path, level, code=MODEL, **env):
    log = tmp_path / "log.txt"
    proc = run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=log, **env))
    return proc, mask(log.read_text()) if log.exists() else ""


def test_level_0_returns_the_function_itself():
    proc = run_python("""
        from aoti_debug import log_api
        def f(x): return x
        assert log_api(f) is f and log_api()(f) is f
        print("same")
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL=0))
    assert proc.stdout == "same\n"


def test_level_1_one_line_per_call_and_the_exception(tmp_path):
    proc, text = run_model(tmp_path, 1)
    assert proc.stdout == "caught bad n=4\n"
    assert records(text) == [
        "[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n",
        "[TIMESTAMP] [pid PID] call 2 __main__.boom thread=TID\n",
        "[TIMESTAMP] [pid PID] raise 2 __main__.boom\n  exception: ValueError: bad n=4\n",
    ]


def test_level_3_arguments_in_order_then_output(tmp_path):
    _, text = run_model(tmp_path, 3)
    assert records(text) == [
        "[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n"
        "  arg[0] x:\n" + TENSOR_IN + "    )\n"
        "  arg[1] factor: 3\n"
        '  kwarg tag: "a\\"b"\n'
        "  default mode: Mode.FAST\n",
        "[TIMESTAMP] [pid PID] return 1 __main__.scale\n"
        "  output:\n" + TENSOR_IN + "    )\n",
        "[TIMESTAMP] [pid PID] call 2 __main__.boom thread=TID\n  arg[0] n: 4\n",
        "[TIMESTAMP] [pid PID] raise 2 __main__.boom\n  exception: ValueError: bad n=4\n",
    ]


def test_level_5_adds_statistics(tmp_path):
    _, text = run_model(tmp_path, 5)
    recs = records(text)
    assert recs[0].startswith("[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n  arg[0] x:\n" + TENSOR_IN
                              + "      min=0.000000\n      max=5.000000\n      mean=2.500000\n"
                              "      nan_count=0\n      inf_count=0\n"
                              f"      hash={reference_hash(torch.arange(6.0)):016x}\n    )\n")
    assert "      min=0.000000\n      max=15.000000\n      mean=7.500000\n" in recs[1]


def test_every_value_kind_is_rendered(tmp_path):
    code = '''
import enum, torch
from aoti_debug import log_api
class Color(enum.Enum):
    RED = "r"
class Thing: pass
@log_api
def f(*args, **kwargs):
    return None
f(None, True, -7, 0.1, float("nan"), float("-inf"), 1e-7, 2.5e20, "x\\ty\\x01", torch.float16,
  torch.device("cpu"), Color.RED, [1, (2, 3)], (5,), (), torch.Size([4, 5]), {"a": 1, 2: None},
  Thing(), extra=[torch.zeros(1, dtype=torch.int64), 3], d={"mask": torch.ones(2, dtype=torch.bool)})
'''
    _, text = run_model(tmp_path, 3, code)
    assert records(text)[0] == (
        "[TIMESTAMP] [pid PID] call 1 __main__.f thread=TID\n"
        "  arg[0] args[0]: None\n"
        "  arg[1] args[1]: True\n"
        "  arg[2] args[2]: -7\n"
        "  arg[3] args[3]: 0.100000\n"
        "  arg[4] args[4]: nan\n"
        "  arg[5] args[5]: -inf\n"
        "  arg[6] args[6]: 1.000000e-07\n"
        "  arg[7] args[7]: 2.500000e+20\n"
        '  arg[8] args[8]: "x\\ty\\x01"\n'
        "  arg[9] args[9]: torch.float16\n"
        "  arg[10] args[10]: cpu\n"
        "  arg[11] args[11]: Color.RED\n"
        "  arg[12] args[12]: [1, (2, 3)]\n"
        "  arg[13] args[13]: (5,)\n"
        "  arg[14] args[14]: ()\n"
        "  arg[15] args[15]: (4, 5)\n"
        '  arg[16] args[16]: {"a": 1, 2: None}\n'
        "  arg[17] args[17]: <Thing>\n"
        "  kwarg extra:\n"
        "    list(len=2)\n"
        "      [0]:\n"
        "        Tensor(\n"
        "          shape=(1,)\n"
        "          stride=(1,)\n"
        "          dtype=torch.int64\n"
        "          device=cpu\n"
        "          requires_grad=False\n"
        "          is_contiguous=True\n"
        "        )\n"
        "      [1]: 3\n"
        "  kwarg d:\n"
        "    dict(len=1)\n"
        '      ["mask"]:\n'
        "        Tensor(\n"
        "          shape=(2,)\n"
        "          stride=(1,)\n"
        "          dtype=torch.bool\n"
        "          device=cpu\n"
        "          requires_grad=False\n"
        "          is_contiguous=True\n"
        "        )\n")
    # the output record of a None-returning call
    assert records(text)[1] == "[TIMESTAMP] [pid PID] return 1 __main__.f\n  output: None\n"


def test_stdout_and_stderr_destinations():
    code = MODEL.replace('print("caught", exc, flush=True)', 'pass')
    out = run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=1))
    assert [r for r in records(mask(out.stdout))] == [
        "[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n",
        "[TIMESTAMP] [pid PID] call 2 __main__.boom thread=TID\n",
        "[TIMESTAMP] [pid PID] raise 2 __main__.boom\n  exception: ValueError: bad n=4\n"]
    assert out.stderr == ""
    err = run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=1, AOTI_DEBUG_LOGDEST="stderr"))
    assert err.stdout == ""
    assert len(banners(err.stderr)) == 1 and len(records(err.stderr)) == 3


def test_pid_substitution_and_missing_directory_is_created(tmp_path):
    dest = tmp_path / "new" / "dir" / "log_%i.txt"
    proc = run_python(MODEL + "\nimport os; print(os.getpid())",
                      env=clean_env(AOTI_DEBUG_LOGLEVEL=1, AOTI_DEBUG_LOGDEST=dest))
    pid = proc.stdout.split()[-1]
    path = tmp_path / "new" / "dir" / f"log_{pid}.txt"
    text = path.read_text()
    assert f"[pid {pid}] call 1 __main__.scale thread=" in text
    assert len(banners(text)) == 1


def test_unwritable_destination_falls_back_to_stderr_with_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_python(MODEL, env=clean_env(AOTI_DEBUG_LOGLEVEL=1,
                                          AOTI_DEBUG_LOGDEST=blocker / "log.txt"))
    assert proc.stdout == "caught bad n=4\n"
    recs = records(mask(proc.stderr))
    assert recs[0] == ("[TIMESTAMP] [pid PID] note - settings\n"
                       f"  AOTI_DEBUG_LOGDEST='{blocker}/log.txt' is not valid: cannot open "
                       f"{blocker}/log.txt (Not a directory); keeping stderr\n")
    assert recs[1:] == ["[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n",
                        "[TIMESTAMP] [pid PID] call 2 __main__.boom thread=TID\n",
                        "[TIMESTAMP] [pid PID] raise 2 __main__.boom\n  exception: ValueError: bad n=4\n"]


@pytest.mark.parametrize("name,value,message", [
    ("AOTI_DEBUG_LOGLEVEL", "abc", "AOTI_DEBUG_LOGLEVEL='abc' is not valid: expected one of 0, 1, 3, 5, 10; keeping 0"),
    ("AOTI_DEBUG_LOGLEVEL", "7", "AOTI_DEBUG_LOGLEVEL='7' is not valid: expected one of 0, 1, 3, 5, 10; keeping 0"),
])
def test_bad_level_warns_once_and_logs_nothing(name, value, message):
    # level 0 (the default kept) writes no record: one line on stderr
    proc = run_python(MODEL, env=clean_env(**{name: value}))
    assert proc.stdout == "caught bad n=4\n"
    assert [l for l in proc.stderr.splitlines() if "aoti-debug" in l] == [
        f"aoti-debug settings: {message}"]


def test_bad_filter_at_run_time_is_a_note_and_every_call_is_still_logged():
    proc = run_python(MODEL, env=clean_env(AOTI_DEBUG_LOGLEVEL=1, AOTI_DEBUG_KERNELS="scale,"))
    assert BANNER.sub("", mask(proc.stdout)) == (
        "[TIMESTAMP] [pid PID] note - settings\n"
        "  AOTI_DEBUG_KERNELS='scale,' is not valid: expected comma-separated globs (*, ?, [...]), "
        "none of them empty, every [ closed by ]; keeping *\n"
        "[TIMESTAMP] [pid PID] call 1 __main__.scale thread=TID\n"
        "[TIMESTAMP] [pid PID] call 2 __main__.boom thread=TID\n"
        "[TIMESTAMP] [pid PID] raise 2 __main__.boom\n  exception: ValueError: bad n=4\n"
        "caught bad n=4\n")


def test_eight_threads_two_hundred_calls_each_into_one_file(tmp_path):
    code = '''
import threading, torch
from aoti_debug import log_api
@log_api
def add(a, b):
    return a + b
t = torch.ones(3, 4)
def worker(k):
    for i in range(200):
        add(t, i)
threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
[th.start() for th in threads]; [th.join() for th in threads]
'''
    _, text = run_model(tmp_path, 5, code)
    recs = records(text)
    assert len(banners(text)) == 1
    calls = [r for r in recs if r.startswith("[TIMESTAMP] [pid PID] call ")]
    returns = [r for r in recs if r.startswith("[TIMESTAMP] [pid PID] return ")]
    assert len(calls) == len(returns) == 1600 and len(recs) == 3200
    numbers = sorted(int(r.split()[4]) for r in calls)
    assert numbers == list(range(1, 1601))
    for r in calls:
        assert r.count("\n") == 17 and "      mean=1.000000\n" in r, r
    for r in returns:
        assert r.count("\n") == 16 and "      nan_count=0\n      inf_count=0\n      hash=" in r, r


def test_two_processes_append_to_one_file(tmp_path):
    log = tmp_path / "shared.log"
    code = '''
import torch
from aoti_debug import log_api
@log_api
def f(x):
    return x
for _ in range(300):
    f(torch.zeros(2, 2))
'''
    env = clean_env(AOTI_DEBUG_LOGLEVEL=3, AOTI_DEBUG_LOGDEST=log)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    text = log.read_text()
    assert len(banners(text)) == 2
    recs = records(mask(text))
    assert len(recs) == 1200
    assert all(r.count("\n") in (10,) for r in recs), [r for r in recs if r.count("\n") != 10][:2]


def test_abort_inside_a_logged_call_keeps_its_input_record(tmp_path):
    code = '''
import os, torch
from aoti_debug import log_api
@log_api
def crash(x, why):
    os.abort()
crash(torch.full((2,), 7.0), "planted")
'''
    log = tmp_path / "log.txt"
    proc = run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=5, AOTI_DEBUG_LOGDEST=log), check=False)
    assert proc.returncode == -signal.SIGABRT
    recs = records(mask(log.read_text()))
    assert recs[0].startswith("[TIMESTAMP] [pid PID] call 1 __main__.crash thread=TID\n  arg[0] x:\n    Tensor(\n")
    assert "      min=7.000000\n      max=7.000000\n      mean=7.000000\n" in recs[0]
    assert recs[0].endswith('  arg[1] why: "planted"\n')
