"""`aoti-debug triage`: the debugging guide's chain run for the user (docs/triage.md).

The user's own command (or a package through the C++ runner) runs several
times with nothing changed but aoti-debug's run-time variables, each run's
log, command line and variables kept in DIR; the first run sorts the outcome,
the next ones narrow it to a launch, that launch is dumped alone at level 10,
judged against eager and extracted as a reproducer that runs once on its own,
and a short verdict names it all.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from . import add_library, allow_modules
from ..analysis.untrusted import create
from ..cli import CRASHED, FOUND, INCOMPLETE, OK, UsageError, echo

# what the first run switches on: the sanity flags of the guide
FIRST = {"AOTI_DEBUG_CHECK_INPUTS": "1", "AOTI_DEBUG_NAN_CHECK": "warn:naninf", "AOTI_DEBUG_LOGLEVEL": "1",
         "AOTI_DEBUG_SYNC": "1"}
# and, on CUDA, the guide's deterministic faults: each allocation its own (an access past its end
# faults at once) and each launch waited for; left out of the repeated runs, which look for races
CUDA_FAULTS = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"}
# the first run's black box: the last launches' inputs, kept through a crash or a kill, in its own
# folder of DIR (a small ring: triage keeps one per run it may need)
BLACK_BOX = {"AOTI_DEBUG_BLACKBOX": "64", "AOTI_DEBUG_BLACKBOX_MAX_MB": "64"}
MAX_VERDICT = 15
HANG = "a hang (the timeout)"


def add_arguments(parser) -> None:
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where each run's log, command line and variables are kept "
                             "(default: a new aoti-debug-triage-* folder of the current directory)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="seconds one run may take before it counts as a hang and its whole "
                             "process group is ended (default: 600)")
    parser.add_argument("--cwd", metavar="DIR", default=None,
                        help="run the command in this folder (a scratch folder, for a command that writes "
                             "files it should not write twice); default: the current directory")
    parser.add_argument("--allow-module", metavar="MODULE", action="append", default=[],
                        help="a Python module that registers the custom ops the model calls: imported where "
                             "the culprit launch is re-run (check, the reproducer); repeatable")
    add_library(parser)
    parser.add_argument("--reference", metavar="SCRIPT", default=None,
                        help="a Python script that writes the model's eager reference "
                             "(aoti_debug.eager_log): when the runs are clean, its level-5 log is "
                             "compared with the command's, and the first FX node that diverges is named")
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
    stdout: str = ""
    notes: Dict[str, List[str]] = field(default_factory=dict)    # topic -> messages
    crash: Optional[object] = None        # the crash record (records.Record)
    last_launch: Optional[object] = None  # the last `launch` record written
    launches: Dict[str, object] = field(default_factory=dict)   # launch id -> its `launch` record
    ranks: Dict[int, int] = field(default_factory=dict)         # pid -> rank, where its run record says
    sorted_as: str = ""
    parsed: Optional[object] = None       # its log, read once (analysis.load.read)
    unread: Optional[Exception] = None    # or why it could not be read

    def read(self):
        """The run's log as it was read after the run; raises what reading it raised."""
        if self.unread is not None:
            raise self.unread
        return self.parsed

    def file(self, suffix: str) -> str:
        """A file the step left beside its log: `.stdout`, `.stderr`, `.d` (a dump folder)."""
        return self.log[:-len(".log")] + suffix


