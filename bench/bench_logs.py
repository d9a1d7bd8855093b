"""The analysis commands on a long run's log: time and peak memory, beside `wc -l` of it.

    .venv/bin/python bench/bench_logs.py [--mib 256] [--commands nan-origin,timeline,report,diff]

Writes a level-5 log of about `--mib` MiB (one process, one run, launches that
read two tensors and write one, as the C++ runtime writes them; one launch near
the end turns finite inputs into NaN), then runs each command on it in its own
process and reports wall time and peak resident memory (`wait4`), each as a
ratio: time over `wc -l`'s time on the same file, memory over the log's size.
nan-origin must name the planted launch, or the run fails.  `--mib 2048` is
the 2-GiB figure in docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULE = "=" * 80


def tensor(pad: str, lo: float, hi: float, nan: int) -> str:
    return "".join(f"{pad}{line}\n" for line in (
        "Tensor(", "  shape=(8, 128)", "  stride=(128, 1)", "  dtype=torch.float32", "  device=cpu",
        "  requires_grad=False", "  is_contiguous=True", f"  min={lo:.6f}", f"  max={hi:.6f}",
        f"  mean={(lo + hi) / 2:.6f}", "  abs_min=0.000000", f"  abs_max={hi:.6f}", "  abs_mean=0.250000",
        f"  nan_count={nan}", "  inf_count=0", "  hash=0123456789abcdef", ")"))


def write_log(path: str, mib: int) -> tuple:
    """(launches written, the planted launch's number)."""
    start = datetime.datetime(2026, 11, 29, 8, 0, 0)
    target = mib * 2**20
    per_launch = 1340                       # bytes, about: to plant the NaN near the end
    planted = max(1, int(target / per_launch * 0.9))
    with open(path, "w") as f:
        f.write(f"{RULE}\n[{start:%Y-%m-%d %H:%M:%S.%f}] [pid 4242] aoti-debug - System Information\n"
                f"{RULE}\naoti-debug version: 0.1.0\nPyTorch version: 2.13.0+cpu\n{RULE}\n")
        f.write(f"[{start:%Y-%m-%d %H:%M:%S.%f}] [pid 4242] run 1 model thread=1\n")
        k, written = 0, 0
        while written < target:
            k += 1
            t0 = start + datetime.timedelta(microseconds=20 * k)
            t1 = t0 + datetime.timedelta(microseconds=10)
            kernel = f"cpp_fused_add_mul_{k % 97}"
            text = (f"[{t0:%Y-%m-%d %H:%M:%S.%f}] [pid 4242] launch model:1.{k} {kernel}\n"
                    f"  origin: nodes=add_{k % 97},mul_{k % 97} source=/srv/app/model.py:{k % 400 + 1}\n"
                    f"  module: layers.{k % 24}.mlp\n"
                    f"  in buf{k}:\n" + tensor("    ", -1.0, 1.0, 0)
                    + f"  in arg{k % 7}_1:\n" + tensor("    ", -2.0, 2.0, 0)
                    + f"[{t1:%Y-%m-%d %H:%M:%S.%f}] [pid 4242] launch-end model:1.{k} {kernel}\n"
                    f"  out buf{k + 1}:\n" + tensor("    ", -3.0, 3.0, int(k == planted)))
            f.write(text)
            written += len(text)
        end = start + datetime.timedelta(microseconds=20 * k + 15)
        f.write(f"[{end:%Y-%m-%d %H:%M:%S.%f}] [pid 4242] run-end 1 model\n")
    return k, planted


def measure(argv: list) -> tuple:
    """(seconds, peak resident bytes, stdout) of one command in its own process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    return seconds, usage.ru_maxrss * 1024, proc.returncode, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the log to write (MiB)")
    parser.add_argument("--commands", default="nan-origin,timeline,report,diff")
    parser.add_argument("--dir", default=None, help="where to write the log (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        log = os.path.join(tmp, "long.log")
        t0 = time.perf_counter()
        launches, planted = write_log(log, args.mib)
        size = os.path.getsize(log)
        print(f"wrote {log}: {size / 2**20:.0f} MiB, {launches} launches "
              f"({time.perf_counter() - t0:.0f} s); NaN planted in launch model:1.{planted}")
        wc_s, wc_rss, _, wc_out = measure(["wc", "-l", log])
        print(f"{'wc -l':<12} {wc_s:8.2f} s {wc_rss / 2**20:8.0f} MiB   ({wc_out.split()[0]} lines)")
        cli = [sys.executable, "-m", "aoti_debug"]
        runs = {"nan-origin": [log], "timeline": [log, "-o", os.path.join(tmp, "t.json")],
                "report": [log, "-o", os.path.join(tmp, "r.html")], "diff": [log, log]}
        failed = 0
        for name in args.commands.split(","):
            seconds, rss, code, out = measure(cli + [name] + runs[name])
            first = out.splitlines()[0] if out else ""
            print(f"{name:<12} {seconds:8.2f} s {rss / 2**20:8.0f} MiB   time {seconds / wc_s:6.0f}x wc -l, "
                  f"memory {rss / size:5.2f}x the log; exit {code}: {first[:90]}")
            expect = f"NaN/Inf origin: launch model:1.{planted} "
            if name == "nan-origin" and not first.startswith(expect):
                print(f"  FAIL: expected a line starting {expect!r}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
