"""`aoti-debug triage`: the debugging guide's chain run for the user (docs/triage.md).

The user's own command (or a package through the C++ runner) runs several
times with nothing changed but aoti-debug's run-time variables, each run's
log, command line and variables kept in DIR; the first run sorts the outcome,
the next ones narrow it to a launch, and a short verdict names it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..analysis.untrusted import create
from ..cli import FOUND, OK, UsageError, echo

# what the first run switches on: the sanity flags of the guide
FIRST = {"AOTI_DEBUG_CHECK_INPUTS": "1", "AOTI_DEBUG_NAN_CHECK": "warn:naninf", "AOTI_DEBUG_LOGLEVEL": "1",
         "AOTI_DEBUG_SYNC": "1"}
MAX_VERDICT = 15
HANG = "a hang (the timeout)"


def add_arguments(parser) -> None:
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where each run's log, command line and variables are kept "
                             "(default: a new aoti-debug-triage-* folder of the current directory)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="seconds one run may take before it counts as a hang and its whole "
                             "process group is ended (default: 600)")
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...] | PKG.pt2 --inputs IN.pt",
                        help="the command to triage after `--` (a Python script, a C++ server, ...), or a "
                             "package with its saved inputs (aoti_debug.runner.save_inputs), run through "
                             "aoti-debug-run; then --library LIB.so for the custom-op libraries it calls")


@dataclass
class Outcome:
    """One run: how it ended and what its log says."""
    step: str
    log: str
    returncode: Optional[int]
    seconds: float
    timed_out: bool
    stderr: str
    notes: Dict[str, List[str]] = field(default_factory=dict)    # topic -> messages
    crash: Optional[object] = None        # the crash record (records.Record)
    last_launch: Optional[object] = None  # the last `launch` record written
    launches: Dict[str, object] = field(default_factory=dict)   # launch id -> its `launch` record


def run(args) -> int:
    command = _command(args.target)
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: a number of seconds above 0")
    out = _own_folder(os.path.abspath(args.out or _new_folder()))
    runs = Runs(command, out, args.timeout)
    try:
        lines, found = triage(runs)
    except KeyboardInterrupt:
        lines, found = ["interrupted: " + (runs.done[-1].step + " was the last run that ended"
                                           if runs.done else "no run ended")], False
    lines = lines[:MAX_VERDICT - 1] + [f"everything it ran, with each log and command line: {out}"]
    echo(lines)
    return FOUND if found else OK


def _own_folder(path: str) -> str:
    """DIR made private (0700), or one of the user's own that is there; a link or another
    user's folder is refused: what triage writes is the user's alone."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise UsageError(f"--out {path}: not a folder of yours (a link, a file, or another user's); "
                             "give a new folder or one you own") from None
    return path


def _new_folder() -> str:
    return os.path.abspath(time.strftime("aoti-debug-triage-%Y%m%d-%H%M%S"))


def _command(target: List[str]) -> List[str]:
    target = target[1:] if target[:1] == ["--"] else list(target)
    if not target:
        raise UsageError("expected `-- COMMAND [ARGS...]` or `PKG.pt2 --inputs IN.pt`")
    if not target[0].endswith(".pt2"):
        return target
    parser = argparse.ArgumentParser(prog="aoti-debug triage PKG.pt2", add_help=False)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--library", action="append", default=[])
    try:
        given, rest = parser.parse_known_args(target[1:])
    except SystemExit:
        raise UsageError(f"{target[0]}: a package is triaged with its inputs: "
                         f"{target[0]} --inputs IN.pt [--library LIB.so ...]") from None
    if rest:
        raise UsageError(f"{target[0]}: unrecognized arguments: {' '.join(rest)} "
                         "(accepted after a package: --inputs IN.pt, --library LIB.so)")
    from ..runner import build_runner
    cmd = [str(build_runner()), target[0], "--inputs", given.inputs]
    for lib in given.library:
        cmd += ["--library", lib]
    return cmd