def run(args) -> int:
    target = _target(args.target)
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: a number of seconds above 0")
    allow_modules(args.allow_module, load=False)
    if args.reference is not None and not os.path.isfile(args.reference):
        raise UsageError(f"--reference {args.reference}: not a file (give a Python script that calls "
                         "aoti_debug.eager_log on the model and its inputs)")
    if args.cwd is not None and not os.path.isdir(args.cwd):
        raise UsageError(f"--cwd {args.cwd}: not a folder (give the folder the command should run in)")
    out = _own_folder(os.path.abspath(args.out or _new_folder()))
    runs = Runs(target.command, out, args.timeout, cwd=args.cwd, package=target.package,
                libraries=[_library_path(lib) for lib in args.library + target.libraries],
                modules=list(args.allow_module),
                reference=os.path.abspath(args.reference) if args.reference else None)
    try:
        lines, found = triage(runs)
        status = INCOMPLETE if found is None else FOUND if found else OK
    except KeyboardInterrupt:
        # what the steps that ended found, and that the chain stopped short: never called clean
        lines = runs.learned + ["interrupted (Ctrl-C): " + ("; ".join(f"[{n}] {o.step}: {o.sorted_as}" for n, o in
                                                                      enumerate(runs.done, 1)) or "no run ended")]
        status = CRASHED
    lines = lines[:MAX_VERDICT - 2] + _report(runs) + [f"everything it ran, with each log and command line: {out}"]
    echo(lines)
    return status


def _library_path(lib: str) -> str:
    """A library as aoti-debug-run finds it (a file here, else dlopen's search), made absolute
    where it is a file, so the steps that run elsewhere (--cwd, the reproducer) find the same one."""
    return os.path.abspath(lib) if "/" in lib or os.path.isfile(lib) else lib


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


@dataclass
class Target:
    command: List[str]
    package: Optional[str] = None           # the short form's package
    libraries: List[str] = field(default_factory=list)


def _target(target: List[str]) -> Target:
    target = target[1:] if target[:1] == ["--"] else list(target)
    if not target:
        raise UsageError("expected `-- COMMAND [ARGS...]` or `PKG.pt2 --inputs IN.pt`")
    if not target[0].endswith(".pt2"):
        return Target(target)
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
    cmd = [str(build_runner()), os.path.abspath(target[0]), "--inputs", os.path.abspath(given.inputs)]
    for lib in given.library:
        cmd += ["--library", _library_path(lib)]
    return Target(cmd, os.path.abspath(target[0]), list(given.library))


class Runs:
    """The user's command, run with aoti-debug's variables, one numbered step at a time."""

    def __init__(self, command: List[str], out: str, timeout: float, cwd: Optional[str] = None,
                 package: Optional[str] = None, libraries: Sequence[str] = (), modules: Sequence[str] = (),
                 reference: Optional[str] = None) -> None:
        self.command, self.out, self.timeout, self.cwd = command, out, timeout, cwd
        self.package, self.libraries, self.modules = package, list(libraries), list(modules)
        self.reference = reference
        self.done: List[Outcome] = []
        self.learned: List[str] = []      # what the steps found so far: said on Ctrl-C

    def path(self, name: str) -> str:
        """A file of the step about to run: `N-name`."""
        return os.path.join(self.out, f"{len(self.done) + 1}-{name}")

    def run(self, step: str, what: str, env: Dict[str, str], command: Optional[List[str]] = None,
            ours: bool = True) -> Outcome:
        """Runs the user's command with `env` added (its log to N-step.log); given `command`,
        the user's command under a tool (`ours=False`: compute-sanitizer), or one of triage's
        own (a check, the reproducer) without aoti-debug's variables."""
        number = len(self.done) + 1
        base = os.path.join(self.out, f"{number}-{step}")
        log = base + ".log"
        user = command is None or not ours      # the user's command (under a tool or not)
        if user:
            command, variables = command or self.command, {**env, "AOTI_DEBUG_LOGDEST": log}
            environ, cwd = {**os.environ, **variables}, self.cwd
        else:
            variables = env
            environ, cwd = {**_without_ours(os.environ), **variables}, self.out
        with create(base + ".cmd.json") as f:
            f.write(json.dumps({"command": command, "variables": variables, "cwd": os.path.abspath(cwd or ".")},
                               indent=1).encode())
        _progress(f"[{number}] {what} ...")
        start = time.monotonic()
        timed_out = False
        with create(base + ".stdout") as stdout, create(base + ".stderr") as stderr:
            proc = subprocess.Popen(command, env=environ, stdout=stdout, stderr=stderr, cwd=cwd,
                                    start_new_session=True)
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:                # also on Ctrl-C, which then goes on up
                _end(proc)
        seconds = time.monotonic() - start
        outcome = Outcome(step, log, None if timed_out else proc.returncode, seconds, timed_out,
                          _tail(base + ".stderr"), _tail(base + ".stdout"))
        _read_log(outcome)
        outcome.sorted_as = _sorted_as(outcome) if user or outcome.timed_out or (outcome.returncode or 0) < 0 \
            else "done" if outcome.returncode == 0 else f"exit status {outcome.returncode}"
        self.done.append(outcome)
        _progress(f"[{number}] {what}: {outcome.sorted_as} ({seconds:.1f} s)")
        return outcome


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
        return f.read().decode("utf-8", "replace")


