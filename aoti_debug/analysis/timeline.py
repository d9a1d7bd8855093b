"""The timeline of one job's logs: processes, thread tracks, slices and instants.

`build(log)` turns a parsed `Log` (one or many processes, e.g. one log per
rank) into a `Timeline` that the trace writers (trace_json.py,
trace_perfetto.py) only render:

- a process per pid, named by its rank where the log says it, sorted by rank;
- a track per thread (the `thread=` of run and call records); a launch is on
  the thread of the run of its number that is open in its process when the
  launch record is written (of its model instance, `ranker#2:1.3`), and on
  `thread unknown` when there is none or several (a log whose launch ids do
  not name their model, two models at the same run number at once): it is
  not guessed;
- slices for runs, launches and `log_api` calls, instants for NaN/Inf in a
  launch's or call's outputs, check failures, raises and crash trailers.

Slices on one track must nest (a trace viewer draws a track as a stack), so a
slice that would cross another goes to a further track of its thread, named
as such.  Times are the records' own (µs since the epoch, UTC): clocks of
different machines are not aligned here.  What has no readable time is not
placed, and counted.  Text from the log is escaped (untrusted.printable).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import datetime
import functools
import re
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import completeness
from .records import (FINITE, NONFINITE, STAT_KEYS, Call, Item, Launch, Log, Process, Record, Tensor,
                      evidence, overall)
from .untrusted import printable

# trace processors keep nanoseconds in an int64: later times cannot be placed
_LIMIT_US = (2**63 - 1) // 1000
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{6})", re.A)
_EPOCH = datetime.datetime(1970, 1, 1)
_FLAG = {NONFINITE: "yes", FINITE: "no"}
# ids that trace viewers take as process and thread ids; no Linux pid or tid reaches
# 2**22 (the largest pid_max), so ids the trace makes up start there
_MAX_ID = 2**31 - 1
_MADE_UP = 2**22
UNKNOWN = None                              # the thread key of what no thread is known for
# for slices with the same span: a call encloses a run, a run its launches
_DEPTH = {"call": 0, "run": 1, "launch": 2}
_PLURAL = {"launch": "launch(es)", "run": "run(s)", "call": "call(s)", "instant": "instant event(s)"}


def micros(timestamp: str) -> Optional[int]:
    """`YYYY-MM-DD hh:mm:ss.micro` (UTC) as µs since the epoch; None when it is no such
    time (masked `TIMESTAMP`, a date that does not exist, before 1970 or past 2262)."""
    match = _TIMESTAMP.fullmatch(timestamp)
    if not match:
        return None
    try:
        moment = datetime.datetime(*(int(g) for g in match.groups()[:6]))
    except ValueError:
        return None
    us = (moment - _EPOCH) // datetime.timedelta(microseconds=1) + int(match[7])
    return us if 0 <= us <= _LIMIT_US else None


def text(value: str) -> str:
    """Log text as a trace shows it: control characters escaped, valid UTF-8."""
    return printable(value).encode("utf-8", "backslashreplace").decode("utf-8")


# -- the model ---------------------------------------------------------------------

@dataclasses.dataclass
class Slice:
    name: str
    kind: str                               # launch | run | call
    start: int                              # µs since the epoch
    end: int
    # str, int, bool, lists and dicts of them; a launch's and a call's are made when the trace
    # is written, from their records: a long run has millions, and their values are read again
    made: Union[Dict[str, Any], Callable[[], Dict[str, Any]]]

    @property
    def args(self) -> Dict[str, Any]:
        return self.made() if callable(self.made) else self.made

    @property
    def order(self) -> Tuple[int, int, int]:
        """Nesting order: by start, the longer first, the enclosing kind first."""
        return self.start, -self.end, _DEPTH[self.kind]


@dataclasses.dataclass
class Instant:
    name: str
    kind: str                               # nan-inf | check | raise | crash
    ts: int
    args: Dict[str, Any]
    near: Optional[Slice] = None            # the slice it tells about: it goes on that one's track


@dataclasses.dataclass
class Track:
    """One thread track: slices that nest, in nesting order, and instants."""
    name: str
    tid: int                                # the id the trace gives it, unique in the trace
    slices: List[Slice]
    instants: List[Instant]


@dataclasses.dataclass
class ProcessTrack:
    name: str                               # `rank 2 (pid 4242)`
    pid: int                                # the id the trace gives it, unique in the trace
    process: Process
    tracks: List[Track]
    instants: List[Instant]                 # the process's own: no thread is known for them


@dataclasses.dataclass
class Timeline:
    processes: List[ProcessTrack]
    not_placed: Dict[str, int]              # `launch` -> how many had no readable time
    notes: List[str]                        # what a reader should know: one line each
    # dumped files and records that could not be read (why, one line each): what the trace
    # shows of them is unknown, so the trace is not the whole run
    unreadable: List[str] = dataclasses.field(default_factory=list)
    # what the run is missing (never finished, records lost): said, and the exit status
    gaps: completeness.Gaps = dataclasses.field(default_factory=completeness.Gaps)

    def slices(self, kind: str) -> List[Slice]:
        return [s for p in self.processes for t in p.tracks for s in t.slices if s.kind == kind]

    @property
    def instants(self) -> List[Instant]:
        return [i for p in self.processes for i in p.instants + [i for t in p.tracks for i in t.instants]]

    def summary(self) -> str:
        tracks = sum(len(p.tracks) for p in self.processes)
        line = (f"{len(self.processes)} process(es), {tracks} thread track(s), "
                f"{len(self.slices('launch'))} launch slice(s), {len(self.slices('run'))} run(s), "
                f"{len(self.instants)} instant event(s)")
        if self.not_placed:
            what = ", ".join(f"{n} {_PLURAL[kind]}" for kind, n in self.not_placed.items())
            line += f"; not placed, without a readable timestamp: {what}"
        if self.unreadable:
            line += (f"; {len(self.unreadable)} dumped file(s) or record(s) cannot be read "
                     "(their values are unknown in the trace)")
        return line


def build(log: Log) -> Timeline:
    return _Builder(log).timeline()


# -- building it -------------------------------------------------------------------

@dataclasses.dataclass
class _Run:
    """A model run of one process: its run record, its run-end, what it launched."""
    record: Optional[Record]                # None: the log starts after it began
    end: Optional[Record] = None
    marks: List[Tuple[int, Record]] = dataclasses.field(default_factory=list)  # launch records, run-end
    slices: List[Slice] = dataclasses.field(default_factory=list)             # its placed launches

    @property
    def thread(self) -> Optional[int]:
        return self.record.thread if self.record is not None else None


Key = Tuple[int, Optional[int]]             # (pid, thread id or UNKNOWN)


class _Builder:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.position = {id(r): n for n, r in enumerate(log.records)}
        self.slices: Dict[Key, List[Slice]] = collections.defaultdict(list)
        self.instants: Dict[Key, List[Instant]] = collections.defaultdict(list)
        self.process_instants: Dict[int, List[Instant]] = collections.defaultdict(list)
        self.not_placed: Dict[str, int] = collections.Counter()
        self.unknown: Dict[Tuple[int, str], int] = collections.Counter()   # (pid, why) -> launches
        self.placed: Dict[int, Tuple[Key, Slice]] = {}      # id(launch or call) -> where it went
        self.runs, self.owners = self._runs()
        # per process and per model instance, the records that follow a kernel at level 1: the
        # next launch or run-end (another instance's launches run beside it, on another thread)
        self.marks: Dict[Tuple[int, Optional[str]], List[Tuple[int, Record]]] = collections.defaultdict(list)
        for n, r in enumerate(log.records):
            if r.kind in ("launch", "run-end"):
                self.marks[(r.pid, None)].append((n, r))
                self.marks[(r.pid, r.model)].append((n, r))

    def timeline(self) -> Timeline:
        for launch in self.log.launches:
            self._launch(launch)
        for run in self.runs:
            self._run(run)
        for call in self.log.calls:
            self._call(call)
        self._checks()
        self._lone_crashes()
        notes = [f"{_process_name(self.log.process(pid))}: {n} launch(es) on 'thread unknown': {why}"
                 for (pid, why), n in self.unknown.items()]
        return _assemble(self.log, self.slices, self.instants, self.process_instants,
                         dict(self.not_placed), notes)

    # which run a launch belongs to ---------------------------------------------------

    def _runs(self) -> Tuple[List[_Run], Dict[int, List[_Run]]]:
        """Every run, and for each launch, launch-end and crash record the runs of its
        number open in its process when it was written."""
        runs: List[_Run] = []
        owners: Dict[int, List[_Run]] = {}
        open_runs: Dict[int, List[_Run]] = collections.defaultdict(list)
        for n, rec in enumerate(self.log.records):
            if rec.kind == "run":
                run = _Run(rec)
                runs.append(run)
                open_runs[rec.pid].append(run)
            elif rec.kind == "run-end":
                run = next((r for r in reversed(open_runs[rec.pid])
                            if r.record.id == rec.id and r.record.name == rec.name), None)
                if run is None:
                    runs.append(_Run(None, end=rec, marks=[(n, rec)]))
                else:
                    run.end = rec
                    run.marks.append((n, rec))
                    open_runs[rec.pid].remove(run)
            elif rec.kind in ("launch", "launch-end", "crash") and "." in rec.id:
                # `model:R.K`: the run R of that model instance; `R.K` (an older log): any run R
                model = rec.model
                number = rec.id.rpartition(":")[2].partition(".")[0]
                owners[id(rec)] = found = [r for r in open_runs[rec.pid] if r.record.id == number
                                           and model in (None, r.record.name)]
                if rec.kind == "launch" and len(found) == 1:
                    found[0].marks.append((n, rec))
        return runs, owners

    def _owner(self, launch: Launch) -> Tuple[Optional[_Run], str]:
        """The launch's run, or None and why it is not known."""
        found = self.owners.get(id(launch.first), [])
        if len(found) == 1:
            return found[0], ""
        number = text(launch.ident.rpartition(":")[2].partition(".")[0])
        whose = f" of {text(launch.model)}" if launch.model is not None else ""
        if not found:
            return None, f"no run {number}{whose} was open in the process"
        models = ", ".join(text(r.record.name) for r in found)
        return None, f"{len(found)} runs numbered {number} were open at once ({models})"

    # slices -----------------------------------------------------------------------

    def _launch(self, launch: Launch) -> None:
        run, why = self._owner(launch)
        start = micros(launch.first.timestamp)
        if start is None:
            self.not_placed["launch"] += 1
            return
        end, how = self._launch_end(launch, run, start)
        thread = run.thread if run is not None else UNKNOWN
        if run is None:
            self.unknown[(launch.pid, why)] += 1
        elif thread is UNKNOWN:
            self.unknown[(launch.pid, f"run record {launch.run} has no thread=")] += 1
        owner = _run_title(run) if run is not None else f"unknown: {why}"
        piece = Slice(text(launch.name), "launch", start, end, functools.partial(_launch_args, launch, owner, how))
        key = (launch.pid, thread)
        self.slices[key].append(piece)
        self.placed[id(launch)] = (key, piece)
        if run is not None:
            run.slices.append(piece)
        self._nonfinite(launch, key, piece)
        if launch.crash is not None:
            self._crash(launch.crash, key, piece)

    def _launch_end(self, launch: Launch, run: Optional[_Run], start: int) -> Tuple[int, str]:
        """When a launch ended, and how that is known."""
        if launch.start is None:
            return start, "unknown: the log starts after its launch record"
        if launch.end is not None:
            return _after(start, launch.end, "its launch-end record")
        if launch.crash is not None:
            return _after(start, launch.crash, "its crash trailer")
        # level 1 writes no launch-end: the kernel ran until the run went on
        marks = run.marks if run is not None else self.marks[launch.instance]
        n = self.position[id(launch.start)]
        i = bisect.bisect_right(marks, n, key=lambda mark: mark[0])
        if i < len(marks):
            nxt = marks[i][1]
            whose = "run" if run is not None else "process" if launch.model is None else "model instance"
            return _after(start, nxt, f"no launch-end record: the next {nxt.kind} record of its {whose}")
        return start, "unknown: no launch-end record and no later record of its run"

    def _run(self, run: _Run) -> None:
        first = run.record or run.end
        start = micros(first.timestamp)
        if start is None:
            self.not_placed["run"] += 1
            return
        if run.record is None:
            end, how = start, "unknown: the log starts after its run record"
        elif run.end is not None:
            end, how = _after(start, run.end, "its run-end record")
        elif run.slices:
            end, how = max(start, max(s.end for s in run.slices)), "no run-end record: the end of its last launch"
        else:
            end, how = start, "unknown: no run-end record and no launch"
        args: Dict[str, Any] = {"id": text(first.id), "model": text(first.name), "log": text(first.where),
                                "thread": _thread_text(run.thread), "launches": len(run.slices)}
        if run.record is not None and run.record.rank is not None:
            world = run.record.world
            args["rank"] = f"{run.record.rank}/{world}" if world is not None else str(run.record.rank)
        args["inputs"] = _values(run.record.items if run.record else [])
        args["outputs"] = _values(run.end.items if run.end else [])
        args["end"] = how
        self.slices[(first.pid, run.thread)].append(Slice(_run_title(run), "run", start, end, args))

    def _call(self, call: Call) -> None:
        start = micros(call.first.timestamp)
        if start is None:
            self.not_placed["call"] += 1
            return
        if call.start is None:
            end, how = start, "unknown: the log starts after its call record"
        elif call.end is not None:
            end, how = _after(start, call.end, f"its {call.end.kind} record")
        else:
            end, how = start, "unknown: no return or raise record (level 1 writes no return)"
        thread = call.start.thread if call.start is not None else UNKNOWN
        key = (call.pid, thread)
        piece = Slice(text(call.name), "call", start, end, functools.partial(_call_args, call, thread, how))
        self.slices[key].append(piece)
        self.placed[id(call)] = (key, piece)
        self._nonfinite(call, key, piece)
        if call.end is not None and call.end.kind == "raise":
            ts = micros(call.end.timestamp)
            if ts is None:
                self.not_placed["instant"] += 1
            else:
                self.instants[key].append(Instant(
                    f"raise: {text(call.name)}", "raise", ts,
                    {"id": text(call.end.id), "log": text(call.end.where),
                     "exception": [text(line) for line in call.end.notes]}, piece))

    # instants -----------------------------------------------------------------------

    def _nonfinite(self, event, key: Key, piece: Slice) -> None:
        """An instant where a launch or call wrote NaN/Inf: at its end record."""
        bad = [e for e in evidence(event.outputs) if e.state == NONFINITE]
        if not bad or event.end is None:
            return
        ts = micros(event.end.timestamp)
        if ts is None:
            self.not_placed["instant"] += 1
            return
        outputs: Dict[str, Any] = {}
        nan = inf = 0
        for e in bad:
            if isinstance(e.value, Tensor):
                counts = {k: e.value.fields[k] for k in ("nan_count", "inf_count") if k in e.value.fields}
                nan += _count(e.value.stats.get("nan_count"))
                inf += _count(e.value.stats.get("inf_count"))
                outputs[_unique(outputs, text(e.label))] = {k: text(v) for k, v in counts.items()}
            else:
                outputs[_unique(outputs, text(e.label))] = text(str(e.value))
        self.instants[key].append(Instant(
            f"NaN/Inf: {text(event.name)}", "nan-inf", ts,
            {"id": text(event.ident), "nan_count": nan, "inf_count": inf, "outputs": outputs}, piece))

    def _crash(self, record: Record, key: Optional[Key], near: Optional[Slice]) -> None:
        ts = micros(record.timestamp)
        if ts is None:
            self.not_placed["instant"] += 1
            return
        name = "crash" if record.name == "-" else f"crash: {text(record.name)}"
        instant = Instant(name, "crash", ts, {"id": text(record.id), "log": text(record.where),
                                              "signal": [text(line) for line in record.notes]}, near)
        (self.instants[key] if key is not None else self.process_instants[record.pid]).append(instant)

    def _lone_crashes(self) -> None:
        """Crash trailers no launch claims: in a call (its id is the call number) or in none."""
        claimed = {id(launch.crash) for launch in self.log.launches if launch.crash is not None}
        calls = {(c.pid, c.first.id): c for c in self.log.calls}
        for record in self.log.crashes:
            if id(record) in claimed:
                continue
            call = calls.get((record.pid, record.id))
            key, near = self.placed.get(id(call), (None, None)) if call is not None else (None, None)
            self._crash(record, key, near)

    def _checks(self) -> None:
        """`note - nan-check` and `note - input-check`: on the launch a nan-check names."""
        launches: Dict[Tuple[int, str], List[Tuple[int, Launch]]] = collections.defaultdict(list)
        for launch in self.log.launches:
            launches[(launch.pid, f"launch {launch.title} ")].append((self.position[id(launch.first)], launch))
        for n, record in enumerate(self.log.records):
            if record.kind != "note" or record.name not in ("nan-check", "input-check"):
                continue
            ts = micros(record.timestamp)
            if ts is None:
                self.not_placed["instant"] += 1
                continue
            first = record.notes[0] if record.notes else ""
            named = [launch for start, launch in launches.get((record.pid, _launch_prefix(first)), [])
                     if start < n]
            args: Dict[str, Any] = {"log": text(record.where), "lines": [text(line) for line in record.notes]}
            instant = Instant(text(record.name), "check", ts, args)
            where = self.placed.get(id(named[-1])) if named else None
            if where is None:
                self.process_instants[record.pid].append(instant)
            else:
                args["launch"] = text(named[-1].ident)
                instant.near = where[1]
                self.instants[where[0]].append(instant)


