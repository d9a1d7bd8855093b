"""What the instrumentation costs on real models, side by side in one run.

    python bench/bench_corpus.py [--models gpt2,llama,bert] [--rounds 30] [--work DIR]
                                 [--wrapper package|torch.compile]

The models are the tests' corpus (tests/corpus.py: transformers GPT-2, Llama
and BERT from small configs).  Each is compiled plain and once per
configuration below; every (model, configuration) gets a worker process of
its own (settings are read once per process), and the driver asks the
workers for a batch of timed calls in turn, round after round, so drift on a
shared machine hits every row alike.  Rows are the median per-call time over
all rounds, as a ratio to the plain package; a byte-identical copy of the
plain package, measured the same way, is the noise floor printed beside
them.

With --wrapper torch.compile, each worker compiles the model with
torch.compile instead of loading a package, with the row's compile-time and
run-time variables together, or with TORCH_COMPILE's environment where a row
sets one variable both ways (the level rows: everything compiled in, run at
the row's level; other such rows do not apply); the targets are the
packages', so these rows print ratios only.

"per launch" is a row's cost over the plain run divided by the launches of a
call, in microseconds: the launches are counted in the log of the first
logged row (the `launch` records of its first round over its `run` records).

The floors of a logged row come from one call's records: the log its first
worker wrote in the first round (its warm-up calls and one batch), cut to the
records of the last call (from its `run` header on; a call is as many `run`
records as the log holds per call, so a torch.compile call split into several
graphs counts whole).  "write(2) floor" is what the same number of write(2)
calls of that call's record sizes cost alone, as a share of the plain run.
The level-5 floor, printed on a line of its own after a model's rows, is
what level 5 cannot avoid: one statistics pass, with the content hash, over
every tensor the call's records describe, plus that write(2) floor.  The
pass is bench/stats_floor.cpp, built with the runtime's own statistics core
(compute_stats(view, true), as a record calls it): each Tensor block with
statistics (CPU; empty tensors and unsupported dtypes are skipped as the
records skip them, other devices are skipped and counted) gets a buffer of
its own, with its shape, strides and dtype and finite values, and the median
of 200 passes over all of them, warm in cache, is the floor's share.  Level
5's cost (its median per call minus plain's) must be at most 1.3 times the
floor on every model; under torch.compile the ratio is printed alone, the
target being the packages'.

With --work DIR the packages are kept there and reused while the runtime
sources they were built from are unchanged (a stamp file records a hash of
cpp_runtime/ and codegen_patches/).
"""

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (compile-time variables, run-time variables, target ratio or None)
# "LOG" in a value becomes the worker's own log file, "DUMPS" its own dump directory.
CONFIGS = {
    "plain": ({}, {}, None),
    "plain copy": (None, {}, None),  # the plain package, copied: the noise floor
    "guards": ({"AOTI_DEBUG_CHECK_INPUTS": "1"}, {}, 1.02),
    "nan warn": ({"AOTI_DEBUG_NAN_CHECK": "warn"}, {}, 1.05),
    "nan raise": ({"AOTI_DEBUG_NAN_CHECK": "raise"}, {}, 1.05),
    "nan warn + guards": ({"AOTI_DEBUG_NAN_CHECK": "warn", "AOTI_DEBUG_CHECK_INPUTS": "1"}, {}, 1.05),
    "all compiled, off": ({"AOTI_DEBUG_COMPILE": "all"}, {}, 1.02),
    "memcheck warn": ({"AOTI_DEBUG_MEMCHECK": "warn"}, {}, 1.5),
    "memcheck compiled, off": ({"AOTI_DEBUG_MEMCHECK": "warn"}, {"AOTI_DEBUG_MEMCHECK": "off"}, 1.02),
    "blackbox 64": ({"AOTI_DEBUG_BLACKBOX": "64"}, {"AOTI_DEBUG_DUMP_DIR": "DUMPS"}, 1.3),
    "blackbox compiled, off": ({"AOTI_DEBUG_BLACKBOX": "64"}, {"AOTI_DEBUG_BLACKBOX": "off"}, 1.02),
    "level 1": ({"AOTI_DEBUG_LOGLEVEL": "5"}, {"AOTI_DEBUG_LOGLEVEL": "1", "AOTI_DEBUG_LOGDEST": "LOG"}, 1.15),
    "level 5": ({"AOTI_DEBUG_LOGLEVEL": "5"}, {"AOTI_DEBUG_LOGLEVEL": "5", "AOTI_DEBUG_LOGDEST": "LOG"}, 2.0),
}

# The rows held to their level-5 floor (see the docstring): at most this many times it.
LEVEL5_FLOOR = {"level 5": 1.3}

