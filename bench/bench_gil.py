"""A launch's records beside another Python thread that always wants the GIL.

    python bench/bench_gil.py [--launches 20000]

torch.compile's launch functions at level 3 to /dev/null (bench_launch.py's
site: two float32 tensors of 16 elements, a `launch` and a `launch-end`
record), in a loop at module level, first alone, then with a second thread
spinning in Python.  Sharing the GIL fairly costs the loop about 2x: each
thread gets it for a switch interval in turn.  A record that releases the
GIL hands it to the spinning thread, and waits to get it back (up to a
switch interval, 5 ms).  Both paths, the launch extension and launches.py's
through ctypes (its launch's calls through ctypes.PyDLL, native/core.py),
release it only where the record would wait (sink-inl.h write_record's
WaitHooks); a ctypes.CDLL call would release it every call.  Prints us per launch, the
median of 3 processes each, and each path's busy/alone ratio.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_launch import SITE  # noqa: E402

LOOP = r"""
import sys, threading, time, torch
from aoti_debug.runtime import launches
from aoti_debug.runtime.launches import Model, Site
n, busy = int(sys.argv[1]), sys.argv[2] == "busy"
model = Model("bench", 3, "", "off", False, torch.__version__)
""" + SITE + r"""run = model.begin_run(("x",), (arg0_1,))
launch, launch_end = model.calls
def spin():
    while True:
        pass
if busy:
    threading.Thread(target=spin, daemon=True).start()
t0 = time.perf_counter_ns()
for _ in range(n):
    launch(run, site, buf0, arg0_1)
    launch_end(run, site, buf0, None)
print("ctypes" if model.calls[0] is launches.launch else "extension", (time.perf_counter_ns() - t0) / n / 1000)
"""


def per_launch(path: str, busy: bool, n: int) -> float:
    env = dict(os.environ, AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST="/dev/null", PYTHONPATH=os.path.dirname(HERE),
               AOTI_DEBUG_LAUNCH_EXTENSION="1" if path == "extension" else "0")
    got = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", LOOP, str(n), "busy" if busy else "alone"], env=env,
                             capture_output=True, text=True, check=True)
        used, us = out.stdout.split()
        if used != path:
            raise SystemExit(f"the loop ran on {used}, not {path}: {out.stderr}")
        got.append(float(us))
    return statistics.median(got)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=20_000)
    n = parser.parse_args().launches
    print(f"level 3 to /dev/null, us per launch ({n} launches a loop; median of 3 processes):")
    for path in ("extension", "ctypes"):
        alone, busy = per_launch(path, False, n), per_launch(path, True, n)
        print(f"  {path:9}  alone {alone:10.3f}  beside a busy thread {busy:10.3f}  ratio {busy / alone:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
