"""Whether a log or a dump holds the whole run: the rule behind every analysis
command's verdict (docs/analysis.md, "An incomplete run is never clean").

Two kinds of gap, each said before the answer:

- the run never finished (exit 3): a launch or call without its end record, a
  crash trailer, a run without its `run-end` (a log or dump cut between launches);
- records or tensors were lost (exit 4): the logger's `note - log` (records it
  could not write), a recorder that stopped (`note - flight-recorder ... no more
  dumps`, read from the logs beside a dump), a file the manifest names that is not
  there or was not written.

A finding made before the first gap stands (exit 1, the gap said with it); "nothing
found" over a run with a gap is never clean.  Runs, launches and calls are judged
unfinished only in logs of level >= 3: level 1 writes no end records; a black box's
runs have no run-end line, by design.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import dumps
from .manifest import MANIFEST
from .records import Event, Log, Record, parse
from .untrusted import InputError, lines as file_lines, printable

UNFINISHED, LOST = "unfinished", "lost"
_STOPPED = "no more dumps"                  # what a recorder's stop note says (docs/dumps.md)


@dataclasses.dataclass
class Gap:
    kind: str                               # UNFINISHED | LOST
    text: str                               # one line: what is missing
    record: Optional[Record] = None         # the first record it may hide; None: after the last


@dataclasses.dataclass
class Gaps:
    items: List[Gap] = dataclasses.field(default_factory=list)

    @property
    def unfinished(self) -> List[Gap]:
        return [g for g in self.items if g.kind == UNFINISHED]

    @property
    def lost(self) -> List[Gap]:
        return [g for g in self.items if g.kind == LOST]

    def __bool__(self) -> bool:
        return bool(self.items)

    def before(self, log: Log, record: Optional[Record]) -> bool:
        """Whether `record` (where a finding was made) was written before every gap."""
        if not self.items:
            return True
        if record is None:
            return False
        order = {id(r): n for n, r in enumerate(log.records)}
        at = order.get(id(record), len(log.records))
        return all(g.record is None or at < order.get(id(g.record), len(log.records)) for g in self.items)

    def lines(self) -> List[str]:
        """The gaps in words, said first: how the run stopped short, then what was lost."""
        out: List[str] = []
        if self.unfinished:
            out.append("the run never finished:")
            out += capped([f"  {g.text}" for g in self.unfinished])
        if self.lost:
            out.append("the run is incomplete: records or tensors were lost:")
            out += capped([f"  {g.text}" for g in self.lost])
        return out

    def summary(self) -> str:
        """One line for a page's summary: the first gap of each kind, and how many more."""
        parts = []
        for head, gaps in (("the run never finished", self.unfinished),
                           ("the run is incomplete", self.lost)):
            if gaps:
                more = f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else ""
                parts.append(f"{head}: {gaps[0].text}{more}")
        return "; ".join(parts)


def capped(lines: List[str], limit: int = 10) -> List[str]:
    more = len(lines) - limit
    return lines[:limit] + ([f"  ... and {more} more like it"] if more > 0 else [])


# -- a log (or dumps read as one) ------------------------------------------------------

def of_log(log: Log) -> Gaps:
    """What is missing from the run(s) a Log holds."""
    gaps = Gaps()
    dumped = _dump_folders(log)
    stopped = recorder_stops(sorted({os.path.dirname(f) for f in dumped})) if dumped else {}
    judged = log.level_hint() >= 3
    many = len(log.processes()) > 1
    gaps.items += [Gap(LOST, f"the recorder of pid {pid} stopped: {note}") for pid, note in stopped.items()]
    for event in log.events if judged else []:
        if event.finished:
            continue
        if _from_dump(event.first) and event.pid in stopped:
            gaps.items.append(Gap(LOST, f"{named(event)}: its outputs were not dumped (no end record)",
                                  event.first))
        else:
            gaps.items.append(Gap(UNFINISHED, f"{named(event)}{f' ({_whose(log, event.pid)})' if many else ''} never "
                                  f"finished ({why_unfinished(event)}); its outputs are unknown", event.first))
    claimed = {id(e.crash) for e in log.events if not e.finished and e.crash is not None}
    gaps.items += [Gap(UNFINISHED, f"crash trailer {r.id} {r.name} (pid {r.pid}): {'; '.join(r.notes) or '-'}", r)
                   for r in log.crashes if id(r) not in claimed or not judged]
    if judged:
        for run, last in unended_runs(log.records):
            if _from_dump(run) and boxed(os.path.dirname(run.file)):
                continue
            gaps.items.append(run_gap(f"run {run.id} {run.name} (pid {run.pid})", f"no run-end record, {run.where}",
                                      last, _from_dump(run) and run.pid in stopped))
    gaps.items += [Gap(LOST, text, r) for r, text in _lost_notes(log)]
    for folder in dumped:
        gaps.items += _dump_losses(folder, log)
    return gaps