class Runs:
    """The user's command, run with aoti-debug's variables, one numbered step at a time."""

    def __init__(self, command: List[str], out: str, timeout: float) -> None:
        self.command, self.out, self.timeout = command, out, timeout
        self.done: List[Outcome] = []

    def run(self, step: str, what: str, env: Dict[str, str]) -> Outcome:
        number = len(self.done) + 1
        base = os.path.join(self.out, f"{number}-{step}")
        log = base + ".log"
        variables = {**env, "AOTI_DEBUG_LOGDEST": log}
        with create(base + ".cmd.json") as f:
            f.write(json.dumps({"command": self.command, "variables": variables}, indent=1).encode())
        _progress(f"[{number}] {what} ...")
        start = time.monotonic()
        timed_out = False
        with create(base + ".stdout") as stdout, create(base + ".stderr") as stderr:
            proc = subprocess.Popen(self.command, env={**os.environ, **variables}, stdout=stdout, stderr=stderr,
                                    start_new_session=True)
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:                # also on Ctrl-C, which then goes on up
                _end(proc)
        seconds = time.monotonic() - start
        with open(base + ".stderr", "rb") as f:
            err = f.read()[-65536:].decode("utf-8", "replace")
        outcome = Outcome(step, log, None if timed_out else proc.returncode, seconds, timed_out, err)
        _read_log(outcome)
        self.done.append(outcome)
        _progress(f"[{number}] {what}: {_sorted_as(outcome)} ({seconds:.1f} s)")
        return outcome


def _end(proc: subprocess.Popen) -> None:
    """The run's whole process group ended (a server's workers too)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def _progress(text: str) -> None:
    print(f"aoti-debug triage: {text}", file=sys.stderr, flush=True)


def _read_log(outcome: Outcome) -> None:
    from ..analysis import load
    from ..analysis.untrusted import InputError
    if not os.path.exists(outcome.log):
        return
    try:
        log = load.read(outcome.log)
    except InputError:
        return
    for r in log.records:
        if r.kind == "note":
            outcome.notes.setdefault(r.name, []).extend(r.notes)
        elif r.kind == "crash":
            outcome.crash = r
        elif r.kind == "launch":
            outcome.last_launch = outcome.launches[r.id] = r


def _sorted_as(o: Outcome) -> str:
    if o.timed_out:
        return HANG
    if o.notes.get("input-check"):
        return "a bad input"
    if o.crash is not None or (o.returncode or 0) < 0:
        return "a crash"
    if o.notes.get("memcheck") or o.notes.get("plan-check"):
        return "a memory bug"
    if o.notes.get("nan-check"):
        return "NaN/Inf"
    if o.returncode:
        return f"exit status {o.returncode}"
    return "clean"


def triage(runs: Runs):
    """(verdict lines, whether something was found)."""
    first = runs.run("first", "first run: input guards, NaN/Inf check (Inf too), level 1, sync", FIRST)
    said = _recompile(first)
    kind = _sorted_as(first)
    if kind == "a bad input":
        return ["a bad input: the model's input guard refused it"] + _guard_lines(first) + said, True
    if kind == "NaN/Inf":
        return _nan(runs) + said, True
    if kind in ("a crash", "a memory bug", HANG):
        return _crash(runs, first, kind) + said, True
    if kind != "clean":
        tail = [line for line in first.stderr.strip().splitlines() if line.strip()][-3:]
        return [f"the command ended with {kind}, and no check of aoti-debug spoke"] + tail + said, True
    lines, found = _clean(runs)
    return lines + said, found


def _guard_lines(o: Outcome) -> List[str]:
    """The guard's messages, without the offending inputs' Tensor blocks that follow them."""
    lines = []
    for line in o.notes.get("input-check", []):
        if line.startswith(" ") or re.fullmatch(r"(in|out|inout) \S+:", line):
            continue
        lines.append("  " + line)
    return lines[:MAX_VERDICT - 3]


def _recompile(o: Outcome) -> List[str]:
    """What the package was not compiled with, as its settings note says."""
    return [f"  note: {n}" for n in o.notes.get("settings", []) if "Recompile" in n][:3]


def _nan(runs: Runs) -> List[str]:
    from ..analysis import load, nan_origin
    second = runs.run("nan", "level 5 with the NaN/Inf check: the first launch that made NaN/Inf",
                      {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    try:
        finding = nan_origin.find(load.read(second.log))
    except Exception as exc:       # an unreadable log is said, not raised
        return [f"NaN/Inf, but its level-5 log could not be read: {type(exc).__name__}: {exc}"]
    return _short(nan_origin.text(finding)) + [f"  more: aoti-debug nan-origin {second.log}"]


def _short(lines: List[str]) -> List[str]:
    """nan-origin's answer without the clean tensors: each finite input and output it lists."""
    kept, section = [], ""
    for line in lines:
        if not line.startswith("    "):
            section = line.strip()
            if section.startswith("inputs"):
                continue
        elif section.startswith("inputs") or " nan_count=0 inf_count=0" in line:
            continue
        kept.append(line)
    return kept[:MAX_VERDICT - 3]


