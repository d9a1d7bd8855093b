"""Per-launch cost of the compiled-in C++ shim, side by side in one run.

    python bench/bench_launch.py

Builds bench_launch.cpp header-only (-O1, as Inductor builds wrappers) and
times a loop of launches of a site without arguments: without
instrumentation, instrumented and switched off at run time (level 0, target
<= 5 ns over the plain loop), and at level 1 writing one flushed record per
launch to a file (target <= 2 us) and to /dev/null (the same system call,
without the file system behind it).

Then the same for torch.compile's Python wrapper: the statements its
instrumented code runs around each launch (codegen_patches/python_emit.py:
`launch(run, site, *values)` / `launch_end(...)`, the compiled launch
extension of native/launch_ext.py, built first if the cache lacks it)
around a kernel that does nothing, over the same loop without them, and
the same with the extension switched off (AOTI_DEBUG_LAUNCH_EXTENSION=0:
launches.py's functions, one ctypes call a record); beside
it, what a launch of the plain wrapper costs on a real model (GPT-2 of the
tests' corpus, run by bench_corpus.py's worker: the median call over the
launches of a call, counted in a level-1 log).

Last, one launch with arguments in both runtimes, at levels 3 and 5 to
/dev/null: PY_LOOP's site (buf0 inout, arg0_1 in: two float32 CPU tensors of
16 elements; a `launch` record with two Tensor blocks and a `launch-end` with
one) and the same launch in bench_launch.cpp as an AOTI wrapper runs it
("wrapper": the statements codegen_patches/cpp_emit.py generates around it,
the tensors made by the shim and described from their handles), which
writes the same records byte for byte but for timestamps, pid, thread and
torch version (same_records checks it before anything is timed); beside it
the site handed ready-made TensorViews ("tensors", what this bench compared
with before: it leaves out the describing).  Both are
built as AOTI artifacts are: the wrapper at -O1 with
-DAOTI_DEBUG_LINKED_CORE=1, linked with the core object (src/core.cpp at -O2,
native/build.py core_flags, statistics compiled in) and torch's libraries the
core calls into a shared object, which bench_launch_loader.cpp loads with
dlopen as torch loads an artifact; the rows above keep the header-only
executable.  Each runtime's cost
is over its own plain loop; the ratio Python/C++ has the issue's target
<= 1.2 per launch.  The two runtimes are timed alike and interleaved, so a
change of the machine's load hits both: each process times LOOPS loops of
the same number of launches after one untimed loop and gives its fastest;
REPS processes a row, in turn C++ plain, Python plain, then per level C++,
Python (extension), Python (ctypes); a row is the median over its processes.
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


LOOPS = 7     # loops timed in each process (both runtimes), its fastest kept
REPS = 5      # processes a row, their median kept
TENSOR_N = 20_000   # launches a loop at levels 3 and 5, both runtimes

# The launch's site and tensors, as each launch bench makes them (Site, torch imported)
SITE = r"""
site = Site("cpp_fused_add_0", "add", "m.py:12", "fc1", (("buf0", "inout"), ("arg0_1", "in")),
            "  source-line: m.py:12 nodes=add\n")
buf0, arg0_1 = torch.zeros(16), torch.ones(16)
"""

# N launches as torch.compile's instrumented wrapper makes them (with
# "plain", the kernel calls alone); prints ns per launch, the fastest of LOOPS loops.
PY_LOOP = r"""
import sys, time, torch
from aoti_debug.runtime.launches import Model, Site
n, plain = int(sys.argv[1]), sys.argv[2] == "plain"
model = Model("bench", 5, "", "off", False, torch.__version__)
""" + SITE + r"""def kernel(a, b):
    pass
def call():
    run = model.begin_run(("x",), (arg0_1,))
    launch, launch_end = model.calls
    for _ in range(n):
        if run.level: launch(run, site, buf0, arg0_1)
        else: run.launch += 1
        kernel(buf0, arg0_1)
        if run.level: launch_end(run, site, buf0, None)
def call_plain():
    for _ in range(n):
        kernel(buf0, arg0_1)