def _launch_prefix(line: str) -> str:
    """`launch 1.3 cpp_fused_log_0 ` of a nan-check message, as Launch.title spells it."""
    parts = line.split(" ", 3)
    return " ".join(parts[:3]) + " " if len(parts) >= 3 and parts[0] == "launch" else ""


def _count(value) -> int:
    """A count as the log wrote it; 0 for what is no whole number (a crafted `nan_count=nan`)."""
    return value if isinstance(value, int) else 0


def _after(start: int, record: Record, how: str) -> Tuple[int, str]:
    """The end a record gives a slice that began at `start`; its own start when unreadable."""
    end = micros(record.timestamp)
    if end is None:
        return start, f"unknown: {how} has no readable timestamp"
    if end < start:
        return start, f"unknown: {how} is stamped before its start"
    return end, how


def _run_title(run: _Run) -> str:
    first = run.record or run.end
    return f"run {text(first.id)} {text(first.name)}"


def _thread_text(thread: Optional[int]) -> Any:
    return "unknown" if thread is UNKNOWN else "TID (masked)" if thread < 0 else thread


def _flag(items: List[Item]) -> str:
    return _FLAG.get(overall(evidence(items)), "unknown")


def _unique(taken: Dict[str, Any], label: str) -> str:
    """Several outputs may share a name (views of one buffer): the later ones get `#2`..."""
    if label not in taken:
        return label
    n = 2
    while f"{label} #{n}" in taken:
        n += 1
    return f"{label} #{n}"


