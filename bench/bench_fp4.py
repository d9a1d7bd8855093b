"""float4_e2m1fn_x2's statistics against float8_e4m3fn's over the same bytes.

    python bench/bench_fp4.py [--mib 32] [--repeat 7]

Both through the compiled core with the content hash (what a level-5 record
computes), interleaved, the median of `--repeat` timings each, then the NaN/Inf
check's clean path (all_finite) on the float4 tensor.  Prints milliseconds
(docs/performance.md).
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main() -> None:
    import torch
    from aoti_debug.native import core
    from aoti_debug.runtime.stats import compute_native
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n = args.mib << 20   # bytes: 2n float4 values, n float8 ones
    g = torch.Generator().manual_seed(0)
    cases = {"float4_e2m1fn_x2": torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
             .view(torch.float4_e2m1fn_x2),
             "float8_e4m3fn": (torch.randn(n, generator=g) * 50).to(torch.float8_e4m3fn)}
    times = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, t in cases.items():
            start = time.perf_counter()
            compute_native(t, hash=True)
            times[name].append(time.perf_counter() - start)
    for name, got in times.items():
        print(f"{name:<18} statistics+hash median {statistics.median(got) * 1e3:8.1f} ms")
    finite = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        core.all_finite(cases["float4_e2m1fn_x2"], True)
        finite.append(time.perf_counter() - start)
    print(f"{'float4_e2m1fn_x2':<18} all_finite      median {statistics.median(finite) * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
