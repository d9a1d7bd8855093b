"""Statistics core vs. torch.sum, and statistics with the content hash vs. without,
side by side in one run; then the dequantized statistics of scaled-matmul operands
vs. the plain statistics of the same bytes.

    .venv/bin/python bench/bench_stats.py [--numel N] [--repeat R] [--dequant-only]

Targets, on a 64M-element contiguous float32 tensor: the statistics cost at
most 3x one torch.sum of it (docs/log-format.md section 3), and statistics
with the content hash (section 3.1, what level-5 records hold) at most 1.2x
the statistics alone.  Timings are interleaved (sum, stats, stats+hash, then
the reverse order, ...) so all see the same machine load; the median of each
is reported.

Dequantized statistics (docs/log-format.md 3.3), on a (4096, 4096) operand: one
pass over the data and the scales, so at most about 1.3x the plain statistics of
the same bytes (the float4 operand's bytes read as float8_e4m3fn for the plain
pass, which float4 has no statistics for), both on one thread: dequant_stats uses
one.  Both are timed in the calling thread's CPU time (time.thread_time: user and
system, page faults included), so another job on the machine does not stretch one
side more than the other; the median of each is reported.
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


def dequant_cases(m: int, k: int):
    """(name, operand, scale, global, layout, block, swizzled, data bytes, scale bytes)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_dequant import quantized   # torch's own to_blocked
    cq = quantized()
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(m, k, generator=g) * 50).to(torch.float8_e4m3fn)
    e8m0 = torch.randint(120, 130, (m, k // 32), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    fp4 = torch.randint(0, 256, (m, k // 2), generator=g, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    nv = cq.to_blocked((torch.rand(m, k // 16, generator=g) * 4).to(torch.float8_e4m3fn))
    return [("tensorwise", a, torch.tensor(0.5), None, "tensorwise", 0, False),
            ("rowwise", a, torch.rand(m, 1, generator=g), None, "rowwise", 0, False),
            ("MXFP8", a, cq.to_blocked(e8m0), None, "block", 32, True),
            ("NVFP4", fp4, nv, torch.tensor(0.5), "block", 16, True)]


def bench_dequant(repeat: int) -> bool:
    """Plain vs dequantized statistics of each case, interleaved; True when every
    ratio is within 1.3x of (data + scale bytes) / data bytes."""
    print(f"{'operand':<11} {'plain ms':>9} {'dequant ms':>11} {'ratio':>6} {'bytes ratio':>12}")
    ok = True
    cases = dequant_cases(4096, 4096)
    fp8 = cases[0][1]
    # float4 (no plain statistics): its bytes read as float8, then a float8 operand of as many values
    cases.append(("NVFP4/values",) + cases[3][1:])
    for name, op, scale, glob, layout, block, swizzled in cases:
        plain_view = op.view(torch.float8_e4m3fn) if op.dtype == torch.float4_e2m1fn_x2 else op
        if name == "NVFP4/values":
            plain_view = fp8
        work = {"plain": lambda: compute_native(plain_view, max_threads=1),
                "dequant": lambda: _native.dequant_stats(op, scale, glob, layout, block, swizzled, 1)}
        for f in work.values():
            f()
        runs = {k: [] for k in work}
        for i in range(repeat):
            for k in (("plain", "dequant"), ("dequant", "plain"))[i % 2]:
                t0 = time.thread_time()
                work[k]()
                runs[k].append((time.thread_time() - t0) * 1e3)
        p, d = statistics.median(runs["plain"]), statistics.median(runs["dequant"])
        data = plain_view.numel() * plain_view.element_size()
        scales = sum(t.numel() * t.element_size() for t in (scale, glob) if t is not None)
        want = (data + scales) / data
        ok = ok and (d / p <= 1.3 * want or name == "NVFP4")    # NVFP4: twice the values of its bytes
        print(f"{name:<11} {p:>9.2f} {d:>11.2f} {d / p:>6.2f} {want:>12.3f}")
    print(f"dequant target: ratio <= 1.3 x bytes ratio -> {'OK' if ok else 'MISSED'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=64 * 2**20)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--dequant-only", action="store_true", help="only the dequantized statistics")
    args = ap.parse_args()
    if _native.lib() is None:
        print("C++ runtime unavailable", file=sys.stderr)
        return 1
    if args.dequant_only:
        bench_dequant(args.repeat)
        return 0
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
    bench_dequant(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
