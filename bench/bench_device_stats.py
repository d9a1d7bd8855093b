"""What a level-5 description of a large CUDA tensor costs, against one torch.sum of it.

    python bench/bench_device_stats.py [--gib 1] [--repeat 5]

On an NVIDIA GPU only (scripts/gpu-check.sh runs it after the GPU tests; on
any other machine it exits 3 saying so).  A bfloat16 tensor of `--gib` GiB,
side by side in one run, the fastest of `--repeat` timings each, every one
ended by a device synchronisation:

- one `torch.sum` of it (the yardstick; the target is <= 2x of it);
- torch.compile's runtime (aoti_debug/runtime/stats.py, compute_with_torch):
  every figure and the content hash reduced on the device, one transfer (the
  C++ runtime runs the same ops, cpp_runtime/include/aoti_debug/detail/device_ops.h);
- without the content hash;
- the C++ runtime's path for what those ops leave (complex, uint64): a
  blocking copy of the whole tensor to the host, then the CPU core.

Prints each as milliseconds and as a ratio to the torch.sum.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def timed(fn, repeat):
    import torch
    fn()                                   # warm-up: kernels compiled, memory cached
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print(f"bench_device_stats: no CUDA device (torch {torch.__version__}): nothing measured", file=sys.stderr)
        return 3
    from aoti_debug.runtime import stats

    numel = int(args.gib * 2**30) // 2
    t = torch.randn(numel, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    rows = [
        ("torch.sum", lambda: t.sum()),
        ("runtime stats + hash (device)", lambda: stats.compute_with_torch(t, hash=True)),
        ("runtime stats (device)", lambda: stats.compute_with_torch(t, hash=False)),
        ("copy to host + core (the fallback)", lambda: stats.compute_native(t.cpu(), hash=True)),
    ]
    times = {name: timed(fn, args.repeat) for name, fn in rows}
    base = times["torch.sum"]
    print(f"{torch.cuda.get_device_name(0)}: bfloat16, {numel} elements ({args.gib:g} GiB), "
          f"fastest of {args.repeat}")
    for name, seconds in times.items():
        target = "  (target <= 2.00)" if name == "runtime stats + hash (device)" else ""
        print(f"  {name:32s} {seconds * 1e3:9.2f} ms  {seconds / base:6.2f}x{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