# torch.compile compiles and runs in one process with one environment: the
# rows whose package is compiled one way and run another, as one environment.
TORCH_COMPILE = {
    "level 1": {"AOTI_DEBUG_COMPILE": "all", "AOTI_DEBUG_LOGLEVEL": "1", "AOTI_DEBUG_LOGDEST": "LOG"},
    "level 5": {"AOTI_DEBUG_COMPILE": "all", "AOTI_DEBUG_LOGLEVEL": "5", "AOTI_DEBUG_LOGDEST": "LOG"},
}

COMPILE = r'''
import sys
sys.path.insert(0, {tests!r})
import torch, corpus
ep = corpus.export({model!r})
torch._inductor.aoti_compile_and_package(ep, package_path={path!r})
'''

# A worker: loads one package (or compiles the model with torch.compile),
# then answers each line "N" on stdin with the times of N calls (ns,
# space-separated) on stdout.
WARMUP = 20  # calls before "ready"
LOAD = {
    "package": "m = torch._inductor.aoti_load_package({path!r})",
    "torch.compile": "m = torch.compile(corpus.build({model!r}))",
}
WORKER = r'''
import sys, time
sys.path.insert(0, {tests!r})
import torch, corpus
torch.set_grad_enabled(False)
{load}
args = corpus.inputs({model!r})
for _ in range({warmup}):
    m(*args)
print("ready", flush=True)
clock = time.perf_counter_ns
for line in sys.stdin:
    times = []
    for _ in range(int(line)):
        t0 = clock(); m(*args); times.append(clock() - t0)
    print(" ".join(map(str, times)), flush=True)
'''


def sources_hash() -> str:
    h = hashlib.sha256()
    for top in ("cpp_runtime", "codegen_patches"):
        for folder, dirs, files in sorted(os.walk(os.path.join(ROOT, top))):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".h", ".cpp", ".py", ".in", ".cmake", ".txt")):
                    path = os.path.join(folder, name)
                    h.update(path[len(ROOT):].encode())
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()


def build(work: str, models, configs, base: dict) -> dict:
    """{(model, config): package path}, compiling what is missing or stale
    (configurations compiled alike share one package)."""
    stamp = os.path.join(work, "sources.sha256")
    fresh = sources_hash()
    if not os.path.exists(stamp) or open(stamp).read() != fresh:
        for name in os.listdir(work):
            if name.endswith(".pt2"):
                os.unlink(os.path.join(work, name))
    paths = {}
    for model in models:
        for config in configs:
            compile_env = CONFIGS[config][0]
            if compile_env is None:  # the noise floor: a byte-identical copy
                path = os.path.join(work, f"{model}-plain-copy.pt2")
                if not os.path.exists(path):
                    shutil.copy(paths[model, "plain"], path)
                paths[model, config] = path
                continue
            key = hashlib.sha256(repr(sorted(compile_env.items())).encode()).hexdigest()[:12]
            path = os.path.join(work, f"{model}-{key}.pt2")
            paths[model, config] = path
            if os.path.exists(path):
                continue
            print(f"compiling {model}, {config}", file=sys.stderr, flush=True)
            code = COMPILE.format(tests=os.path.join(ROOT, "tests"), model=model, path=path)
            subprocess.run([sys.executable, "-c", code], env=dict(base, **compile_env), check=True,
                           stdout=subprocess.DEVNULL)
    with open(stamp, "w") as f:
        f.write(fresh)
    return paths