def _without_ours(environ) -> Dict[str, str]:
    """The environment without aoti-debug's variables and their upstream aliases: triage's own
    steps (re-running a launch in eager) are not instrumented by what the user set."""
    from ..settings import ALL_NAMES, PREFIX
    return {k: v for k, v in environ.items() if not k.startswith(PREFIX) and k not in ALL_NAMES}


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
    try:
        log = outcome.parsed = load.read(outcome.log)
    except InputError as exc:       # no log, or none readable: said by whoever needs it
        outcome.unread = exc
        return
    for r in log.records:
        if r.kind == "note":
            outcome.notes.setdefault(r.name, []).extend(r.notes)
        elif r.kind == "crash":
            outcome.crash = r
        elif r.kind == "launch":
            outcome.last_launch = outcome.launches[r.id] = r
        elif r.kind == "run" and r.rank is not None:
            outcome.ranks[r.pid] = r.rank


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
        return "saturated values" if _saturation(o) else "NaN/Inf"
    if o.returncode:
        return f"exit status {o.returncode}"
    return "clean"


def triage(runs: Runs):
    """(verdict lines, whether something was found: None when the runs cannot tell)."""
    first = runs.run("first", "first run: input guards, NaN/Inf check (Inf too), level 1, sync, "
                              "no caching allocator, blocking launches, the black box",
                     {**FIRST, **CUDA_FAULTS, **BLACK_BOX, "AOTI_DEBUG_DUMP_DIR": runs.path("first.d")})
    said = _recompile(first)
    kind = first.sorted_as
    if kind == "a bad input":
        return ["a bad input: the model's input guard refused it"] + _guard_lines(first) + said, True
    if kind == "NaN/Inf" and _bad_scale(first):
        return _bad_scale(first) + said, True
    if kind == "NaN/Inf":
        return _nan(runs) + said, True
    if kind == "saturated values":
        return _saturation(first) + said, True
    if kind in ("a crash", "a memory bug", HANG):
        return _crash(runs, first, kind) + said, True
    if kind != "clean":
        tail = [line for line in first.stderr.strip().splitlines() if line.strip()][-3:]
        return [f"the command ended with {kind}, and no check of aoti-debug spoke"] + tail + said, True
    if not os.path.exists(first.log):      # nothing watched it: never called clean
        return ["not a verdict: the command ran and wrote no aoti-debug log, so what it runs carries no "
                "aoti-debug instrumentation (compile it with AOTI_DEBUG_COMPILE=all)"], None
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


# -- NaN/Inf -----------------------------------------------------------------------------

# the NaN check's finding of a scale holding a zero, NaN or Inf (docs/checks.md "Bad scales")
_SCALE_FINDING = re.compile(r"^launch \S+ \S+ \(source [^)]*\) read scale_\w+ \S+ holding ")


def _bad_scale(o: Outcome) -> List[str]:
    """When the run's first NaN-check finding is a bad scale: that finding, which names the
    launch that read it (and the one that computed it); a zero scale leaves no NaN for
    nan-origin to find.  Else nothing."""
    findings = o.notes.get("nan-check", [])
    if not findings or not _SCALE_FINDING.match(findings[0]):
        return []
    runs_said = [line for line in findings if line.startswith("run ")]
    return (["a bad scale: a launch read a scale holding a zero, NaN or Inf; what it writes is wrong, "
             "NaN or not (docs/checks.md, Bad scales)", "  " + findings[0]]
            + [f"  {line}" for line in runs_said[:1]] + [f"  more: {o.log}"])