f = call_plain if plain else call
f()
times = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter_ns(); f(); times.append(time.perf_counter_ns() - t0)
from aoti_debug.runtime import launches
print("ctypes" if model.calls[0] is launches.launch else "extension", min(times) / n)
"""

def py_loop(env, n, plain=False, path="extension", **extra):
    """ns per launch of PY_LOOP in a fresh process: the fastest of LOOPS loops."""
    if path == "ctypes":
        extra["AOTI_DEBUG_LAUNCH_EXTENSION"] = "0"
    out = subprocess.run([sys.executable, "-c", PY_LOOP, str(n), "plain" if plain else "on", str(LOOPS)],
                         env=dict(env, **extra), capture_output=True, text=True, check=True)
    used, ns = out.stdout.split()[-2:]
    if not plain and int(extra.get("AOTI_DEBUG_LOGLEVEL", "1")) and used != path:
        raise SystemExit(f"the loop ran on {used}, not {path}: {out.stderr}")
    return float(ns)


def tensor_launches(env: dict, linked: str, run, wrapper: bool) -> dict:
    """Levels 3 and 5 of the launch with two tensors, C++ and Python timed
    alike and interleaved (the module docstring); us per launch over each
    runtime's plain loop, from the medians.  `wrapper`: the C++ loop has the
    "wrapper" site (the launch as an AOTI wrapper runs it), timed too."""
    sites = ("wrapper", "tensors") if wrapper else ("tensors",)   # bench_launch.cpp's, rows keyed by them
    rows = {k: [] for k in ("cxx plain", "py plain", *((c, level) for c in sites + ("extension", "ctypes")
                                                        for level in (3, 5)))}
    for _ in range(REPS):
        rows["cxx plain"].append(run(TENSOR_N, False, binary=linked, loops=LOOPS))
        rows["py plain"].append(py_loop(env, TENSOR_N, plain=True))
        for level in (3, 5):
            dest = dict(AOTI_DEBUG_LOGLEVEL=str(level), AOTI_DEBUG_LOGDEST="/dev/null")
            for c in sites:
                rows[(c, level)].append(run(TENSOR_N, True, c, linked, loops=LOOPS, **dest))
            for path in ("extension", "ctypes"):
                rows[(path, level)].append(py_loop(env, TENSOR_N, path=path, **dest))
    med = {k: statistics.median(v) for k, v in rows.items()}
    got = {k: (med[k] - med["cxx plain" if k[0] in sites else "py plain"]) / 1000
           for k in rows if isinstance(k, tuple)}
    got["spread"] = {k: (min(v), max(v)) for k, v in rows.items()}
    return got


def python_wrapper(env: dict, work: str, cxx: dict) -> None:
    def loop(n, plain=False, path="extension", **extra):
        return py_loop(env, n, plain, path, **extra)

    log = os.path.join(work, "python.log")
    rows = {"plain": [], "level 0": [], "level 1 (file)": []}
    for path in ("extension", "ctypes"):
        rows[(path, 1)] = []
    for _ in range(REPS):
        rows["plain"].append(loop(200_000, plain=True))
        rows["level 0"].append(loop(200_000, AOTI_DEBUG_LOGLEVEL="0"))
        rows["level 1 (file)"].append(loop(50_000, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=log))
        os.unlink(log)
        for path in ("extension", "ctypes"):
            rows[(path, 1)].append(loop(50_000, path=path, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST="/dev/null"))
    over = {k: (statistics.median(v) - statistics.median(rows["plain"])) / 1000 for k, v in rows.items()}
    over.update({k: v for k, v in cxx.items() if isinstance(k, tuple) and k[0] in ("extension", "ctypes")})

    from bench_corpus import Worker, launches_per_call   # its worker runs GPT-2 under torch.compile
    model_log = os.path.join(work, "gpt2.log")
    counter = Worker("gpt2", "", dict(env, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=model_log), "torch.compile")
    counter.close()
    launches = launches_per_call(model_log)
    timer = Worker("gpt2", "", env, "torch.compile")
    per_call = statistics.median(timer.times(400)) / 1000
    timer.close()

    print("torch.compile's Python wrapper, per launch over the same loop without instrumentation:")
    print(f"  level 0 (compiled 5) {over['level 0']:+8.3f} us per launch")
    print(f"  level 1 to a file    {over['level 1 (file)']:+8.3f} us per launch, one record each")
    print(f"  level 1 to /dev/null {over[('extension', 1)]:+8.3f} us per launch "
          f"(through ctypes: {over[('ctypes', 1)]:+.3f} us)")
    what = {3: "two records, three tensors", 5: "the same with statistics"}
    base = "wrapper" if ("wrapper", 3) in cxx else "tensors"
    for level in (3, 5):
        py, cc, slow = over[("extension", level)], cxx[(base, level)], over[("ctypes", level)]
        ratio = py / cc
        views = (f"; against the C++ site handed TensorViews (+{cxx[('tensors', level)]:.3f} us) "
                 f"{py / cxx[('tensors', level)]:.2f}x" if base == "wrapper" else "")
        print(f"  level {level} to /dev/null {py:+8.3f} us per launch, {what[level]}; "
              f"C++ {cc:+.3f} us, Python/C++ {ratio:.2f}x (target <= 1.2){'' if ratio <= 1.2 else ' MISSED'}; "
              f"through ctypes {slow:+.3f} us, {slow / cc:.2f}x{views}")
    site = ("the launch as an AOTI wrapper runs it (cpp_emit's statements, the tensors' handles described "
            "through the shim)" if base == "wrapper" else "the same launch's site handed TensorViews")
    print(f"    (C++: bench_launch.cpp, {site}, {cxx['build']}; both runtimes the median of "
          f"{REPS} processes, each the fastest of {LOOPS} loops of {TENSOR_N} launches, interleaved)")
    for k, (lo, hi) in cxx["spread"].items():
        name = k if isinstance(k, str) else f"{k[0]} level {k[1]}"
        print(f"    {name:18} ns per launch over the {REPS} processes: {lo:.1f} to {hi:.1f}")
    print(f"  the plain wrapper on GPT-2: {per_call:.1f} us per call, {launches:g} launches, "
          f"{per_call / launches:.2f} us per launch")


def same_records(env: dict, linked: str, work: str) -> None:
    """Stops the bench unless the "wrapper" site and PY_LOOP write the same two
    launches' records at level 5, but for each line's time and pid, the thread
    and the torch version (the C++ model's is "bench")."""
    import torch
    def records(cmd, name):
        log = os.path.join(work, name)
        if os.path.exists(log):
            os.unlink(log)  # a log is appended to
        subprocess.run(cmd, env=dict(env, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=log), check=True,
                       capture_output=True)
        with open(log) as f:
            text = f.read()
        text = re.sub(r"^\[[^]]*\] \[pid \d+\] ", "", text, flags=re.M)
        text = re.sub(r"thread=\d+", "thread=T", text)
        return text.replace(f"PyTorch version: {torch.__version__}", "PyTorch version: bench")
    cxx = records([linked, "2", "1", "wrapper"], "wrapper.log")
    py = records([sys.executable, "-c", PY_LOOP, "2", "on", "1"], "py.log")
    py = py[:len(cxx)]  # PY_LOOP's timed loop follows its two launches
    if cxx != py or "launch-end bench:1.2" not in cxx:
        raise SystemExit(f"the C++ wrapper site and PY_LOOP write different records: compare {work}/wrapper.log "
                         f"with {work}/py.log")


def wrapper_site(work: str) -> str:
    """The statements an AOTI wrapper runs around PY_LOOP's launch, as
    codegen_patches/cpp_emit.py generates them (the site's arguments described
    from their handles through an argument cache, the `launch` record, the
    kernel, the `launch-end` record), in a file bench_launch.cpp includes in
    its "wrapper" loop; returns its path."""
    from aoti_debug.plan import IN, INOUT, Arg, Provenance, Site
    from codegen_patches import cpp_emit
    site = Site(0, "cpp_fused_add_0", Provenance(nodes=("add",), source="m.py:12", modules=("fc1",)),
                [Arg("buf0", "buf0", INOUT), Arg("arg0_1", "arg0_1", IN)], "cpp")
    lines = (cpp_emit.args_before(site) + [cpp_emit.launch_statement(site), "kernel_sink = i;  // the kernel"]
             + cpp_emit.after_launch(site, nan_check=False))
    path = os.path.join(work, "wrapper_site.inc")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def build_artifact_like(work: str):
    """bench_launch.cpp as an AOTI artifact links the runtime (ir_queries.py
    linked_core): the wrapper at -O1 with the declarations only, the core
    object at -O2, torch's libraries for the calls the core makes into them,
    in a shared object that bench_launch_loader.cpp loads with dlopen as torch
    loads an artifact (an executable's thread-locals cost less: no
    __tls_get_addr).  Returns (the loader's path, what it is); falls back to
    the header-only build."""
    from aoti_debug.native import build
    exe, so = os.path.join(work, "bench_launch_linked"), os.path.join(work, "bench_launch_linked.so")
    try:
        flags = build.core_flags(stats=True, dumps=True)
        core = str(build.core_object(flags))
        import torch
        lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        abi = [f for f in build.torch_flags() if f.startswith("-D_GLIBCXX_USE_CXX11_ABI")]
        site = wrapper_site(work)
        subprocess.run(["c++", "-std=c++17", "-O1", "-DNDEBUG", "-DAOTI_DEBUG_LINKED_CORE=1", "-DAOTID_BENCH_SHARED",
                        f'-DAOTID_BENCH_WRAPPER_SITE="{site}"', "-fPIC", "-shared", *abi,
                        "-I", str(build.runtime_dir() / "include"), "-I", os.path.join(os.path.dirname(lib), "include"),
                        os.path.join(HERE, "bench_launch.cpp"), core, "-o", so, f"-L{lib}", f"-Wl,-rpath,{lib}",
                        "-ltorch_cpu", "-lc10", "-lpthread"], check=True)
        subprocess.run(["c++", "-O1", f'-DBENCH_SO="{so}"', os.path.join(HERE, "bench_launch_loader.cpp"),
                        "-o", exe, "-ldl"], check=True)
        return exe, "built as AOTI artifacts are: wrapper -O1, linked core object -O2, a shared object loaded by dlopen"
    except (build.BuildError, OSError, subprocess.CalledProcessError) as exc:
        print(f"(no linked core: {exc}; the C++ figures below are the header-only -O1 build's)")
        return os.path.join(work, "bench_launch"), "header-only at -O1"


def main() -> int:
    from aoti_debug.native.core import include_dir
    work = tempfile.mkdtemp(prefix="aoti-debug-bench-")
    exe = os.path.join(work, "bench_launch")
    subprocess.run(["c++", "-std=c++17", "-O1", "-DNDEBUG", "-I", include_dir(),
                    os.path.join(HERE, "bench_launch.cpp"), "-o", exe, "-lpthread"], check=True)
    linked, build = build_artifact_like(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_") or k == "AOTI_DEBUG_CACHE_DIR"}
    log = os.path.join(work, "bench.log")
    from aoti_debug.native import launch_ext
    launch_ext.build()   # before the loops time anything

    def run(n, instrumented, site="empty", binary=exe, loops=1, **extra):
        out = subprocess.run([binary, str(n), "1" if instrumented else "0", site, str(loops)],
                             env=dict(env, **extra), capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    rows = {"plain": [], "level 0": [], "level 1 (file)": [], "level 1 (/dev/null)": []}
    for _ in range(REPS):
        rows["plain"].append(run(20_000_000, False))
        rows["level 0"].append(run(20_000_000, True, AOTI_DEBUG_LOGLEVEL="0"))
        rows["level 1 (file)"].append(run(200_000, True, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=log))
        os.unlink(log)
        rows["level 1 (/dev/null)"].append(run(200_000, True, AOTI_DEBUG_LOGLEVEL="1",
                                               AOTI_DEBUG_LOGDEST="/dev/null"))
    plain = statistics.median(rows["plain"])
    level0 = statistics.median(rows["level 0"])
    level1 = statistics.median(rows["level 1 (file)"])
    print(f"plain loop           {plain:8.2f} ns per iteration")
    print(f"level 0 (compiled 5) {level0:8.2f} ns per launch, +{level0 - plain:.2f} ns over plain "
          f"(target <= 5 ns)")
    print(f"level 1 to a file    {level1:8.1f} ns per launch, one flushed record each (target <= 2000 ns)")
    null = statistics.median(rows["level 1 (/dev/null)"])
    print(f"level 1 to /dev/null {null:8.1f} ns per launch: what is not the file system's share of the write")
    wrapper = linked != exe
    if wrapper:
        same_records(env, linked, work)
    cxx = tensor_launches(env, linked, run, wrapper)   # levels 3 and 5, both runtimes interleaved
    cxx["build"] = build
    python_wrapper(env, work, cxx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