# The cost of the system calls alone: `records` write(2) calls of `size`
# bytes each into a file, as a level-1 or level-5 run makes them.
WRITE_FLOOR = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
int main(int argc, char** argv) {
  int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_TRUNC, 0644);
  int records = atoi(argv[2]), size = atoi(argv[3]), runs = atoi(argv[4]);
  char* buf = malloc(size); memset(buf, 'x', size); buf[size - 1] = '\n';
  double* t = malloc(sizeof(double) * runs);
  for (int r = 0; r < runs; ++r) {
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < records; ++i) if (write(fd, buf, size) != size) return 1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    t[r] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
    if (r % 50 == 49) ftruncate(fd, 0);
  }
  qsort(t, runs, sizeof(double), cmp);
  printf("%f\n", t[runs / 2]);
  return 0;
}
"""


def one_call(log: str, calls: int) -> bytes:
    """The records of the last call in a log that holds `calls` calls: from
    the last `run` headers on (the log's runs per call of them), or the whole
    log after its banner when it holds no run."""
    with open(log, "rb") as f:
        body = f.read().split(b"=" * 80 + b"\n")[-1]  # after the banner, which a process writes once
    starts = [m.start() for m in re.finditer(rb"^\[[^\]\n]*\] \[pid \d+\] run ", body, re.M)]
    if not starts:
        return body
    per_call = max(1, round(len(starts) / max(1, calls)))
    return body[starts[-per_call]:]


def write_floor(work: str, records_text: bytes, runs: int = 400) -> float:
    """Median microseconds of write(2) calls as many and as large as the records given."""
    records = records_text.count(b"\n[") + records_text.startswith(b"[")
    if records == 0:
        return 0.0
    size = max(1, len(records_text) // records)
    exe = os.path.join(work, "write_floor")
    if not os.path.exists(exe):
        src = exe + ".c"
        with open(src, "w") as f:
            f.write(WRITE_FLOOR)
        subprocess.run(["cc", "-O2", src, "-o", exe], check=True)
    out = subprocess.run([exe, os.path.join(work, "write_floor.out"), str(records), str(size), str(runs)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def tensor_blocks(records_text: bytes):
    """The Tensor blocks of some records, each a dict of its `key=value` lines
    (the analysis commands' own parser: nested values' tensors included)."""
    from aoti_debug.analysis.records import parse
    log = parse(records_text.decode(errors="replace"))
    return [t.fields for r in log.records for item in r.items for _, t in item.tensors()]


def stats_floor(work: str, records_text: bytes, runs: int = 200):
    """(median microseconds of one statistics pass with the hash over every
    CPU tensor whose statistics the records hold, those tensors, the bytes
    they hold, the tensors on other devices left out)."""
    from aoti_debug.native.core import DTYPE_CODES, include_dir

    lines, other_devices = [], 0
    for b in tensor_blocks(records_text):
        if "hash" not in b:  # stats=skipped (empty tensor, dtype or device not supported): no pass
            continue
        if b.get("device") != "cpu":
            other_devices += 1
            continue
        sizes = [int(x) for x in b["shape"].strip("()").split(",") if x.strip()]
        strides = [int(x) for x in b["stride"].strip("()").split(",") if x.strip()]
        if 0 in sizes:
            continue
        lines.append(" ".join(map(str, [DTYPE_CODES[b["dtype"][len("torch."):]], len(sizes), *sizes, *strides])))
    src = os.path.join(HERE, "stats_floor.cpp")
    with open(src, "rb") as f:
        key = hashlib.sha256(sources_hash().encode() + f.read()).hexdigest()[:12]
    exe = os.path.join(work, f"stats_floor-{key}")
    if not os.path.exists(exe):
        subprocess.run(["c++", "-O3", "-std=c++17", "-pthread", "-I", include_dir(), src, "-o", exe + ".tmp"],
                       check=True)
        os.replace(exe + ".tmp", exe)
    tensors = os.path.join(work, "stats_floor.tensors")
    with open(tensors, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = subprocess.run([exe, tensors, str(runs)], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), other_devices


def launches_per_call(log: str):
    """Launches per run in a log (None when it holds no run)."""
    with open(log, "rb") as f:
        data = f.read()
    runs = data.count(b"] run ")
    return data.count(b"] launch ") / runs if runs else None


class Worker:
    def __init__(self, model, path, env, wrapper="package"):
        load = LOAD[wrapper].format(model=model, path=path)
        code = WORKER.format(tests=os.path.join(ROOT, "tests"), model=model, load=load, warmup=WARMUP)
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"worker for {path} did not start (exit {self.proc.wait()})")

    def times(self, n):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return [int(t) for t in self.proc.stdout.readline().split()]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="gpt2,llama,bert")
    parser.add_argument("--configs", default=";".join(CONFIGS),
                        help="semicolon-separated rows (plain and plain copy are always measured)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=20, help="calls per worker per round")
    parser.add_argument("--procs", type=int, default=3,
                        help="worker processes per configuration (memory layout differs per process)")
    parser.add_argument("--work", help="keep compiled packages here (default: a temporary folder)")
    parser.add_argument("--wrapper", choices=sorted(LOAD), default="package",
                        help="what runs the model: an AOTI package, or torch.compile's Python wrapper")
    args = parser.parse_args()
    models = args.models.split(",")
    wanted = ["plain", "plain copy"] + [c for c in args.configs.split(";") if c not in ("plain", "plain copy")]
    unknown = [c for c in wanted if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration {unknown[0]!r} (accepted: {', '.join(CONFIGS)})")
    compiled = args.wrapper == "torch.compile"
    both_ways = [c for c in wanted if set(CONFIGS[c][0] or {}) & set(CONFIGS[c][1]) and c not in TORCH_COMPILE]
    if compiled and both_ways:
        parser.error(f"with --wrapper torch.compile a process compiles and runs with one environment, so "
                     f"{both_ways[0]!r} (which sets a variable differently for each) does not apply")

    base = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
    base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
    base["HF_HUB_OFFLINE"] = "1"
    work = args.work or tempfile.mkdtemp(prefix="aoti-debug-corpus-")
    os.makedirs(work, exist_ok=True)
    base.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(work, "inductor-cache"))
    paths = ({(m, c): "" for m in models for c in wanted} if compiled else build(work, models, wanted, base))

    logs = tempfile.mkdtemp(prefix="aoti-debug-corpus-logs-")
    print(f"median per call over {args.rounds} rounds x {args.batch} calls x {args.procs} processes "
          f"per configuration; ratio to the plain package")
    print("write(2) floor: what the same number of write(2) calls of a call's record sizes cost alone, "
          "as a share of the plain run")
    print("level-5 floor: one statistics pass with the hash over every tensor a call's level-5 records "
          "describe, plus its write(2) floor; level 5's cost over plain as a multiple of it")
    print("per launch: the row's cost over plain per launch of a call")
    print(f"{'model':8s} {'configuration':20s} {'per call':>10s} {'ratio':>7s} {'per launch':>11s} {'target':>15s} "
          f"{'write(2) floor':>15s}")
    failed = []
    for model in models:
        workers = {}
        try:
            for config in wanted:
                for k in range(args.procs):
                    log = os.path.join(logs, f"{model}-{config.replace(' ', '_')}-{k}.log")
                    dumps = os.path.join(work, "dumps", os.path.basename(log)[:-4])
                    run_env = {n: v.replace("LOG", log).replace("DUMPS", dumps)
                               for n, v in CONFIGS[config][1].items()}
                    if compiled and config in TORCH_COMPILE:
                        env = dict(base, **{n: v.replace("LOG", log) for n, v in TORCH_COMPILE[config].items()})
                    else:
                        compile_env = (CONFIGS[config][0] or {}) if compiled else {}
                        env = dict(base, **compile_env, **run_env)
                    workers[config, k] = Worker(model, paths[model, config], env, args.wrapper)
            times = {config: [] for config in wanted}
            keys = list(workers)
            launches = None
            calls = {}  # logged row: the records of one call, from its first worker's first round
            for r in range(args.rounds):
                for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                    times[key[0]] += workers[key].times(args.batch)
                for name in sorted(os.listdir(logs)):  # records to a file: keep the file small
                    path = os.path.join(logs, name)
                    if launches is None and name.startswith(model + "-"):
                        launches = launches_per_call(path)
                    for config in wanted:
                        if r == 0 and name == f"{model}-{config.replace(' ', '_')}-0.log":
                            calls[config] = one_call(path, WARMUP + args.batch)
                    open(path, "w").close()
        finally:
            for w in workers.values():
                w.close()
        plain = statistics.median(times["plain"])
        if launches:
            print(f"{model}: {launches:g} launches per call", flush=True)
        writes = {}  # logged row: its write(2) floor, us
        for config in wanted:
            value = statistics.median(times[config])
            ratio = value / plain
            per_launch = f"{(value - plain) / launches / 1000:+9.2f}us" if launches else ""
            target = CONFIGS[config][2] if not compiled else None   # the targets are the packages'
            mark, floor = "", ""
            if target is not None:
                mark = f"<= {target:.2f}"
                if ratio > target:
                    mark += " MISSED"
                    failed.append((model, config, ratio))
            elif config == "plain copy":
                mark = "(noise)"
            if config in calls:
                writes[config] = write_floor(work, calls[config])
                floor = f"{writes[config] * 1000 / plain:.3f}"
            print(f"{model:8s} {config:20s} {value / 1000:8.1f}us {ratio:7.3f} {per_launch:>11s} {mark:>15s} "
                  f"{floor:>15s}", flush=True)
        for config, target in LEVEL5_FLOOR.items():
            if config not in calls:
                continue
            stats_us, tensors, nbytes, other = stats_floor(work, calls[config])
            floor_us = stats_us + writes[config]
            cost_us = (statistics.median(times[config]) - plain) / 1000
            ratio = cost_us / floor_us if floor_us > 0 else float("inf")
            mark = "ratio only" if compiled else f"target <= {target:.2f}"
            if not compiled and ratio > target:
                mark += " MISSED"
                failed.append((model, config + " / floor", ratio))
            left_out = f"; {other} tensors on other devices left out" if other else ""
            print(f"{model}: level-5 floor {floor_us:.1f}us (stats pass {stats_us:.1f}us over {tensors} tensors, "
                  f"{nbytes / 1e6:.2f} MB{left_out}; write(2) {writes[config]:.1f}us); {config} costs "
                  f"{cost_us:.1f}us = {ratio:.2f}x its floor ({mark})", flush=True)
    shutil.rmtree(logs, ignore_errors=True)
    shutil.rmtree(os.path.join(work, "dumps"), ignore_errors=True)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print("ratios only: the targets are the packages'" if compiled else "all targets met" if not failed else
          "missed: " + ", ".join(f"{m} {c} {r:.3f}" for m, c, r in failed))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