def _saturation(o: Outcome) -> List[str]:
    """When every NaN-check finding of the run is saturated float8 values, no NaN/Inf
    (AOTI_DEBUG_NAN_CHECK_SAT=1 in the command's environment): the first launch where they
    appear, as nan-origin names it on a level-5 log; a level-5 run would find no NaN/Inf to
    follow.  Else nothing."""
    from ..analysis.nan_origin import SATURATED
    findings = [line for line in o.notes.get("nan-check", []) if not line.startswith("run ")]
    matched = [(line, SATURATED.match(line)) for line in findings]
    if not findings or not all(m for _, m in matched):
        return []
    first = next((line for line, m in matched if not m["inputs"].endswith("already held ")), findings[0])
    runs_said = [line for line in o.notes.get("nan-check", []) if line.startswith("run ")]
    # the formats, as the run's summary names them: float8, float4, float8/float4
    said = next((m.group(1) for line in runs_said for m in [re.search(r": saturated (\S+) in ", line)] if m), "float8")
    return ([f"saturated {said}: a launch wrote {said} values at the format's largest finite value where its "
             "inputs held none, an overflow the cast saturated silently; no NaN/Inf (docs/checks.md, fp8 models)",
             "  " + first] + [f"  {line}" for line in runs_said[:1]] + [f"  more: {o.log}"])


