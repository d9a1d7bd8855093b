"""Compile time and run-time overhead of the instrumentation, measured side by side.

    python bench/bench_codegen.py [--launches 60] [--runs 2000]

A launch-bound model (per step an extern addmm and a small Inductor kernel,
which cannot fuse across the addmm) is compiled three times: plain,
instrumented at level 5, and with AOTI_DEBUG_COMPILE=all.  It prints the
compile times and their ratios (target <= 1.15 at level 5), then the per-run
latency of the plain artifact, of the level-5 one run at levels 0, 1 and 3,
and of the compile-all one run with nothing set (target for both at level 0:
<= 1.02x), against the median of the
plain artifact and a copy of it, whose own ratio shows the noise.  Each
configuration runs in its own process (the level is read once per process);
runs are interleaved in rounds so drift on a shared machine hits all of them
alike.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

MODEL = '''
import torch
class Chain(torch.nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(steps))
    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 0.5   # an extern addmm, then an Inductor kernel
        return x
'''


def compile_package(path: str, steps: int, env: dict) -> float:
    code = MODEL + f'''
import time
ep = torch.export.export(Chain({steps}).eval(), (torch.randn(8, 16),))
t0 = time.perf_counter()
torch._inductor.aoti_compile_and_package(ep, package_path={path!r})
print(time.perf_counter() - t0)
'''
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def latency(path: str, runs: int, env: dict) -> float:
    code = f'''
import time, torch
m = torch._inductor.aoti_load_package({path!r})
x = torch.randn(8, 16)
for _ in range(50):
    m(x)
times = []
for _ in range({runs}):
    t0 = time.perf_counter_ns(); m(x); times.append(time.perf_counter_ns() - t0)
times.sort()
print(times[len(times) // 2])
'''
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1]) / 1000.0


def count_launches(path: str, env: dict, log: str) -> int:
    """Launches in one run, counted from a level-1 log (what the ratios are per)."""
    code = f'''
import torch
m = torch._inductor.aoti_load_package({path!r})
m(torch.randn(8, 16))
'''
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(env, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=log))
    with open(log) as f:
        n = sum(1 for line in f if "] launch 1." in line)
    os.unlink(log)
    return n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=60, help="steps of the chain (2 launches each)")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
    work = tempfile.mkdtemp(prefix="aoti-debug-bench-")
    base["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "cache")
    plain, inst = os.path.join(work, "plain.pt2"), os.path.join(work, "inst.pt2")

    # compile each once to warm the shared caches (precompiled headers, kernel
    # objects), then time each again, alternating
    inst_env = dict(base, AOTI_DEBUG_LOGLEVEL="5")
    # everything compiled in (level 10, NaN/Inf checks, guards), off at run time
    every = os.path.join(work, "all.pt2")
    every_env = dict(base, AOTI_DEBUG_COMPILE="all")
    builds = [(plain, base), (inst, inst_env), (every, every_env)]
    for path, env in builds:
        compile_package(path, args.launches, env)
    times = {path: [] for path, _ in builds}
    for _ in range(2):
        for path, env in builds:
            times[path].append(compile_package(path, args.launches, env))
    t_plain, t_inst, t_every = (min(times[path]) for path, _ in builds)
    print(f"compile  plain {t_plain:7.2f} s   instrumented (level 5) {t_inst:7.2f} s   "
          f"ratio {t_inst / t_plain:.3f}  (target <= 1.15)")
    print(f"compile  AOTI_DEBUG_COMPILE=all {t_every:7.2f} s   ratio {t_every / t_plain:.3f}")

    log = os.path.join(work, "bench.log")
    # a second copy of the plain artifact measures the noise floor of the ratios
    plain_copy = os.path.join(work, "plain-copy.pt2")
    shutil.copy(plain, plain_copy)
    configs = [("plain", plain, {}), ("plain copy", plain_copy, {}),
               ("level 0", inst, {"AOTI_DEBUG_LOGLEVEL": "0"}),
               ("all, unset", every, {}),
               ("level 1", inst, {"AOTI_DEBUG_LOGLEVEL": "1", "AOTI_DEBUG_LOGDEST": log}),
               ("level 3", inst, {"AOTI_DEBUG_LOGLEVEL": "3", "AOTI_DEBUG_LOGDEST": log})]
    results = {name: [] for name, _, _ in configs}
    for _ in range(args.rounds):
        for name, path, extra in configs:
            results[name].append(latency(path, args.runs if name != "level 3" else args.runs // 10,
                                         dict(base, **extra)))
            if os.path.exists(log):
                os.unlink(log)
    ref = statistics.median(results["plain"] + results["plain copy"])
    launches = count_launches(inst, base, log)
    print(f"latency per run ({launches} launches), median of {args.rounds} rounds:")
    for name, _, _ in configs:
        value = statistics.median(results[name])
        target = "  (target <= 1.02)" if name in ("level 0", "all, unset") else ""
        print(f"  {name:10s} {value:9.1f} us   ratio {value / ref:6.3f}{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
