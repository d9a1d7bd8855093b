"""Compile time of the instrumented artifact against the plain one, on real models.

    python bench/bench_compile.py [--models gpt2,llama,bert,vit] [--rounds 3]
                                  [--configs "all;level 5"]

The models are the tests' corpus (tests/corpus.py).  Each round compiles every
model plain and once per configuration, in that order reversed every other
round so drift on a shared machine hits all alike, each compile in a fresh
process with an Inductor cache of its own (so Inductor does the whole work
every time) and one aoti-debug cache shared by all (AOTI_DEBUG_CACHE_DIR: the
runtime's core object is built by the first instrumented compile and reused
by the later ones, as on a user's machine).  Round 0 is that first compile:
it is printed but left out of the medians.  Rows are the median compile time
and its ratio to the plain compile's median (target <= 1.15 after the first).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIGS = {
    "plain": {},
    "all": {"AOTI_DEBUG_COMPILE": "all"},
    "level 5": {"AOTI_DEBUG_LOGLEVEL": "5"},
    "nan warn + guards": {"AOTI_DEBUG_NAN_CHECK": "warn", "AOTI_DEBUG_CHECK_INPUTS": "1"},
}
TARGET = 1.15

EXPORT_AND_COMPILE = r'''
import sys, time
sys.path.insert(0, {tests!r})
import torch, corpus
ep = corpus.export({model!r})
t0 = time.perf_counter()
torch._inductor.aoti_compile_and_package(ep, package_path={path!r})
print(time.perf_counter() - t0)
'''


def compile_seconds(model: str, env: dict, work: str, tag: str) -> float:
    """Seconds aoti_compile_and_package took (export excluded), with a fresh Inductor cache."""
    cache = tempfile.mkdtemp(prefix=f"inductor-{tag}-", dir=work)
    path = os.path.join(work, f"{model}-{tag}.pt2")
    code = EXPORT_AND_COMPILE.format(tests=os.path.join(ROOT, "tests"), model=model, path=path)
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, TORCHINDUCTOR_CACHE_DIR=cache),
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama,bert,vit")
    parser.add_argument("--rounds", type=int, default=3, help="rounds after the first (default: 3)")
    parser.add_argument("--configs", default="all;level 5",
                        help=f"';'-separated, from: {'; '.join(c for c in CONFIGS if c != 'plain')}")
    args = parser.parse_args()
    configs = ["plain"] + [c.strip() for c in args.configs.split(";") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; known: {list(CONFIGS)}")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AOTI_DEBUG_", "TORCHINDUCTOR_"))}
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as work:
        base["AOTI_DEBUG_CACHE_DIR"] = os.path.join(work, "aoti-debug-cache")
        times = {}
        started = time.time()
        for r in range(args.rounds + 1):
            order = configs if r % 2 == 0 else configs[::-1]
            for model in args.models.split(","):
                for config in order:
                    s = compile_seconds(model, dict(base, **CONFIGS[config]), work, f"{config}-{r}".replace(" ", "_"))
                    times.setdefault((model, config), []).append(s)
            print(f"round {r} done ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
        print(f"{'model':<8} {'configuration':<20} {'first':>8} {'median':>8} {'ratio':>7}  target")
        for model in args.models.split(","):
            plain = statistics.median(times[model, "plain"][1:])
            for config in configs:
                t = times[model, config]
                ratio = statistics.median(t[1:]) / plain
                ok = config == "plain" or ratio <= TARGET
                failed |= not ok
                print(f"{model:<8} {config:<20} {t[0]:7.1f}s {statistics.median(t[1:]):7.1f}s {ratio:7.3f}  "
                      + ("" if config == "plain" else f"<= {TARGET}" + ("" if ok else "  MISSED")))
    print("all targets met" if not failed else "some targets missed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
