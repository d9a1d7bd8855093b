"""Replay of level-10 dumps (docs/dumps.md): re-run what was recorded and
compare the new outputs with the recorded ones.

Two kinds of dump folders:

- ``<pid>-calls/`` (Python ``@log_api`` calls): each call whose ``after``
  line says ``ok`` is re-imported from ``module``/``qualname``, called
  undecorated with the recorded arguments, and its result compared.
- ``<pid>-<model>-run<R>/`` (an AOTI run): the artifact (``--package``, else
  the recorder's copy ``so_copy`` in the dump directory) is run again in a
  fresh process on the recorded ``inputs.pt`` at level 10 into a temporary
  dump directory, and every recorded launch's outputs are compared with the
  new ones.

What may run is decided by runnable.py before anything runs: a dump folder is
data, and the functions and artifact it names run only when the user allowed
them (``--allow-module``, ``--package``) or, for the artifact copy, when the
user trusts the dump's code (``--trust-dump-code``) and it is the file the
recorder wrote (its sha256).  A replay process that fails is an error
(ReplayInputError), never a pass or a finding: nothing was compared.

Files are read with ``torch.load(..., weights_only=True)`` only, from regular
files only, and the manifest is checked line by line (manifest.py).  A
recorded file that cannot be read makes its item UNKNOWN, not FAIL: nothing
was compared.  A run whose ``inputs.pt`` cannot be read cannot be replayed at
all (ReplayInputError, exit status 2).
"""

from __future__ import annotations

import math
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import settings
from . import blackbox, closeness, runnable
from .dumps import MANIFEST, call_arguments, load, manifest_lines, outside_storage, read_manifest
from .untrusted import InputError, shorten


class ReplayInputError(InputError):
    """The dump directory cannot be used (exit status 2)."""


@dataclass
class Item:
    kind: str           # "call" or "launch"
    ident: str          # call number N or launch id M:R.K
    name: str
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    reason: str = ""
    unreadable: str = ""    # a recorded file cannot be read: neither PASS nor FAIL
    skipped: str = ""       # nothing was kept to compare (why): named, not passed

    @property
    def failed(self) -> bool:
        return not self.ok and not self.unreadable and not self.skipped

    def line(self) -> str:
        if self.unreadable:
            return f"UNKNOWN {self.kind} {self.ident} {self.name} {self.unreadable}"
        if self.skipped:
            return f"SKIP {self.kind} {self.ident} {self.name} nothing kept to compare: {self.skipped}"
        head = f"{'PASS' if self.ok else 'FAIL'} {self.kind} {self.ident} {self.name}"
        if self.reason:
            return f"{head} {self.reason}"
        return f"{head} max_abs={self.max_abs:.6g} max_rel={self.max_rel:.6g}"


# ---------------------------------------------------------------- inputs

def folders(root: str) -> List[str]:
    """The dump folders under `root` (or `root` itself when it is one)."""
    if not os.path.isdir(root):
        raise ReplayInputError(f"{root}: not a directory")
    # lexists: a manifest that is not a regular file is refused when read, not passed over
    if os.path.lexists(os.path.join(root, MANIFEST)):
        return [root]
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise ReplayInputError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    found = [os.path.join(root, d) for d in names if os.path.lexists(os.path.join(root, d, MANIFEST))]
    linked = [f for f in found if os.path.islink(f)]
    if linked:      # a folder reached through a link may be anywhere: refused, never followed
        raise ReplayInputError(f"{linked[0]}: is a symbolic link to a folder, which is not followed "
                               "(a dump directory's run folders are read only where they are)")
    if not found:
        deeper = nested(root)
        raise ReplayInputError(f"{root}: no dump folder (no {MANIFEST} in it or its subfolders)"
                               + (f"; the dump directories in it: {', '.join(deeper)} (give one of them)"
                                  if deeper else ""))
    return found


def nested(root: str) -> List[str]:
    """The dump directories inside `root` (a black box dump, `<pid>-blackbox/`, holds run
    folders), which `folders` does not read: named, so that none is passed over unseen."""
    if os.path.lexists(os.path.join(root, MANIFEST)):
        return []
    out = []
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if os.path.islink(path) or not os.path.isdir(path) or os.path.lexists(os.path.join(path, MANIFEST)):
            continue        # the folder is untrusted: no link is followed
        try:
            inner = os.listdir(path)
        except OSError:
            continue
        if any(os.path.lexists(os.path.join(path, r, MANIFEST)) for r in inner):
            out.append(path)
    return out


