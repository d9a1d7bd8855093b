"""Per-launch cost of the compiled-in C++ shim, side by side in one run.

    python bench/bench_launch.py

Builds bench_launch.cpp once (-O1, as Inductor builds wrappers) and times a
loop of launches: without instrumentation, instrumented and switched off at
run time (level 0, target <= 5 ns over the plain loop), and at level 1
writing one flushed record per launch to a file (target <= 2 us) and to
/dev/null (the same system call, without the file system behind it).
"""

import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main() -> int:
    from aoti_debug.native.core import include_dir
    work = tempfile.mkdtemp(prefix="aoti-debug-bench-")
    exe = os.path.join(work, "bench_launch")
    subprocess.run(["c++", "-std=c++17", "-O1", "-DNDEBUG", "-I", include_dir(),
                    os.path.join(HERE, "bench_launch.cpp"), "-o", exe, "-lpthread"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
    log = os.path.join(work, "bench.log")

    def run(n, instrumented, **extra):
        out = subprocess.run([exe, str(n), "1" if instrumented else "0"], env=dict(env, **extra),
                             capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    rows = {"plain": [], "level 0": [], "level 1 (file)": [], "level 1 (/dev/null)": []}
    for _ in range(5):
        rows["plain"].append(run(20_000_000, False))
        rows["level 0"].append(run(20_000_000, True, AOTI_DEBUG_LOGLEVEL="0"))
        rows["level 1 (file)"].append(run(200_000, True, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=log))
        os.unlink(log)
        rows["level 1 (/dev/null)"].append(run(200_000, True, AOTI_DEBUG_LOGLEVEL="1",
                                               AOTI_DEBUG_LOGDEST="/dev/null"))
    plain = statistics.median(rows["plain"])
    level0 = statistics.median(rows["level 0"])
    level1 = statistics.median(rows["level 1 (file)"])
    print(f"plain loop           {plain:8.2f} ns per iteration")
    print(f"level 0 (compiled 5) {level0:8.2f} ns per launch, +{level0 - plain:.2f} ns over plain "
          f"(target <= 5 ns)")
    print(f"level 1 to a file    {level1:8.1f} ns per launch, one flushed record each (target <= 2000 ns)")
    null = statistics.median(rows["level 1 (/dev/null)"])
    print(f"level 1 to /dev/null {null:8.1f} ns per launch: what is not the file system's share of the write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