def _launch_args(launch: Launch, run: str, how: str) -> Dict[str, Any]:
    args: Dict[str, Any] = {"id": text(launch.ident), "log": text(launch.first.where), "run": run}
    origin = launch.origin
    if origin is not None:
        args["nodes"] = text(", ".join(origin.nodes) or "-")
        args["source"] = text(origin.source or "-")
        if origin.lines:
            args["source_lines"] = [text(f"{src} nodes={','.join(nodes)}") for src, nodes in origin.lines]
    inputs, outputs = launch.inputs, launch.outputs
    args["inputs"] = _values(inputs)
    args["outputs"] = _values(outputs)
    args["inputs_nan_inf"] = _flag(inputs) if launch.start is not None else "unknown"
    args["outputs_nan_inf"] = _flag(outputs) if launch.end is not None else "unknown"
    args["end"] = how
    return args


def _call_args(call: Call, thread: Optional[int], how: str) -> Dict[str, Any]:
    outputs = call.outputs
    args: Dict[str, Any] = {"id": text(call.first.id), "log": text(call.first.where),
                            "thread": _thread_text(thread), "inputs": _values(call.inputs),
                            "outputs": _values(outputs)}
    if call.end is not None and call.end.kind == "raise":
        args["exception"] = [text(line) for line in call.end.notes]
    args["outputs_nan_inf"] = _flag(outputs) if call.end is not None else "unknown"
    args["end"] = how
    return args