# ---------------------------------------------------------------- comparison

def compare(expected: Any, got: Any, atol: float, rtol: float, where: str = "output"
            ) -> Tuple[bool, float, float, str]:
    """(ok, max_abs, max_rel, reason) of `got` against `expected`, recursively."""
    import torch
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return False, 0.0, 0.0, f"{where}: expected a tensor, got {type(got).__name__}"
        c = closeness.tensors(expected, got, atol, rtol)
        reason = c.reason or ("" if c.ok else "values differ")
        return c.ok, c.max_abs, c.max_rel, f"{where}: {reason}" if reason else ""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return False, 0.0, 0.0, f"{where}: expected a sequence of {len(expected)}"
        return _combine([compare(a, b, atol, rtol, f"{where}[{i}]")
                         for i, (a, b) in enumerate(zip(expected, got))])
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return False, 0.0, 0.0, f"{where}: expected keys {sorted(map(str, expected))}"
        return _combine([compare(expected[k], got[k], atol, rtol, f"{where}[{k!r}]") for k in expected])
    if isinstance(expected, float) and isinstance(got, (int, float)):
        d = abs(expected - got) if not (math.isnan(expected) and math.isnan(got)) else 0.0
        ok = d <= atol + rtol * abs(expected)
        return ok, d, d / abs(expected) if expected else 0.0, ""
    if isinstance(got, torch.Tensor):     # `expected == got` would be a tensor, not an answer
        return False, 0.0, 0.0, f"{where}: expected {type(expected).__name__}, got a tensor"
    ok = expected == got
    return ok, 0.0, 0.0, "" if ok else f"{where}: {got!r} != {expected!r}"


def _combine(parts):
    ok = all(p[0] for p in parts)
    reason = next((p[3] for p in parts if not p[0] and p[3]), "")
    return (ok, max([p[1] for p in parts], default=0.0), max([p[2] for p in parts], default=0.0), reason)


# ---------------------------------------------------------------- Python calls

def _replayed(entry: Dict[str, Any]) -> bool:
    return entry["kind"] == "call" and entry["event"] == "after" and entry["status"] == "ok"


def _not_replayed(e: Dict[str, Any], returned) -> str:
    """Why the call line `e` is not replayed ("" when another line of the call says it)."""
    if e["kind"] != "call":
        return ""
    if e["event"] == "before":
        return "" if e["index"] in returned else "the call never returned"
    if e["status"] == "raised":
        return f"the call raised ({e.get('error') or 'no error recorded'})"
    lost = [f["error"] for f in e["files"] if not f["file"] and f.get("error")]
    return e.get("error") or "; ".join(lost) or f"the call ended {e['status']}"


def replay_calls(folder: str, lines: List[Tuple[int, Dict[str, Any]]], atol: float, rtol: float
                 ) -> List[Item]:
    items = []
    returned = {e["index"] for _, e in lines if e["kind"] == "call" and e["event"] == "after"}
    for number, e in lines:
        if not _replayed(e):
            why = _not_replayed(e, returned)
            if why:
                items.append(Item("call", str(e["index"]), e["name"], False, skipped=why))
            continue
        item = Item("call", str(e["index"]), e["name"], False)
        items.append(item)
        files = {f["file"].rsplit("_", 1)[-1]: f["file"] for f in e["files"] if f["file"]}
        try:
            for kind in ("inputs.pt", "outputs.pt"):
                if kind not in files:
                    raise InputError(f"{os.path.join(folder, MANIFEST)}: call {e['index']} is ok "
                                     f"but names no {kind} file")
            path = os.path.join(folder, files["inputs.pt"])
            args, kwargs = call_arguments(path, load(path))
            expected = load(os.path.join(folder, files["outputs.pt"]))
        except InputError as exc:
            item.unreadable = str(exc)
            continue
        try:
            func = runnable.resolve(e, f"{os.path.join(folder, MANIFEST)}:{number}")
        except runnable.RefusedInput:
            raise
        except Exception as exc:
            item.reason = f"cannot re-import: {type(exc).__name__}: {exc}"
            continue
        try:
            got = func(*args, **kwargs)
        except Exception as exc:
            item.reason = f"exception: {type(exc).__name__}: {exc}"
            continue
        item.ok, item.max_abs, item.max_rel, reason = compare(expected, got, atol, rtol)
        if not item.ok and reason and "values differ" not in reason:
            item.reason = reason
    return items