def _whose(log: Log, pid: int) -> str:
    """`rank 2, pid 4242`, or `pid 4242` for a process without a rank."""
    p = log.process(pid)
    return f"rank {p.rank}, pid {p.pid}" if p.rank is not None else f"pid {p.pid}"


def run_gap(run: str, where: str, last: str, stopped: bool) -> Gap:
    """A run without its end: never finished, or (its recorder stopped) not dumped whole."""
    after = f"after {last}" if last else "before its first launch"
    if stopped:
        return Gap(LOST, f"{run}: nothing was dumped {after} ({where})")
    return Gap(UNFINISHED, f"{run} never finished ({where}); what came {after} is missing")


def named(event: Event) -> str:
    """`launch 1.3 cpp_fused_log_2` or `call 3 __main__.f` (a call's title says `call`)."""
    return event.title if event.ident.startswith("call ") else f"launch {event.title}"


def why_unfinished(event: Event) -> str:
    """Why a launch or call has no end record: its crash trailer's first note, if any."""
    crash = event.crash
    return f"crash: {crash.notes[0]}" if crash is not None and crash.notes else "no end record"


def unended_runs(records: Sequence[Record]) -> List[Tuple[Record, str]]:
    """(run record, the last launch it reached) of each run without its run-end."""
    open_runs: Dict[Tuple[int, str, str], Record] = {}
    # a launch id names its instance (M:R.K) in logs that have the field; older ones only R.K
    last: Dict[Tuple[int, Optional[str], str], str] = {}
    checked: set = set()        # runs a check's note named last: a raising check ends the run there
    for r in records:
        key = (r.pid, r.id, r.name)
        if r.kind == "run":
            open_runs[key] = r
        elif r.kind == "run-end":
            open_runs.pop(key, None)
        elif r.kind in ("launch", "launch-end"):
            model, _, ident = r.id.rpartition(":")
            run = (r.pid, model or None, ident.split(".", 1)[0])
            last[run] = f"launch {r.id} {r.name}"
            checked.discard(run)
        elif r.kind == "note" and r.name in CHECK_NOTES and r.notes:
            named = _CHECKED_LAUNCH.match(r.notes[0])
            if named:
                checked.add((r.pid, named.group(1) or None, named.group(2)))
    return [(r, last.get((r.pid, r.name, r.id), last.get((r.pid, None, r.id), "")))
            for r in open_runs.values()
            if (r.pid, r.name, r.id) not in checked and (r.pid, None, r.id) not in checked]


# The notes of the checks that may raise (AOTI_DEBUG_NAN_CHECK / AOTI_DEBUG_MEMCHECK=raise, the plan check): a run
# whose last word is such a note about its own launch was stopped by the check, as the user asked,
# not cut short; its first line names the launch (`launch ranker:1.3 ...` or `launch 1.3 ...`).
CHECK_NOTES = ("nan-check", "memcheck", "plan-check")
_CHECKED_LAUNCH = re.compile(r"launch (?:(\S+):)?(\d+)\.\d+ ")


def _lost_notes(log: Log) -> List[Tuple[Record, str]]:
    """The logger's own `note - log` lines: records it could not write (log-format.md 5)."""
    return [(r, f"{r.file or 'the log'}:{r.line}: pid {r.pid}: {note}") for r in log.records
            if r.kind == "note" and r.name == "log" for note in r.notes]


_BOX = re.compile(r"[0-9]+-blackbox(\.[0-9]+)?")


def boxed(folder: str) -> bool:
    """Whether a run folder is a black box's (`<pid>-blackbox/<run folder>`): a ring keeps the
    last launches and writes no run-end line (docs/dumps.md, "The black box")."""
    return bool(_BOX.fullmatch(os.path.basename(os.path.dirname(os.path.normpath(folder)))))


