"""The demo: a model with a planted bug, found by the tool.

    python -m aoti_debug.demo [--workdir DIR]

1. export a small model whose third step takes the log of negative numbers;
2. compile it with instrumentation (level 5, NaN checks in warn mode);
3. run it from Python and from the C++ runner, each writing its own log;
4. show the log around the launch that went wrong;
5. let `aoti-debug nan-origin` name the guilty kernel and source line;
then print the commands to try next, ready to copy.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import torch

from aoti_debug.analysis.mask import mask


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.embed(x))
        centred = h - h.mean(-1, keepdim=True)
        feats = torch.log(centred)                # the planted bug: log of the values below the mean
        return self.head(feats).softmax(-1)


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


class Progress:
    """Prints the elapsed time while a long step runs."""

    def __init__(self, what: str) -> None:
        self.what, self.done = what, threading.Event()

    def __enter__(self):
        self.start = time.time()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        return self

    def _tick(self) -> None:
        while not self.done.wait(5):
            print(f"    ... {self.what}: {time.time() - self.start:.0f} s", flush=True)

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        print(f"    {self.what}: done in {time.time() - self.start:.1f} s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aoti_debug.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to put the package and logs (default: a new temp dir)")
    parser.add_argument("--skip-cpp", action="store_true", help="do not build and run the C++ runner")
    args = parser.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="aoti-debug-demo-")
    os.makedirs(work, exist_ok=True)
    from aoti_debug import instrument
    from aoti_debug import runner

    torch.manual_seed(0)
    model = Scorer().eval()
    x = torch.randn(4, 8)
    inputs = os.path.join(work, "inputs.pt")
    runner.save_inputs(inputs, [x])

    step("1. export the model (it hides a log of negative numbers)")
    ep = torch.export.export(model, (x,))
    print(f"    forward(x) with x of shape {tuple(x.shape)}; eager output has NaN: "
          f"{bool(model(x).isnan().any())}")

    step("2. compile with instrumentation: level 5, NaN checks in warn mode")
    package = os.path.join(work, "scorer.pt2")
    with Progress("AOTI compile"), instrument(level=5, nan_check="warn"):
        torch._inductor.aoti_compile_and_package(ep, package_path=package)
    print(f"    {package}")

    step("3a. run it from Python (AOTI_DEBUG_LOGDEST=python_%i.log)")
    env = dict(os.environ, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=os.path.join(work, "python_%i.log"))
    code = ("import torch; m = torch._inductor.aoti_load_package(%r); "
            "y = m(torch.load(%r)[0]); print('    output has NaN:', bool(y.isnan().any()))" % (package, inputs))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    print(proc.stdout.rstrip())
    python_log = _newest(work, "python_")

    cpp_log = None
    if not args.skip_cpp:
        step("3b. run the same package from C++ (aoti-debug-run, no Python involved)")
        with Progress("building the C++ runner (once)"):
            exe = runner.build_runner()
        env = dict(os.environ, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=os.path.join(work, "cpp_%i.log"))
        proc = subprocess.run([exe, package, "--inputs", inputs], env=env, capture_output=True, text=True)
        print("    " + "\n    ".join(proc.stdout.rstrip().splitlines()))
        cpp_log = _newest(work, "cpp_")
        same = mask(open(python_log).read()) == mask(open(cpp_log).read())
        print(f"    the two logs are identical once timestamps and pids are masked: {same}")

    step("4. the log around the first NaN")
    print(_excerpt(open(python_log).read()))

    step("5. aoti-debug nan-origin: which kernel made the first NaN?")
    from aoti_debug.cli import main as cli
    print(f"    $ aoti-debug nan-origin {python_log}", flush=True)
    status = cli(["nan-origin", python_log])
    print(f"\n    logs: {work}")
    step("next: try these (ready to copy)")
    for line in next_steps(work, python_log, cpp_log):
        print("    " + line)
    return 0 if status == 1 else 1    # 1 = a NaN origin was found, as planted


def cli_command() -> str:
    """How to call the CLI from a shell: `aoti-debug` when that is this
    interpreter's, else its full path (a venv that is not activated)."""
    mine = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "aoti-debug")
    found = shutil.which("aoti-debug")
    if found and os.path.realpath(found) == os.path.realpath(mine):
        return "aoti-debug"
    if os.access(mine, os.X_OK):
        return shlex.quote(mine)
    return f"{shlex.quote(sys.executable)} -m aoti_debug"


def next_steps(work: str, python_log: str, cpp_log) -> list:
    tool = cli_command()
    lines = ["# the whole run on one page: timeline, statistics, the NaN origin",
             f"{tool} report {shlex.quote(python_log)} -o {shlex.quote(os.path.join(work, 'report.html'))}"]
    if cpp_log:
        lines += ["# the Python and the C++ run compared launch by launch (exit 0: they agree)",
                  f"{tool} diff {shlex.quote(python_log)} {shlex.quote(cpp_log)}"]
    lines += ["# every workflow step by step: docs/tutorial.md in the aoti-debug checkout"]
    return lines


def _newest(folder: str, prefix: str) -> str:
    logs = [os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(prefix)]
    return max(logs, key=os.path.getmtime)


def _excerpt(text: str) -> str:
    """The launch whose outputs the NaN check flagged, through the check's note:
    whole records (where the log parser says each begins), `…` where records
    are left out."""
    from aoti_debug.analysis.records import parse
    lines, recs = text.splitlines(), parse(text).records
    for i, rec in enumerate(recs):
        if rec.kind == "note" and rec.name == "nan-check":
            start = max((r.line for r in recs[:i] if r.kind == "launch"), default=rec.line)
            end = recs[i + 1].line - 1 if i + 1 < len(recs) else len(lines)
            return "    " + "\n    ".join(["…"] + lines[start - 1:end] + ["…"])
    return "    (no NaN was flagged)"


if __name__ == "__main__":
    sys.exit(main())