# ---------------------------------------------------------------- AOTI runs

_RUNNER = r"""
import sys, torch
so, package, inputs_path = sys.argv[1:4]
for library in sys.argv[4:]:
    torch.ops.load_library(library)
inputs = list(torch.load(inputs_path, weights_only=True))
if package:
    m = torch._inductor.aoti_load_package(package)
    m.loader.run(inputs)
else:
    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    runner = (torch._C._aoti.AOTIModelContainerRunnerCuda if cuda
              else torch._C._aoti.AOTIModelContainerRunnerCpu)(so, 1)
    runner.run(inputs)
"""


def _launch_files(entry: Dict[str, Any]) -> Dict[str, Optional[str]]:
    return {f["name"]: f["file"] for f in entry["files"]}


def _inputs(folder: str) -> str:
    """The run's inputs.pt, once it is known to load as a list of inputs."""
    path = os.path.join(folder, "inputs.pt")
    if not os.path.lexists(path):
        raise ReplayInputError(f"{folder}: inputs.pt is missing (the run cannot be reproduced)")
    try:
        inputs = load(path)
    except InputError as exc:
        raise ReplayInputError(f"{exc} (the run cannot be reproduced)") from None
    if not isinstance(inputs, (list, tuple)):
        raise ReplayInputError(f"{path}: holds a {type(inputs).__name__}, not the list of the "
                               "run's inputs (the run cannot be reproduced)")
    import torch
    for i, t in enumerate(inputs):
        why = outside_storage(t) if isinstance(t, torch.Tensor) else ""
        if why:     # the artifact would read past it: nothing runs
            raise ReplayInputError(f"{path}: input {i} {why}, so the artifact would read memory no "
                                   "tensor owns (nothing was run)")
    return path


@dataclass
class RunPlan:
    """What a recorded run is replayed with: its inputs.pt, and the user's package (a .pt2,
    or an artifact .so) or the recorder's copy `copy`, whose sha256 `here` records."""
    inputs: str
    package: Optional[str] = None
    copy: str = ""
    sha256: str = ""
    here: str = ""


def check_run(folder: str, lines: List[Tuple[int, Dict[str, Any]]], package: Optional[str],
              trust: bool = False) -> RunPlan:
    """How the run of `folder` will be replayed, checked before anything runs; the
    dump's own artifact copy only when the user trusts its code (`trust`)."""
    number, run = next(((n, e) for n, e in lines if e["event"] == "run"), (0, None))
    if run is None:
        raise ReplayInputError(f"{folder}: the manifest has no run line")
    inputs = _inputs(folder)
    if package is not None:
        return RunPlan(inputs, package=package)
    if not run.get("so"):
        raise ReplayInputError(f"{folder}: this run was recorded from torch.compile, which leaves no artifact "
                               "to run again; compare it with another run's dumps with `aoti-debug diff`")
    return RunPlan(inputs, copy=runnable.recorded_artifact(folder, run, number, trust), sha256=run["so_sha256"],
                   here=f"{os.path.join(folder, MANIFEST)}:{number}")