def _from_dump(record: Record) -> bool:
    return bool(record.file) and os.path.basename(record.file) == MANIFEST


def _dump_folders(log: Log) -> List[str]:
    return sorted({os.path.dirname(r.file) for r in log.records if _from_dump(r)})


def _dump_losses(folder: str, log: Log) -> List[Gap]:
    where = {(r.file, r.line): r for r in log.records if _from_dump(r)}
    path = os.path.join(folder, MANIFEST)
    return [Gap(LOST, text, where.get((path, number))) for number, text in dump_losses(folder)]


# -- dump folders, read from their manifests -------------------------------------------

def dump_losses(folder: str) -> List[Tuple[int, str]]:
    """(manifest line, what is missing) for each file a line names that is not there or that
    was `not written` (a write failed).  A value not dumped by design (a dtype or device not
    supported, a result that cannot be serialised) is unknown, not lost."""
    out: List[Tuple[int, str]] = []
    for number, e in dumps.manifest_lines(folder):
        here = f"{os.path.join(folder, MANIFEST)}:{number}"
        for f in e.get("files", []):
            if f.get("file") is None and f.get("error") == "not written":
                out.append((number, f"{here}: {f.get('role', 'file')} {f.get('name')} was not written"))
            elif f.get("file") is not None and not os.path.lexists(os.path.join(folder, f["file"])):
                out.append((number, f"{os.path.join(folder, f['file'])}: named by {here} but absent"))
    return [(n, printable(t)) for n, t in out]


def of_dump_folders(folders: Sequence[str]) -> Gaps:
    """What is missing from the dump folders replay and check read: runs, launches and calls
    without their end line, and what dump_losses names."""
    stopped = recorder_stops(sorted({os.path.dirname(os.path.normpath(f)) for f in folders}))
    gaps = Gaps([Gap(LOST, f"the recorder of pid {p} stopped: {note}") for p, note in stopped.items()])
    for folder in folders:
        entries = dumps.manifest_lines(folder)
        pid = dumps._pid(folder, entries)
        here = os.path.join(folder, MANIFEST)
        opened: Dict[object, Tuple[int, str]] = {}
        run, last = None, ""
        for number, e in entries:
            if e["kind"] == "call":
                key = ("call", e["index"])
                what = f"call {e['index']} {e['name']}"
            elif e["event"] in ("before", "after"):
                key = ("launch", e["id"])
                what = last = f"launch {e['id']} {e['kernel']}"
            else:           # run / run-end
                run = (number, f"run {e['run']} {e['model']}") if e["event"] == "run" else None
                continue
            if e["event"] == "before":
                opened[key] = (number, what)
            else:
                opened.pop(key, None)
        for number, what in opened.values():
            gaps.items.append(Gap(LOST, f"{what}: its outputs were not dumped ({here}:{number} has no after line)")
                              if pid in stopped else
                              Gap(UNFINISHED, f"{what} never finished ({here}:{number} has no after line); "
                                  "its outputs are unknown"))
        if run is not None and not boxed(folder):
            gaps.items.append(run_gap(f"{run[1]} (pid {pid})", f"no run-end line, {here}:{run[0]}", last,
                                      pid in stopped))
        gaps.items += [Gap(LOST, text) for _, text in dump_losses(folder)]
    return gaps


def recorder_stops(roots: Iterable[str]) -> Dict[int, str]:
    """pid -> the note of each recorder that stopped, from the logs in `roots` (a dump
    directory and its folders): the dumps of that process end where it stopped."""
    stops: Dict[int, str] = {}
    for root in roots:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            path = os.path.join(root, name)
            if name.endswith(".log") and not os.path.islink(path) and os.path.isfile(path):
                for r in _notes(path):
                    stops.setdefault(r.pid, r.notes[0])
    return stops


def _notes(path: str) -> List[Record]:
    """The recorder's stop notes of one log, read line by line (the log may be large)."""
    text: List[str] = []
    keep = False
    try:
        for _, raw, _ in file_lines(path):
            line = raw.decode("utf-8", "replace")
            if line.startswith("["):
                keep = line.endswith("] note - flight-recorder")
                if keep:
                    text.append(line)
            elif keep:
                text.append(line)
    except InputError:
        return []
    return [r for r in parse("\n".join(text) + "\n", path).records
            if r.kind == "note" and r.notes and _STOPPED in r.notes[0]]
