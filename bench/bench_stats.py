"""Statistics core vs. torch.sum, side by side in one run.

    .venv/bin/python bench/bench_stats.py [--numel N] [--repeat R]

Target (docs/log-format.md section 3 core): on a 64M-element contiguous
float32 tensor the statistics cost at most 3x one torch.sum of it.  Timings
are interleaved (sum, stats, sum, stats, ...) so both see the same machine
load; the median of each is reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from aoti_debug.native import core as _native  # noqa: E402
from aoti_debug.runtime.stats import compute_native  # noqa: E402


def bench(x: torch.Tensor, repeat: int):
    compute_native(x)  # warm up (threads, page faults)
    torch.sum(x)
    t_sum, t_stats = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        torch.sum(x)
        t1 = time.perf_counter()
        compute_native(x)
        t2 = time.perf_counter()
        t_sum.append((t1 - t0) * 1e3)
        t_stats.append((t2 - t1) * 1e3)
    return statistics.median(t_sum), statistics.median(t_stats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=64 * 2**20)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    if _native.lib() is None:
        print("C++ runtime unavailable", file=sys.stderr)
        return 1
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, "
          f"vector width {_native.vector_width()} doubles, numel {args.numel}")
    print(f"{'dtype':<10} {'torch.sum ms':>13} {'stats ms':>10} {'ratio':>7}")
    worst = 0.0
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.numel, dtype=torch.float32).to(dtype)
        s, c = bench(x, args.repeat)
        worst = max(worst, c / s) if dtype == torch.float32 else worst
        print(f"{str(dtype).replace('torch.', ''):<10} {s:>13.2f} {c:>10.2f} {c / s:>7.2f}")
        del x
    print(f"float32 target: ratio <= 3.00 -> {'OK' if worst <= 3.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