def _values(items: List[Item]) -> Dict[str, Any]:
    """Each tensor of the items with its shape, dtype and statistics as the log wrote them,
    each scalar as its text."""
    out: Dict[str, Any] = {}
    for item in items:
        for label, tensor in item.tensors():
            out[_unique(out, text(label))] = _tensor(tensor)
        for label, value in item.inline_values():
            out[_unique(out, text(label))] = text(value)
    return out


def _tensor(tensor: Tensor) -> Dict[str, Any]:
    out: Dict[str, Any] = {"shape": text(tensor.shape), "dtype": text(tensor.dtype)}
    out.update({k: text(tensor.fields[k]) for k in STAT_KEYS if k in tensor.fields})
    if tensor.skipped is not None:
        out["stats"] = text(f"skipped ({tensor.skipped})")
    elif not any(k in tensor.fields for k in STAT_KEYS):
        out["stats"] = "none (log level < 5)"
    if tensor.truncated:
        out["truncated"] = True
    if tensor.unreadable:
        out["unreadable"] = text(tensor.unreadable)
    nonfinite = tensor.nonfinite()
    out["nan_inf"] = "unknown" if nonfinite is None else "yes" if nonfinite else "no"
    return out


# -- processes, tracks and ids ---------------------------------------------------------

def _assemble(log: Log, slices: Dict[Key, List[Slice]], instants: Dict[Key, List[Instant]],
              process_instants: Dict[int, List[Instant]], not_placed: Dict[str, int],
              notes: List[str]) -> Timeline:
    processes = sorted(log.processes(), key=lambda p: p.order)
    keys = list(dict.fromkeys([*slices, *instants]))
    ids = _Ids({p.pid for p in processes} | {k[1] for k in keys if k[1] is not None})
    taken_tids: set = set()
    out: List[ProcessTrack] = []
    for process in processes:
        pid = process.pid if ids.fits(process.pid) else ids.new()
        tracks: List[Track] = []
        mine = [k for k in keys if k[0] == process.pid]
        # threads in order of their first slice or instant, the unknown one last
        mine.sort(key=lambda k: (k[1] is UNKNOWN, min([s.start for s in slices.get(k, [])]
                                                      + [i.ts for i in instants.get(k, [])])))
        for key in mine:
            lanes = _lanes(slices.get(key, []))
            home = {id(s): n for n, lane in enumerate(lanes) for s in lane}
            lane_instants: List[List[Instant]] = [[] for _ in lanes]
            for instant in sorted(instants.get(key, []), key=lambda i: i.ts):
                lane_instants[home.get(id(instant.near), 0)].append(instant)
            base = _track_name(key[1])
            for n, (lane, marks) in enumerate(zip(lanes, lane_instants)):
                real = key[1] if n == 0 and key[1] is not UNKNOWN else None
                tid = real if real is not None and ids.fits(real) and real not in taken_tids else ids.new()
                taken_tids.add(tid)
                name = base if n == 0 else f"{base} (overlap {n})"
                tracks.append(Track(name, tid, lane, marks))
            if len(lanes) > 1:
                notes.append(f"{_process_name(process)} {base}: {sum(len(lane) for lane in lanes[1:])} slice(s) "
                             f"cross others of the thread; they are on {len(lanes) - 1} further track(s)")
        own = sorted(process_instants.get(process.pid, []), key=lambda i: i.ts)
        out.append(ProcessTrack(_process_name(process), pid, process, tracks, own))
    return Timeline(out, not_placed, [text(n) for n in notes] + [text(n) for n in log.left_out],
                    unreadable=[text(n) for n in log.unreadable()], gaps=completeness.of_log(log))