def _box_mb(folder: str) -> int:
    """A ring for the replay's black box: room for the inputs this folder recorded, twice over."""
    total = 0
    for name in os.listdir(folder):
        st = os.lstat(os.path.join(folder, name))     # the folder is untrusted: no link is followed
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return min(settings.BLACKBOX_MAX_MB, max(128, 2 * total // (1 << 20) + 64))


def _replayed_launches(root: str) -> Dict[Tuple[str, int], Tuple[str, Dict[str, Any]]]:
    """(event, launch index) -> (folder, manifest line) of what the replay recorded:
    its level-10 run folder, else the run folder of its black box dump."""
    found: Dict[Tuple[str, int], Tuple[str, Dict[str, Any]]] = {}
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    if any(blackbox.RING_NAME.match(n) for n in names):   # the replay process has ended: its ring is whole
        blackbox.recover(root)
        names = sorted(os.listdir(root))
    level10 = [os.path.join(root, d) for d in names if os.path.isfile(os.path.join(root, d, MANIFEST))]
    boxes = [os.path.join(root, d, r) for d in names if d.endswith("-blackbox")
             for r in sorted(os.listdir(os.path.join(root, d)))
             if os.path.isfile(os.path.join(root, d, r, MANIFEST))]
    for folder in boxes[:1] + level10[:1]:      # level 10 wins: it has the outputs too
        for e in read_manifest(folder):
            if e.get("kind") == "launch":
                found[(e.get("event"), e.get("index"))] = (folder, e)
    return found


def _compared(entries: List[Dict[str, Any]]) -> List[Tuple[Dict[str, Any], str]]:
    """Each launch of a run, in order, with what it is compared on: its `after` line when
    it is ok (its outputs), else its `before` line when it kept an input (the launch in
    flight when the process died, or a black box's launches, which keep inputs only);
    else a launch line and, instead of "", why nothing of it can be compared."""
    lines: Dict[int, Dict[str, Dict[str, Any]]] = {}
    for e in entries:
        if e["kind"] == "launch":
            lines.setdefault(e["index"], {})[e["event"]] = e
    out = []
    for index in sorted(lines):
        before, after = lines[index].get("before"), lines[index].get("after")
        if after is not None and after["status"] == "ok":
            out.append((after, ""))
        elif before is not None and any(f["file"] for f in before["files"]):
            out.append((before, ""))
        else:
            out.append((before or after, _nothing_kept(before, after)))
    return out


def _nothing_kept(*lines: Optional[Dict[str, Any]]) -> str:
    """Why a launch kept no file: its values grouped by the error each was recorded with."""
    why: Dict[str, List[str]] = {}
    for line in lines:
        for f in line["files"] if line else ():
            why.setdefault(f.get("error") or "not kept", []).append(f["name"])
    if not why:
        return "the launch recorded no tensor"
    return "; ".join(f"{', '.join(names)}: {error}" for error, names in why.items())


# a failed replay's stderr: the exception Python raised, else what the artifact printed
# (`Error: ...`); not the generic "API call failed at <file>" of an AOTI wrapper, nor
# the traceback or c10's backtrace frames around them
_RAISED = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception): \S")
_PRINTED = re.compile(r"Error: \S")
_NOISE = re.compile(r"\s|Traceback |Exception raised from |frame #\d+|<omitting")


def process_error(stderr: str) -> str:
    """The line of a failed replay process's stderr that says what went wrong, e.g.
    `RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x3 and 8x16)`."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not _NOISE.match(line)]
    useful = [line for line in lines if "API call failed at" not in line]
    found = (next((line for line in reversed(useful) if _RAISED.match(line)), None)
             or next((line for line in useful if _PRINTED.match(line)), None)
             or next(reversed(useful or lines), "no error message"))
    return shorten(found, 300)


def _ended(status: int) -> str:
    if status > 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


def replay_run(folder: str, entries: List[Dict[str, Any]], atol: float, rtol: float,
               plan: RunPlan, libraries: Sequence[str] = ()) -> Tuple[List[Item], str]:
    """Items of one recorded run, and a note about the replay process ("" if it ran cleanly).
    A launch recorded with its outputs is compared on them; one recorded with its
    inputs only, on those (they are what the launches before it computed)."""
    recorded = _compared(entries)
    # launches named as the log and nan-origin name them (model:R.K): a dump directory may
    # hold run 1 of several models
    model = next((e["model"] for e in entries if e.get("event") == "run"), None)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-replay-") as tmp:
        package, so = os.path.abspath(plan.package) if plan.package else "", ""
        if package.endswith(".so"):     # absolute: dlopen looks a bare name up on the library path
            package, so = "", package
        elif not package:   # the file loaded is the file whose hash was checked
            so = runnable.private_copy(plan.copy, plan.sha256, plan.here,
                                       os.path.join(tmp, os.path.basename(plan.copy)))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AOTI_DEBUG_DUMP", "AOTI_DEBUG_BLACKBOX")) and k != "AOTI_DEBUG_RUNTIME_REGISTRY"}
        # level 10 where it was compiled in, else the black box (dumped after the run): either
        # way every launch of the run is recorded again
        # the input guard on where it was compiled in (upstream's input checks where it was not):
        # a crafted inputs.pt meets the artifact's checks before any kernel reads it
        env.update(AOTI_DEBUG_CHECK_INPUTS="1", AOTI_RUNTIME_CHECK_INPUTS="1")
        env.update(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=os.path.join(tmp, "dumps"),
                   AOTI_DEBUG_DUMP_MAX_COUNT="1000000000", AOTI_DEBUG_DUMP_MAX_SIZE_GB="1000000",
                   AOTI_DEBUG_LOGDEST=os.path.join(tmp, "replay.log"), AOTI_DEBUG_BLACKBOX="100000",
                   AOTI_DEBUG_BLACKBOX_MAX_MB=str(_box_mb(folder)))
        proc = subprocess.run([sys.executable, "-c", _RUNNER, so, package, plan.inputs,
                               *(os.path.abspath(p) for p in libraries)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:     # nothing was compared: neither a pass nor a finding
            raise ReplayInputError(f"{folder}: the replay process failed ({_ended(proc.returncode)}): "
                                   f"{process_error(proc.stderr)}; nothing was compared")
        note = ""
        new_lines = _replayed_launches(os.path.join(tmp, "dumps"))
        items = []
        for e, nothing_kept in recorded:
            item = Item("launch", f"{model}:{e['id']}" if model else e["id"], e["kernel"], False,
                        skipped=nothing_kept)
            items.append(item)
            if nothing_kept:
                continue
            new_dir, new = new_lines.get((e["event"], e["index"]), ("", None))
            if new is None:
                item.reason = "not reached in the replay" + (f" ({note})" if note else "")
                continue
            if new["kernel"] != e["kernel"]:
                item.reason = f"the replay ran {new['kernel']} at this launch"
                continue
            old_files, new_files = _launch_files(e), _launch_files(new)
            parts = []
            for arg, fname in old_files.items():
                if not fname and e["event"] == "before":
                    continue      # an input that was not kept (its error says why)
                try:
                    if not fname:
                        raise InputError(f"{os.path.join(folder, MANIFEST)}: launch {e['id']} is ok "
                                         f"but names no file for {arg}")
                    expected = load(os.path.join(folder, fname))
                except InputError as exc:
                    item.unreadable = str(exc)
                    break
                if not new_files.get(arg):
                    parts.append((False, 0.0, 0.0, f"{arg}: not written by the replay"))
                    continue
                try:
                    got = load(os.path.join(new_dir, new_files[arg]))
                except InputError as exc:
                    parts.append((False, 0.0, 0.0, f"{arg}: the replay's file {exc}"))
                    continue
                parts.append(compare(expected, got, atol, rtol, arg))
            if item.unreadable:
                continue
            item.ok, item.max_abs, item.max_rel, reason = _combine(parts)
            if e["event"] == "before":
                item.name += " (inputs)"
            if not item.ok and reason and "values differ" not in reason:
                item.reason = reason
    return items, note


def replay(root: str, atol: float = 1e-6, rtol: float = 1e-5, package: Optional[str] = None,
           allow: Sequence[str] = (), libraries: Sequence[str] = (), trust_dump_code: bool = False
           ) -> Tuple[List[Item], List[str]]:
    """Every item of every dump folder under `root`, and notes for stderr.  Every folder is
    checked first (runnable.py): a folder that names what may not run stops the replay
    before anything runs."""
    checked = []
    for folder in folders(root):
        lines = manifest_lines(folder)
        if not lines:
            raise ReplayInputError(f"{os.path.join(folder, MANIFEST)}: holds no line to replay")
        if lines[0][1]["kind"] == "call":
            for number, e in lines:
                if _replayed(e):
                    runnable.check_call(e, allow, f"{os.path.join(folder, MANIFEST)}:{number}")
            checked.append((folder, lines, None))
        else:
            checked.append((folder, lines, check_run(folder, lines, package, trust_dump_code)))
    items: List[Item] = []
    notes: List[str] = [f"{d}: a dump directory inside {root}, not replayed (replay it on its own)"
                        for d in nested(root)]
    for folder, lines, plan in checked:
        if plan is None:
            items += replay_calls(folder, lines, atol, rtol)
        else:
            got, note = replay_run(folder, [e for _, e in lines], atol, rtol, plan, libraries)
            items += got
            if note:
                notes.append(f"{folder}: {note}")
        first = next((i for i in items if i.failed), None)
        if first is not None and first.kind == "launch" and not any(n.startswith("first failing") for n in notes):
            notes.append(f"first failing launch: {first.ident} {first.name}")
    return items, notes
