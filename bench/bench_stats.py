"""Statistics core vs. torch.sum, and statistics with the content hash vs. without,
side by side in one run.

    .venv/bin/python bench/bench_stats.py [--numel N] [--repeat R]

Targets, on a 64M-element contiguous float32 tensor: the statistics cost at
most 3x one torch.sum of it (docs/log-format.md section 3), and statistics
with the content hash (section 3.1, what level-5 records hold) at most 1.2x
the statistics alone.  Timings are interleaved (sum, stats, stats+hash, then
the reverse order, ...) so all see the same machine load; the median of each
is reported.
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
    """Median ms of torch.sum, of the statistics, of the statistics with the hash."""
    compute_native(x, hash=True)  # warm up (threads, page faults)
    torch.sum(x)
    work = {"sum": lambda: torch.sum(x), "stats": lambda: compute_native(x),
            "hash": lambda: compute_native(x, hash=True)}
    runs = {k: [] for k in work}
    orders = [("sum", "stats", "hash"), ("hash", "stats", "sum")]  # whoever runs second is not favoured
    for i in range(repeat):
        for k in orders[i % 2]:
            t0 = time.perf_counter()
            work[k]()
            runs[k].append((time.perf_counter() - t0) * 1e3)
    return tuple(statistics.median(runs[k]) for k in ("sum", "stats", "hash"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=64 * 2**20)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    if _native.lib() is None:
        print("C++ runtime unavailable", file=sys.stderr)
        return 1
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, "
          f"vector width {_native.vector_width()} doubles, numel {args.numel}")
    print(f"{'dtype':<10} {'torch.sum ms':>13} {'stats ms':>10} {'ratio':>7} "
          f"{'stats+hash ms':>14} {'hash ratio':>11}")
    ratio = hash_ratio = 0.0
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.numel, dtype=torch.float32).to(dtype)
        s, c, h = bench(x, args.repeat)
        if dtype == torch.float32:
            ratio, hash_ratio = c / s, h / c
        print(f"{str(dtype).replace('torch.', ''):<10} {s:>13.2f} {c:>10.2f} {c / s:>7.2f} "
              f"{h:>14.2f} {h / c:>11.2f}")
        del x
    print(f"float32 targets: stats/sum <= 3.00 -> {'OK' if ratio <= 3.0 else 'MISSED'}; "
          f"(stats+hash)/stats <= 1.20 -> {'OK' if hash_ratio <= 1.2 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