def _nan(runs: Runs) -> List[str]:
    from ..analysis import nan_origin
    second = runs.run("nan", "level 5 with the NaN/Inf check: the first launch that made NaN/Inf",
                      {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    try:
        finding = nan_origin.find(second.read())
    except Exception as exc:       # an unreadable log is said, not raised
        return [f"NaN/Inf, but its level-5 log could not be read: {type(exc).__name__}: {exc}"]
    lines = [_cut(line) for line in _short(nan_origin.text(finding))[:NAN_LINES]]
    lines.append(f"  more: aoti-debug nan-origin {second.log}")
    runs.learned = list(lines)
    origin = finding.origin.event if finding.origin is not None else None
    if origin is None or origin.start is None or origin.start.kind != "launch":
        return lines        # a log_api call, or NaN/Inf already in the inputs: nothing to re-run
    process = finding.processes.get(origin.pid)
    judged = _pinpoint(runs, origin.start, judge=True, rank=process.rank if process is not None else None)
    return lines + _nan_kind(judged, finding, origin) + judged.repro_lines


NAN_LINES = 8       # of nan-origin's answer; the rest of the 15 say whose NaN it is and the reproducer
LIST_MAX = 240      # characters of its lists of later launches (`27 later launches show ...`)


def _cut(line: str) -> str:
    """A list of later launches cut short (nan-origin says it whole); every other line whole."""
    if not line[:1].isdigit() or len(line) <= LIST_MAX:
        return line
    return line[:LIST_MAX - 4] + " ..."


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
    return kept


def _nan_kind(judged: "Judged", finding, origin) -> List[str]:
    """Whose NaN it is, from the launch re-run in eager in its dtype and in float64: the
    kernel's (eager is finite), the dtype's (float64 is finite), or the math's on its inputs
    (float64 too: the launches that made those inputs named)."""
    if judged.error:
        return [f"whose NaN/Inf: not told ({judged.error})"]
    bad = [o for o in judged.outputs if o["nonfinite"]]
    if not bad:
        return ["whose NaN/Inf: not told (the re-run launch's recorded outputs hold none: " +
                ("; ".join(f"{o['name']}: {o['skipped']}" for o in judged.outputs if o["skipped"])
                 or "a NaN/Inf that the run does not repeat") + ")"]
    counts = "; ".join(f"{o['name']}: {o['nonfinite']} recorded, {o['eager_nonfinite']} in eager {o['dtype']}"
                       + (f", {o['wide_nonfinite']} in float64" if o["wide_nonfinite"] is not None else "")
                       for o in bad)[:300]
    if all(o["eager_nonfinite"] == 0 for o in bad):
        return [f"the kernel is wrong: eager gives no NaN/Inf on the same inputs ({counts})"]
    if all(o["wide_nonfinite"] == 0 for o in bad):
        return [f"the math leaves {bad[0]['dtype']}'s range: eager makes NaN/Inf too, float64 none ({counts})"]
    if any(o["wide_nonfinite"] is None for o in bad):
        return [f"not the kernel: eager makes NaN/Inf too; float64 not run ({counts})"]
    return [f"not the kernel, nor the dtype: float64 makes NaN/Inf too, from these inputs ({counts})",
            "  inputs made by: " + _producers(finding, origin)]


def _producers(finding, origin) -> str:
    """Which launch last wrote each input of `origin` before it: the one whose output has the
    input's content hash (Inductor reuses and renames buffers: `buf5 = buf4`), else its name;
    an input none wrote is the model's input or a weight."""
    made: Dict[str, object] = {}
    for event in finding.all_events:
        if event is origin:
            break
        if event.pid == origin.pid and event.start is not None and event.start.kind == "launch":
            for item in event.outputs:
                made[item.name] = event
                made.update((key, event) for key in _hashes(item))
    said = []
    for item in origin.inputs:
        event = next((made[k] for k in _hashes(item) if k in made), None) or made.get(item.name)
        if event is None:
            said.append(f"{item.name} (a model input or weight)")
            continue
        module = event.origin.module if event.origin is not None else None
        said.append(f"{item.name} by {event.title}" + (f" (module {module})" if module else ""))
    return "; ".join(said)[:400] or "-"


def _hashes(item) -> List[str]:
    """The content hash of each tensor of a value, with its shape and dtype, as a key."""
    return [f"{t.fields['hash']} {t.fields.get('shape')} {t.fields.get('dtype')}"
            for _, t in item.tensors() if t.fields.get("hash")]


# -- the culprit launch: dumped, judged, extracted, its reproducer run --------------------

@dataclass
class Judged:
    """What the level-10 run filtered to the culprit launch, check and extract made of it."""
    outputs: List[dict] = field(default_factory=list)   # check's Output of each, as JSON
    error: str = ""                                      # why it was not checked
    repro_lines: List[str] = field(default_factory=list)


# the reproducer of a memory bug: its AOTI package compiled with the memory check, which raises
MEMORY_REPRO = {"AOTI_DEBUG_COMPILE": "all", "AOTI_DEBUG_MEMCHECK": "raise"}


def _pinpoint(runs: Runs, launch, judge: bool, rank: Optional[int], memory: bool = False) -> Judged:
    """A level-10 run that dumps only `launch`'s kernel; then, in a process of its own (the
    launch's ops may crash it), `check` of that launch against eager when `judge`, and
    `extract` into OUT/repro; then the reproducer run once, alone (`memory`: a memory bug the
    memory or plan check named, run through AOTI with the memory check).  `rank`: the process's
    rank under torchrun, whose dump is the culprit's (each rank dumps into its own folder)."""
    judged = Judged()
    dump = runs.path("dump.d")
    env = {**FIRST, **CUDA_FAULTS, "AOTI_DEBUG_LOGLEVEL": "10", "AOTI_DEBUG_KERNELS": launch.name,
           "AOTI_DEBUG_DUMP_DIR": dump if rank is None else os.path.join(dump, "rank%r")}
    runs.run("dump", f"level 10 filtered to {launch.name}: its inputs and outputs dumped", env)
    if rank is not None:
        dump = os.path.join(dump, f"rank{rank}")
    repro = os.path.join(runs.out, "repro")
    request = {"dump": dump, "launch": launch.id, "judge": judge, "out": repro, "package": runs.package,
               "libraries": runs.libraries, "modules": runs.modules}
    done = runs.run("extract", ("check against eager and " if judge else "") + f"extract {launch.id}",
                    {}, [sys.executable, "-c", _JUDGE, json.dumps(request)])
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = done.sorted_as if done.sorted_as != "clean" else "it printed no answer"
        judged.error = f"check and extract ended with {why}: see {done.file('.stderr')}"
        judged.repro_lines = [f"reproducer: none ({judged.error})"]
        return judged
    judged.outputs, judged.error = answer.get("outputs", []), answer.get("check_error", "")
    if answer.get("extract_error"):
        judged.repro_lines = [f"reproducer: none ({answer['extract_error']})"]
        return judged
    script = os.path.join(repro, "repro.py")
    if memory:      # through AOTI with the memory check compiled in: its guard regions see the bug alone
        what, flags, env = "through AOTI with the memory check", ["--skip-compile"], MEMORY_REPRO
    else:
        what, flags, env = "eager and torch.compile", ["--skip-aoti"], {}
    ran = runs.run("repro", f"the reproducer, alone ({what})", env,
                   [sys.executable, "-c", _REPRO, json.dumps({"script": script, "flags": flags,
                                                              "libraries": runs.libraries,
                                                              "modules": runs.modules})])
    # the recording holds the NaN only where the dumped launch made it again
    nan = judge and any(o["nonfinite"] for o in judged.outputs)
    judged.repro_lines = [f"reproducer: {script}: {_repro_said(ran, nan)}"]
    return judged


# run in a process of its own: the user's ops re-run there, and may crash it
_JUDGE = """
import json, sys
from aoti_debug.commands.triage import judge_request
print(json.dumps(judge_request(json.loads(sys.argv[1]))))
"""

_REPRO = """
import importlib, json, runpy, sys, torch
r = json.loads(sys.argv[1])
for lib in r["libraries"]:
    torch.ops.load_library(lib)
for module in r["modules"]:
    importlib.import_module(module)
sys.argv = [r["script"], *r["flags"]]
runpy.run_path(r["script"], run_name="__main__")
"""


def judge_request(request: dict) -> dict:
    """_JUDGE's work: the culprit's outputs as check judged them, and the extracted folder."""
    import dataclasses

    import torch

    from ..analysis import check, extract
    from ..analysis.untrusted import InputError
    answer: dict = {}
    for lib in request["libraries"]:
        torch.ops.load_library(lib)
    allow_modules(request["modules"], load=True)
    try:
        folder = extract.find(request["dump"], request["launch"])[0]
    except (InputError, OSError) as exc:
        return {"check_error": f"not dumped: {exc}", "extract_error": f"not dumped: {exc}"}
    if request["judge"]:
        number = request["launch"].rpartition(":")[2]
        found = [launch for launch in check.check(folder) if launch.ident == number]
        if not found:
            answer["check_error"] = f"{request['launch']} is not in the dump {folder}"
        elif not found[0].checkable:
            answer["check_error"] = f"check cannot re-run it: {found[0].reason()}"
        else:
            answer["outputs"] = [dataclasses.asdict(o) for o in found[0].outputs]
    try:
        extract.extract(request["dump"], request["launch"], request["out"], package=request["package"])
    except (extract.NotExtractable, InputError, OSError) as exc:
        answer["extract_error"] = f"it cannot be extracted: {exc}"
    return answer


def _repro_said(o: Outcome, nan: bool) -> str:
    """What the reproducer's run shows; `nan`: the recording holds the NaN/Inf, so matching it
    is making it again."""
    if o.timed_out:
        return f"hangs on its own too (no end after {o.seconds:.0f} s)"  # the timeout's, as the run's
    if o.returncode is not None and o.returncode < 0:
        try:
            name = signal.Signals(-o.returncode).name
        except ValueError:
            name = f"signal {-o.returncode}"
        return f"fails on its own: it crashes ({name})"
    said = [line.strip() for line in o.stdout.splitlines() if line.strip()]
    differs = [line for line in said if "DIFFERS" in line or "could not run" in line]
    if o.returncode == 0 and nan:
        return "makes the same NaN/Inf on its own (eager and torch.compile match the recording)"
    if o.returncode == 0:
        return "runs clean on its own (the fault needs the whole model to be seen)"
    if o.returncode == 1 and differs:
        return f"fails on its own: {differs[0][:320]}"
    return f"ends with exit status {o.returncode} on its own (see {o.file('.stderr')})"


# -- a crash, a hang, a memory bug -------------------------------------------------------

def _memory_bug(o: Outcome, kind: str) -> List[str]:
    """What the plan check and the memory check said in run `o` ([] when nothing)."""
    lines = [f"{topic}: {note}" for topic in ("plan-check", "memcheck") for note in o.notes.get(topic, [])[:3]]
    if not lines:
        return []
    head = f"a memory bug named by the {'plan' if 'plan-check' in o.notes else 'memory'} check:"
    return [head if kind == "a memory bug" else f"{kind}, {head}"] + lines


def _named_launch(o: Outcome):
    """The launch record the memory or plan check's first note names."""
    for topic in ("plan-check", "memcheck"):
        for note in o.notes.get(topic, []):
            m = re.search(r"launch (\S+:\d+\.\d+) ", note)
            if m and m.group(1) in o.launches:
                return o.launches[m.group(1)]
    return None


def _crash(runs: Runs, first: Outcome, kind: str) -> List[str]:
    if kind == "a memory bug":
        found = first
    else:
        found = runs.run("memcheck", "level 3 with the memory check: a launch that wrote out of bounds "
                                     "or read memory nobody wrote",
                         {**FIRST, **CUDA_FAULTS, "AOTI_DEBUG_LOGLEVEL": "3", "AOTI_DEBUG_MEMCHECK": "raise"})
    lines = _memory_bug(found, kind)
    if lines:
        runs.learned = list(lines)
        culprit = _named_launch(found)
        return lines + (_pinpoint(runs, culprit, False, found.ranks.get(culprit.pid), memory=True).repro_lines
                         if culprit is not None else [])
    if found.sorted_as == kind:    # the same again, now with each launch's line and module
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
    lines = [head + f"; the launch in flight: {_launch_words(where)}{call}"] + _black_box(runs)
    runs.learned = list(lines)
    said, named = _sanitizer(runs) if kind == "a crash" else ([], None)
    return lines + said + _pinpoint(runs, named or where, False, first.ranks.get(where.pid)).repro_lines


def _black_box(runs: Runs) -> List[str]:
    """Where the first run's black box kept the launches before the crash or the kill."""
    folder = runs.done[0].file(".d")
    try:
        rings = [f for f in os.listdir(folder) if f.endswith(".ring")]
    except OSError:
        return []
    if not rings:
        return []
    return [f"black box: the inputs of the last launches before it, in {folder} "
            f"(aoti-debug blackbox recover {folder})"]


SANITIZER_REPORT_MAX = 16 << 20     # bytes of a sanitizer report read (its errors are capped too)


def _sanitizer(runs: Runs):
    """(lines, launch record): a run under compute-sanitizer's memcheck, where it is on PATH, its
    first error's kernel matched to the run's own launch records (analysis/sanitizer.py)."""
    from ..analysis import sanitizer
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        return [], None
    ran = runs.run("sanitizer", "under compute-sanitizer --tool memcheck, level 3",
                   {**FIRST, **CUDA_FAULTS, "AOTI_DEBUG_LOGLEVEL": "3"},
                   [tool, "--tool", "memcheck", *runs.command], ours=False)
    with open(ran.file(".stdout"), "rb") as f:
        report = sanitizer.parse(f.read(SANITIZER_REPORT_MAX).decode("utf-8", "replace"))
    found = [m for m in sanitizer.match(report, list(ran.launches.values())) if m.error.name is not None]
    if not found:
        return [f"compute-sanitizer named no kernel ({report.summary or 'no summary'}): see {ran.file('.stdout')}"], None
    return [found[0].text()[:400]], found[0].launch


def _launch_words(record) -> str:
    """`M:R.K kernel (nodes=... source=file:line, module a.b)`, as the checks name a launch."""
    o = record.origin
    if o is None:
        return f"{record.id} {record.name}"
    module = f", module {o.module}" if o.module else ""
    return f"{record.id} {record.name} (nodes={','.join(o.nodes) or '-'} source={o.source or '-'}{module})"


# -- clean -------------------------------------------------------------------------------

def _clean(runs: Runs):
    """(lines, found): the memory check, which finds what runs silently on a CPU (a write past
    the end, a read of memory nobody wrote); then two identical level-5 runs compared launch by
    launch: a launch whose outputs differ is a race, or memory read before it was written."""
    from ..analysis import diff
    mem = runs.run("memcheck", "the memory check: writes out of bounds, reads of memory nobody wrote",
                   {**FIRST, **CUDA_FAULTS, "AOTI_DEBUG_MEMCHECK": "warn"})
    said = _memory_bug(mem, "clean without it")
    if said:
        culprit = _named_launch(mem)
        runs.learned = list(said)
        return said + (_pinpoint(runs, culprit, False, mem.ranks.get(culprit.pid), memory=True).repro_lines
                       if culprit is not None else []), True
    a = runs.run("repeat-a", "level 5, run A of two identical runs", {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    b = runs.run("repeat-b", "level 5, run B of two identical runs", {**FIRST, "AOTI_DEBUG_LOGLEVEL": "5"})
    odd = next((o for o in (mem, a, b) if o.sorted_as != "clean"), None)
    if odd is not None:
        return [f"clean once, then {odd.sorted_as} in a repeated run: see {odd.log}"], True
    try:
        result = diff.diff(a.read(), b.read(), run=1, atol=0.0, rtol=0.0, exact=True)
    except Exception as exc:     # never called clean when it could not be compared
        return [f"nothing found, but the repeated runs could not be compared ({type(exc).__name__}: {exc}): "
                f"see {a.log} and {b.log}"], True
    if result.first_divergence is not None:
        return ["two identical runs differ (a race, or memory read before anything wrote it):"] + \
            _divergence(result), True
    agree = "two identical runs agree at every launch"
    if runs.reference is not None:
        said, found = _against_reference(runs, a)
        if said:
            return said, found
        agree += ", and so does the eager reference"
    return [f"nothing found in {len(runs.done)} runs: input guards, NaN/Inf check, sync and the memory check "
            f"clean, and {agree}"], False


def _against_reference(runs: Runs, run_a: Outcome):
    """(lines, found), ([], False) when they agree: the reference script's eager log at level 5
    against run A's, aligned by FX node (`aoti-debug diff`)."""
    from ..analysis import diff
    ref = runs.run("reference", "the eager reference, level 5", {"AOTI_DEBUG_LOGLEVEL": "5"},
                   [sys.executable, runs.reference], ours=False)
    if ref.sorted_as != "clean" or not os.path.exists(ref.log):
        return [f"the reference script ended with {ref.sorted_as}" + ("" if os.path.exists(ref.log) else
                ", and wrote no log (does it call aoti_debug.eager_log?)") + f": see {ref.file('.stderr')}"], None
    try:
        result = diff.diff(ref.read(), run_a.read(), run=1)
    except Exception as exc:     # never called clean when it could not be compared
        return [f"the eager reference could not be compared ({type(exc).__name__}: {exc}): see {ref.log}"], None
    if result.first_divergence is None:
        return [], False
    return ["the command disagrees with its eager reference:"] + _divergence(result) + \
        [f"  more: aoti-debug diff {ref.log} {run_a.log}"], True


def _divergence(result) -> List[str]:
    """diff's summary from its `first divergence` line on (the notes before it are diff's to say)."""
    from ..analysis import diff
    lines = diff.summary(result)
    first = next((n for n, line in enumerate(lines) if line.startswith("first divergence")), 0)
    return [_cut(line) for line in lines[first:first + 6]]


# -- what it leaves ----------------------------------------------------------------------

def _report(runs: Runs) -> List[str]:
    """report.html of the last run of the whole model that wrote a log (not the filtered dump's):
    the page to see more in."""
    from ..analysis import report
    logs = [o for o in runs.done if o.step != "dump" and os.path.exists(o.log)]
    if not logs:
        return []
    path = os.path.join(runs.out, "report.html")
    try:
        page = report.render(logs[-1].read())
        with create(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
            page.write(f)
    except Exception as exc:     # the verdict stands without its page
        return [f"report.html not written: {type(exc).__name__}: {str(exc)[:120]}"]
    return [f"see more: {path} (of {os.path.basename(logs[-1].log)})"]