def _lanes(slices: List[Slice]) -> List[List[Slice]]:
    """Slices split into lanes in each of which they nest (none crosses another), in
    nesting order; the first lane takes all it can."""
    lanes: List[List[Slice]] = []
    stacks: List[List[Slice]] = []
    for piece in sorted(slices, key=lambda s: s.order):
        for lane, stack in zip(lanes, stacks):
            while stack and stack[-1].end <= piece.start:
                stack.pop()
            if not stack or stack[-1].end >= piece.end:
                lane.append(piece)
                stack.append(piece)
                break
        else:
            lanes.append([piece])
            stacks.append([piece])
    return lanes or [[]]


def _track_name(thread: Optional[int]) -> str:
    if thread is UNKNOWN:
        return "thread unknown"
    return "thread TID (masked)" if thread < 0 else f"thread {thread}"


def _process_name(process: Process) -> str:
    if process.pid >= 0:
        return process.label
    masked = "pid PID (masked)"
    return f"rank {process.rank} ({masked})" if process.rank is not None else masked


class _Ids:
    """Process and thread ids for the trace: the real one where it is a usable id, else
    one made up that no real one in the trace has."""

    def __init__(self, real) -> None:
        self.used = set(real)
        self.next = _MADE_UP

    @staticmethod
    def fits(value: int) -> bool:
        return 0 < value <= _MAX_ID

    def new(self) -> int:
        while self.next in self.used:
            self.next += 1
        self.used.add(self.next)
        return self.next
