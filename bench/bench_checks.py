"""What a clean NaN/Inf check costs, side by side in one run.

    python bench/bench_checks.py

1. Per launch: bench_checks.cpp (built at -O1, as Inductor builds wrappers)
   times a loop of launches with and without the check of a 16-element
   float32 output: the fixed cost of a clean check (target <= 100 ns).
2. Scan bandwidth: the check's scan (all_finite, through the compiled core)
   of a 64M-element float32 tensor against torch.sum of it (target: at
   least 50% of torch.sum's bandwidth), and the statistics core beside them.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def per_launch(rounds: int = 5):
    from aoti_debug.native.core import include_dir
    work = tempfile.mkdtemp(prefix="aoti-debug-bench-")
    exe = os.path.join(work, "bench_checks")
    subprocess.run(["c++", "-std=c++17", "-O1", "-DNDEBUG", "-I", include_dir(),
                    os.path.join(HERE, "bench_checks.cpp"), "-o", exe, "-lpthread"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}

    def run(mode):
        out = subprocess.run([exe, "20000000", str(mode)], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    plain, checked = [], []
    for _ in range(rounds):
        plain.append(run(0))
        checked.append(run(1))
    return statistics.median(plain), statistics.median(checked)


def bandwidth(rounds: int = 15):
    import torch
    from aoti_debug.native import core
    t = torch.randn(64 << 20)
    core.all_finite(t, True)  # builds and loads the core
    rows = {"torch.sum": lambda: torch.sum(t), "all_finite (NaN/Inf check)": lambda: core.all_finite(t, True),
            "statistics (level 5)": lambda: core.compute_stats(t)}
    times = {name: [] for name in rows}
    for _ in range(rounds):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in times.items()}, t.numel() * t.element_size()


def main() -> int:
    plain, checked = per_launch()
    cost = checked - plain
    print(f"per launch: plain {plain:.2f} ns, with a clean check of a 16-element output {checked:.2f} ns: "
          f"+{cost:.1f} ns per check (target <= 100 ns)")
    times, nbytes = bandwidth()
    ref = times["torch.sum"]
    print(f"64M float32 ({nbytes >> 20} MiB), median of interleaved runs, {os.cpu_count()} cores:")
    for name, secs in times.items():
        note = "  (target >= 0.50)" if name.startswith("all_finite") else ""
        print(f"  {name:28s} {secs * 1e3:8.2f} ms  {nbytes / secs / 1e9:6.1f} GB/s  "
              f"bandwidth vs torch.sum {ref / secs:5.2f}{note}")
    ok = cost <= 100 and ref / times["all_finite (NaN/Inf check)"] >= 0.5
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
