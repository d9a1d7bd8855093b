"""Instructions per launch of torch.compile's launch extension and of the C++
shim, counted by callgrind (valgrind), so the figure does not move with the
machine's load as bench_launch.py's times do.

    python bench/bench_launch_instructions.py [--levels 3,5]

The launch is bench_launch.py's: PY_LOOP's site (two float32 CPU tensors of
16 elements; a `launch` record with two Tensor blocks and a `launch-end`
with one) to /dev/null, and bench_launch.cpp's `wrapper` site (the same
launch as an AOTI wrapper runs it: cpp_emit's statements, the tensors
described from their handles) built as AOTI artifacts are
(bench_launch.build_artifact_like).  Each runtime runs N1 and
N2 launches; a launch costs the difference over N2 - N1, so start-up (torch's
import, the first launch's site handle) drops out.  The extension is counted
inside its two calls only (callgrind --toggle-collect on launch and
launch_end: the rendering, the write and the GIL's release included, the
interpreter's call into them not); the C++ shim over its whole loop.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

# PY_LOOP's launch, N times, once
from bench_launch import SITE  # noqa: E402

LOOP = r"""
import sys, torch
from aoti_debug.runtime.launches import Model, Site
n = int(sys.argv[1])
model = Model("bench", 5, "", "off", False, torch.__version__)
""" + SITE + r"""run = model.begin_run(("x",), (arg0_1,))
launch, launch_end = model.calls
for _ in range(n):
    launch(run, site, buf0, arg0_1)
    launch_end(run, site, buf0, None)
from aoti_debug.runtime import launches
print("ctypes" if model.calls[0] is launches.launch else "extension")
"""


def collected(cmd, env, out):
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd], env=env,
                          capture_output=True, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", proc.stderr).group(1)), proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="3,5")
    parser.add_argument("--n", default="1000,3000", help="N1,N2 launches")
    args = parser.parse_args()
    n1, n2 = (int(x) for x in args.n.split(","))
    import bench_launch
    from aoti_debug.native import launch_ext
    launch_ext.build()
    work = tempfile.mkdtemp(prefix="aoti-debug-instr-")
    linked, build = bench_launch.build_artifact_like(work)
    loop = os.path.join(work, "loop.py")
    with open(loop, "w") as f:
        f.write(LOOP)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_") or k == "AOTI_DEBUG_CACHE_DIR"}
    base["PYTHONHASHSEED"] = "0"
    print(f"instructions per launch (callgrind, {n2} - {n1} launches; C++: {build}):")
    for level in (int(x) for x in args.levels.split(",")):
        env = dict(base, AOTI_DEBUG_LOGLEVEL=str(level), AOTI_DEBUG_LOGDEST="/dev/null")
        ext, cxx = [], []
        for n in (n1, n2):
            got, used = collected(["--toggle-collect=(anonymous namespace)::launch*", sys.executable, loop, str(n)],
                                  env, os.path.join(work, f"ext.{level}.{n}"))
            if used.strip() != "extension":
                raise SystemExit(f"the loop ran on {used.strip()}, not the extension")
            ext.append(got)
            cxx.append(collected([linked, str(n), "1", "wrapper"], env, os.path.join(work, f"cxx.{level}.{n}"))[0])
        e, c = (ext[1] - ext[0]) / (n2 - n1), (cxx[1] - cxx[0]) / (n2 - n1)
        print(f"  level {level}: torch.compile's extension {e:8.0f}, C++ shim {c:8.0f}, ratio {e / c:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
