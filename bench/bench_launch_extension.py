"""A measured prototype for torch.compile's launch path, not part of the product.

    python bench/bench_launch_extension.py [--work DIR]

torch.compile's wrapper reaches the compiled core through ctypes
(aoti_debug/native/core.py write_record), which at level 3 and 5 costs
about ten and six times the C++ shim's own launch (bench_launch.py).  This
builds bench/launch_extension.cpp, a CPython extension against libtorch that
reads each tensor as an at::Tensor and calls the C++ runtime's
before_launch / after_launch, and times bench_launch.py's launch (two
16-element float32 tensors, records to /dev/null) through it in several
call shapes, beside the ctypes runtime and beside the same launches looped
in C inside the extension (the C++ shim's cost in the same process): µs per
launch over the plain loop, median of 5 processes, each the fastest of 7
loops of 5000 launches.  Building takes about 16 s (torch.utils.cpp_extension,
ninja).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (name, what it is); "plain" first, "in C" last
SHAPES = [
    ("plain", "the kernel calls alone"),
    ("ctypes", "today's runtime: run.before(site, values) / run.after(...), ctypes inside"),
    ("method", "the same call shape on the extension's Run (run.launch += 1 in Python)"),
    ("counted", "the counter in C: run.launch_(site, values) / run.launch_end(...), unconditional"),
    ("varargs", "the counter in C, the values as the call's own arguments: launch(run, site, *values)"),
    ("in C", "the same launches looped in C inside the extension"),
]


def build(work: str):
    from torch.utils import cpp_extension
    os.environ.setdefault("MAX_JOBS", "2")
    os.makedirs(work, exist_ok=True)
    return cpp_extension.load("aotid_launch_proto", [os.path.join(HERE, "launch_extension.cpp")],
                              extra_cflags=["-O2", "-DNDEBUG"],
                              extra_include_paths=[os.path.join(ROOT, "cpp_runtime", "include")],
                              build_directory=work, verbose=False)


def loop(shape: str, n: int, work: str) -> float:
    """ns per launch of one call shape, the fastest of 7 loops (run in a worker process)."""
    import time
    import torch
    buf0, arg0_1 = torch.zeros(16), torch.ones(16)
    args = ("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"), ("arg0_1", "in")),
            "  source-line: m.py:12 nodes=add\n")

    def kernel(a, b):
        pass

    if shape == "ctypes":
        from aoti_debug.runtime.launches import Model, Site
        model, site = Model("bench", 5, "", "off", False, torch.__version__), Site(*args)
    elif shape != "plain":
        P = build(work)
        model, site = P.model("bench", 5, "", "off", False, torch.__version__), P.site(*args)

    def plain():
        for _ in range(n):
            kernel(buf0, arg0_1)

    def python_side():   # the generated wrapper's statements, on either runtime's Run
        run = model.begin_run(("x",), (arg0_1,)) if shape == "ctypes" else P.begin_run(model, ("x",), (arg0_1,))
        for _ in range(n):
            run.launch += 1
            if run.level: run.before(site, (buf0, arg0_1))
            kernel(buf0, arg0_1)
            if run.level: run.after(site, (buf0, arg0_1))

    def counted():
        run = P.begin_run(model, ("x",), (arg0_1,))
        for _ in range(n):
            run.launch_(site, (buf0, arg0_1))
            kernel(buf0, arg0_1)
            run.launch_end(site, (buf0, arg0_1))

    def varargs():
        run, launch, launch_end = P.begin_run(model, ("x",), (arg0_1,)), P.launch, P.launch_end
        for _ in range(n):
            launch(run, site, buf0, arg0_1)
            kernel(buf0, arg0_1)
            launch_end(run, site, buf0, arg0_1)

    def in_c():
        P.cloop(P.begin_run(model, ("x",), (arg0_1,)), site, n, True, (buf0, arg0_1))

    f = {"plain": plain, "ctypes": python_side, "method": python_side, "counted": counted,
         "varargs": varargs, "in C": in_c}[shape]
    f()
    times = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        f()
        times.append(time.perf_counter_ns() - t0)
    return min(times) / n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", help="the extension's build folder (default: a temporary one)")
    parser.add_argument("--loop", help=argparse.SUPPRESS)   # a worker: SHAPE
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="aoti-debug-ext-")
    if args.loop:
        print(loop(args.loop, 5000, work))
        return 0
    import time
    t0 = time.time()
    build(work)
    print(f"extension built in {time.time() - t0:.1f} s ({work})")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    for level in (3, 5):
        rows = {name: [] for name, _ in SHAPES}
        for _ in range(5):
            for name, _ in SHAPES:
                out = subprocess.run([sys.executable, __file__, "--work", work, "--loop", name], check=True, text=True,
                                     capture_output=True, env=dict(env, AOTI_DEBUG_LOGLEVEL=str(level),
                                                                   AOTI_DEBUG_LOGDEST="/dev/null"))
                rows[name].append(float(out.stdout.split()[-1]))
        over = {k: (statistics.median(v) - statistics.median(rows["plain"])) / 1000 for k, v in rows.items()}
        print(f"level {level}, us per launch over the plain loop; ratio to the same launches looped in C:")
        for name, what in SHAPES[1:]:
            print(f"  {name:8s} {over[name]:+7.3f} us  {over[name] / over['in C']:6.2f}x  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