def _memory_bug(o: Outcome, kind: str) -> List[str]:
    """What the plan check and the memory check said in run `o` ([] when nothing)."""
    lines = [f"{topic}: {note}" for topic in ("plan-check", "memcheck") for note in o.notes.get(topic, [])[:3]]
    if not lines:
        return []
    return [f"{kind}, a memory bug named by the {'plan' if 'plan-check' in o.notes else 'memory'} check:"] + lines


def _crash(runs: Runs, first: Outcome, kind: str) -> List[str]:
    if kind == "a memory bug":
        found = first
    else:
        found = runs.run("memcheck", "level 3 with the memory check: a launch that wrote out of bounds "
                                     "or read memory nobody wrote",
                         {**FIRST, "AOTI_DEBUG_LOGLEVEL": "3", "AOTI_DEBUG_MEMCHECK": "raise"})
    lines = _memory_bug(found, kind)
    if lines:
        return lines
    if _sorted_as(found) == kind:    # the same again, now with each launch's line and module
        first = found
    crash = first.crash
    if kind == HANG:
        head = f"a hang: no end after {runs.timeout:g} s"
    else:
        signal_line = next((n for n in (crash.notes if crash is not None else []) if n.startswith("signal:")), "")
        head = "a crash" + (f" ({signal_line})" if signal_line else
                            f" (exit status {first.returncode})" if first.returncode else "")
    # the launch in flight: the crash record names it, or a call logged inside the last launch
    # that started (an op's own log_api call); `crash - -`: none; a hang: the last one started
    call = ""
    if crash is not None and crash.id in first.launches:
        where = first.launches[crash.id]
    elif crash is not None and crash.id != "-":
        where, call = first.last_launch, f", in its call {crash.name}"
    else:
        where = None if crash is not None else first.last_launch
    if where is None:
        return [head + "; no launch was in flight (outside the model's kernels)"]
    return [head + f"; the launch in flight: {_launch_words(where)}{call}"]


def _launch_words(record) -> str:
    """`M:R.K kernel (nodes=... source=file:line, module a.b)`, as the checks name a launch."""
    o = record.origin
    if o is None:
        return f"{record.id} {record.name}"
    module = f", module {o.module}" if o.module else ""
    return f"{record.id} {record.name} (nodes={','.join(o.nodes) or '-'} source={o.source or '-'}{module})"


def _clean(runs: Runs):
    """(lines, found): the memory check, which finds what runs silently on a CPU (a write past
    the end, a read of memory nobody wrote); then two identical level-5 runs compared launch by
    launch: a launch whose outputs differ is a race, or memory read before it was written."""
    from ..analysis import diff, load
    mem = runs.run("memcheck", "the memory check: writes out of bounds, reads of memory nobody wrote",
                   {**FIRST, "AOTI_DEBUG_MEMCHECK": "warn"})
    said = _memory_bug(mem, "clean without it")
    if said:
        return said, True
    a = runs.run("repeat-a", "level 5, run A of two identical runs", {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    b = runs.run("repeat-b", "level 5, run B of two identical runs", {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    odd = next((o for o in (mem, a, b) if _sorted_as(o) != "clean"), None)
    if odd is not None:
        return [f"clean once, then {_sorted_as(odd)} in a repeated run: see {odd.log}"], True
    try:
        result = diff.diff(load.read(a.log), load.read(b.log), run=1, atol=0.0, rtol=0.0, exact=True)
    except Exception as exc:     # never called clean when it could not be compared
        return [f"nothing found, but the repeated runs could not be compared ({type(exc).__name__}: {exc}): "
                f"see {a.log} and {b.log}"], True
    if result.first_divergence is not None:
        return ["two identical runs differ (a race, or memory read before anything wrote it):"] + \
            diff.summary(result)[:6], True
    return [f"nothing found in {len(runs.done)} runs: input guards, NaN/Inf check, sync and the memory check "
            "clean, and two identical runs agree at every launch"], False
