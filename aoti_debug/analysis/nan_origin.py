"""Find the first launch (or `log_api` call) that turned finite inputs into NaN/Inf.

Works on a parsed level-5 `Log`.  The origin is the candidate whose NaN/Inf
output was *written first*: a call that encloses other calls or launches
returns after them, so the innermost event that produced the NaN wins, and
its enclosing calls are reported as such, not as the origin.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Tuple

from . import completeness, op_origin
from .records import (FINITE, NONFINITE, UNKNOWN, Event, Evidence, Finiteness, Log, Process, Record,
                      moment, record_evidence)

@dataclasses.dataclass(slots=True)
class Check:
    """What one event's records say of its finiteness.  Only the states are kept; the evidence
    is read again for the few events the answer describes (a long log holds millions)."""
    event: Event
    start: int                              # record positions, for order and nesting
    end: int
    inputs_state: str                       # FINITE | NONFINITE | UNKNOWN
    outputs_bad: bool
    outputs_unreadable: bool
    unmeasured: int                         # outputs without statistics
    first_unmeasured: Optional[str]         # the first of them: "launch 1.3 ... buf2: ..."

    @classmethod
    def of(cls, event: Event, start: int, end: int) -> "Check":
        ins = event.start.finiteness if event.start else Finiteness()
        outs = event.end.finiteness if event.end else Finiteness()
        first = f"{_named(event)} {outs.first_unknown}" if outs.first_unknown else None
        return cls(event, start, end, ins.state, outs.nonfinite, outs.unreadable, outs.unknown, first)

    @property
    def inputs(self) -> List[Evidence]:
        return record_evidence(self.event.start)

    @property
    def outputs(self) -> List[Evidence]:
        return record_evidence(self.event.end)

    def contains(self, other: "Check") -> bool:
        return (self.event.pid == other.event.pid and self.start < other.start
                and self.end > other.end)


@dataclasses.dataclass
class Finding:
    origin: Optional[Check] = None
    enclosing: List[Check] = dataclasses.field(default_factory=list)   # calls around the origin
    victims: List[Check] = dataclasses.field(default_factory=list)     # NaN in, NaN out
    other_origins: List[Check] = dataclasses.field(default_factory=list)
    entered: Optional[Check] = None         # first event whose inputs already held NaN/Inf
    unfinished: List[Event] = dataclasses.field(default_factory=list)  # never ended: outputs unknown
    notes: List[str] = dataclasses.field(default_factory=list)  # the NaN checker's notes on the origin
    # the memory check's notes on the origin: its NaN is poison, memory nobody wrote
    memory: List[str] = dataclasses.field(default_factory=list)
    op: Optional[str] = None                # the origin launch's op line (op_origin.py)
    all_events: List[Event] = dataclasses.field(default_factory=list)
    unreadable: List[str] = dataclasses.field(default_factory=list)   # dumped files that cannot be read
    # ended before the origin (or the first NaN/Inf input) with outputs that cannot be read
    earlier_unknown: List[Check] = dataclasses.field(default_factory=list)
    left_out: List[str] = dataclasses.field(default_factory=list)     # parts of the log not understood
    # how many outputs the log has no statistics for (skipped, or a dump's file not kept), and
    # the first: "launch 1.3 buf2: ..."
    unmeasured: int = 0
    first_unmeasured: Optional[str] = None
    crashes: List[Record] = dataclasses.field(default_factory=list)   # every crash trailer
    processes: Dict[int, Process] = dataclasses.field(default_factory=dict)  # by pid: rank where known
    # what the run is missing: never finished, records or tensors lost (completeness.py)
    gaps: completeness.Gaps = dataclasses.field(default_factory=completeness.Gaps)
    # findings that are not NaN/Inf, looked for when there is none (docs/checks.md): launches
    # that read a scale holding a zero, NaN or Inf (its scale block, docs/log-format.md 3.2),
    # and the NaN check's findings of saturated float8 values (AOTI_DEBUG_NAN_CHECK_SAT=1)
    bad_scales: List["BadScale"] = dataclasses.field(default_factory=list)
    saturated: List["Saturated"] = dataclasses.field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.origin is not None or self.entered is not None

    @property
    def flagged(self) -> bool:
        """Something was found: NaN/Inf, else a bad scale or saturated float8 values."""
        return self.found or bool(self.bad_scales or self.saturated)

    @property
    def when(self) -> Optional[str]:
        """The timestamp of the record where NaN/Inf was first seen: the origin's outputs,
        else the first inputs that held it (else the first bad scale or saturation, `record`);
        None when nothing was found."""
        record = self.record
        return record.timestamp if record is not None else None

    @property
    def record(self) -> Optional[Record]:
        """The record where NaN/Inf was first seen, as `when` names it; without NaN/Inf, the
        first bad scale's launch or saturated output."""
        if self.origin is not None:
            event = self.origin.event
            return event.end or event.crash or event.first
        if self.entered is not None:
            return self.entered.event.first
        if self.bad_scales:
            return self.bad_scales[0].event.first
        first = self.first_saturated
        return (first.event.end or first.event.first) if first is not None else None

    @property
    def first_saturated(self) -> Optional["Saturated"]:
        """The first saturation finding whose launch's inputs were unsaturated, else the first."""
        return next((f for f in self.saturated if f.first), self.saturated[0] if self.saturated else None)

    @property
    def stopped_short(self) -> bool:
        """The run crashed, a launch, call or run in it never finished, or records were lost."""
        return bool(self.gaps)


def checks(log: Log) -> List[Check]:
    position: Dict[int, int] = {id(r): n for n, r in enumerate(log.records)}
    out = []
    for event in log.events:
        last = event.end or event.crash or event.first
        out.append(Check.of(event, position[id(event.first)], position[id(last)]))
    return out


def find(log: Log, rerun_ops: bool = False) -> Finding:
    """`rerun_ops`: re-run the dumped origin launch's ops to name the op (op_origin.py)."""
    all_checks = checks(log)
    finding = Finding(all_events=[c.event for c in all_checks], unreadable=log.unreadable(),
                      left_out=list(log.left_out), crashes=list(log.crashes),
                      processes={p.pid: p for p in log.processes()}, gaps=completeness.of_log(log))
    finding.unfinished = [c.event for c in all_checks if not c.event.finished]
    finding.unmeasured = sum(c.unmeasured for c in all_checks)
    finding.first_unmeasured = next((c.first_unmeasured for c in all_checks if c.unmeasured), None)
    by_output_time = sorted(all_checks, key=lambda c: c.end)
    candidates = [c for c in by_output_time if c.outputs_bad and c.inputs_state != NONFINITE]
    if candidates:
        origin = finding.origin = candidates[0]
        for c in by_output_time:
            if c is origin or not c.outputs_bad or c.end < origin.end:
                continue
            if c.contains(origin):
                finding.enclosing.append(c)
            elif c.inputs_state == NONFINITE:
                finding.victims.append(c)
            else:
                finding.other_origins.append(c)
        finding.notes = checker_notes(log, origin.event)
        finding.memory = checker_notes(log, origin.event, "memcheck")
        if not _is_call(origin.event) and not finding.memory:
            finding.op = op_origin.describe(origin.event, rerun_ops)
    first_bad_input = next((c for c in sorted(all_checks, key=lambda c: c.start)
                            if c.inputs_state == NONFINITE), None)
    if first_bad_input is not None and (finding.origin is None
                                        or first_bad_input.start < finding.origin.start):
        if finding.origin is None or not first_bad_input.contains(finding.origin):
            finding.entered = first_bad_input
    if finding.found:
        seen = min([finding.origin.end] if finding.origin else []
                   + ([finding.entered.start] if finding.entered else []))
        finding.earlier_unknown = [c for c in by_output_time if c.end < seen and c.outputs_unreadable]
    else:   # no NaN/Inf: what else the log names is the finding, never "clean"
        finding.bad_scales = bad_scales(log, [c.event for c in all_checks])
        finding.saturated = saturated(log, [c.event for c in all_checks])
    return finding


# -- findings that are not NaN/Inf ----------------------------------------------

@dataclasses.dataclass
class BadScale:
    """A launch that read a scale holding a zero, NaN or Inf (its record's scale block)."""
    event: Event
    label: str                              # `in constant4`
    scale: str                              # `scale_b`
    zeros: int
    nans: int
    infs: int
    tensor: object                          # records.Tensor
    writer: Optional[str] = None            # `launch m:1.1 cpp_fused_... (source ..., module ...)`
    notes: List[str] = dataclasses.field(default_factory=list)   # the NaN check's on this launch

    @property
    def name(self) -> str:
        return self.label.split(" ", 1)[-1]

    def holding(self) -> str:
        """In the NaN check's words: `scale_b constant4 holding 1 zero, 0 NaN and 0 Inf`."""
        return f"{self.scale} {self.name} holding {self.zeros} zero, {self.nans} NaN and {self.infs} Inf"


def bad_scales(log: Log, events: List[Event]) -> List[BadScale]:
    """Every launch, in order, that read a scale holding a zero, NaN or Inf.  Only launches
    reading a narrow format (float8, float4) are read again: a scaled matmul reads one."""
    out: List[BadScale] = []
    for at, event in enumerate(events):
        if _is_call(event) or event.start is None or not event.start.narrow:
            continue
        for item in event.start.values:
            for label, t in item.tensors():
                if not t.scale:
                    continue
                stats, counts = t.stats, t.scale_counts()
                zeros, nans, infs = (counts.get("zero_count", 0), int(stats.get("nan_count", 0)),
                                     int(stats.get("inf_count", 0)))
                if zeros or nans or infs:
                    notes = checker_notes(log, event)
                    name = label.split(" ", 1)[-1]
                    writer = next((m.group(1) for n in notes if f" read {t.scale} {name} " in n
                                   for m in [_WRITER.search(n)] if m), None) or _writer(events, at, name)
                    out.append(BadScale(event, label, t.scale, zeros, nans, infs, t, writer, notes))
    return out


def _writer(events: List[Event], at: int, name: str) -> Optional[str]:
    """The launch that last wrote buffer `name` before events[at], from the records alone (the
    NaN check's note names it from the compiler's plan; a log without the check has none), in
    the note's words: the last earlier launch of the same run and model instance whose
    `launch-end` record holds `name` as an output.  None when a launch between the two is not
    in the log (a kernel filter left it out, or its records were lost): that launch may have
    written it, and a debugger names no writer rather than a wrong one."""
    reader = events[at]
    expected = reader.index
    # back over the run's own launches only: it stops at the run's first launch, so a scale
    # no launch wrote (a constant) costs the run's length, never the log's
    for k in range(at - 1, -1, -1):
        if expected is None or expected <= 1:
            return None
        event = events[k]
        if _is_call(event) or event.instance != reader.instance or event.run != reader.run:
            continue
        if event.index != expected - 1:
            return None
        expected = event.index
        if event.end is not None and any(i.name == name and i.role in ("out", "inout") for i in event.outputs):
            return f"{_named(event)} (source {event.origin.where_of([name]) if event.origin else '-'})"
    return None


# the NaN check's words for a scale computed in the model (docs/checks.md "Bad scales")
_WRITER = re.compile(r"; \S+ was last written by (launch .*)$")
# its finding of saturated float8 values and no NaN/Inf, at the launch where they first appear
SATURATED = re.compile(r"^launch (?P<id>\S+) (?P<kernel>\S+) \(source (?P<source>.*?)\) wrote 0 NaN(?:, 0 Inf)? "
                        r"and (?P<count>\d+) saturated into (?P<buffer>\S+) \(first at flat index \d+\); "
                        r"(?P<inputs>its inputs were finite and unsaturated|its inputs held no NaN and no "
                        r"saturated value|its inputs? .*? already held )")


@dataclasses.dataclass
class Saturated:
    """The NaN check's finding that a launch wrote saturated float8 values (and no NaN/Inf)."""
    event: Event
    source: str                             # the quantizing line and module, as the note names them
    buffer: str
    count: int
    first: bool                             # its inputs were unsaturated: where they first appear
    note: str

    @property
    def outputs(self) -> List[Evidence]:
        """The output the note names, as its launch-end record holds it."""
        return [e for e in record_evidence(self.event.end) if e.label.split(" ", 1)[-1] == self.buffer]

    @property
    def format(self) -> str:
        """`float8`, or `float4` for a float4_e2m1fn_x2 output (the note names either)."""
        return "float4" if any(getattr(e.value, "dtype", "") == "torch.float4_e2m1fn_x2"
                               for e in self.outputs) else "float8"


def saturated(log: Log, events: List[Event]) -> List[Saturated]:
    """The NaN check's saturation findings (AOTI_DEBUG_NAN_CHECK_SAT=1), in order, each with
    its launch; those at a launch the log does not hold are left out."""
    by_title = {(e.pid, e.title): e for e in events if not _is_call(e)}
    out: List[Saturated] = []
    for r in log.records:
        if r.kind != "note" or r.name != "nan-check":
            continue
        for line in r.notes:
            m = SATURATED.match(line)
            event = by_title.get((r.pid, f"{m['id']} {m['kernel']}")) if m else None
            if event is not None:
                out.append(Saturated(event, m["source"], m["buffer"], int(m["count"]),
                                     not m["inputs"].endswith("already held "), line))
    return out


@dataclasses.dataclass
class Ranked:
    """A job's logs: each process's own finding, in the order its NaN/Inf appeared."""
    first: Optional[Finding]                # the process that went bad first; None: none did
    order: List[Tuple[Process, Finding]]    # bad processes by time, then the clean ones by rank
    whole: Finding                          # the merged log: how the job stopped short, what is unreadable


def by_process(log: Log, rerun_ops: bool = False) -> Ranked:
    """nan-origin for a job: one finding per process (rank), each from its own records, ordered
    by when NaN/Inf first showed in it.  Timestamps are compared as written: the clocks of one
    machine."""
    per = [(p, find(log.of_process(p.pid), rerun_ops)) for p in log.processes()]
    # NaN/Inf first, as in one process's answer; then bad scales and saturated float8
    bad = sorted((x for x in per if x[1].flagged), key=lambda x: (not x[1].found, x[1].when))
    clean = sorted((x for x in per if not x[1].flagged), key=lambda x: x[0].order)
    return Ranked(bad[0][1] if bad else None, bad + clean, find(log))


def ranked_text(ranked: Ranked) -> List[str]:
    """The first process to go bad, in full, then every process in the order it went bad."""
    whole = ranked.whole
    lines = stopped(whole)
    if ranked.first is not None:
        lines += _first_only(ranked.first)
    lines.append(f"{len(ranked.order)} processes, in the order NaN/Inf appeared "
                 "(timestamps as written: clocks of one machine):")
    first = ranked.first.when if ranked.first is not None else None
    for process, f in ranked.order:
        if f.found:
            check = f.origin or f.entered
            how = "origin" if f.origin is not None else "first inputs with NaN/Inf"
            later = _after(first, f.when)
            lines.append(f"  {process.label}: {how} {_named(check.event)} at [{f.when}]"
                         + (f", {later} after the first" if later else ""))
        elif f.unreadable:
            lines.append(f"  {process.label}: cannot tell ({len(f.unreadable)} file(s) or record(s) "
                         "cannot be read)")
        elif f.flagged:   # no NaN/Inf: its bad scale, else its saturated float8
            what = (f"a bad scale read by {_named(f.bad_scales[0].event)} ({f.bad_scales[0].holding()})"
                    if f.bad_scales else f"saturated {f.first_saturated.format} from "
                    f"{_named(f.first_saturated.event)}")
            later = _after(first, f.when)
            lines.append(f"  {process.label}: no NaN/Inf, but {what} at [{f.when}]"
                         + (f", {later} after the first" if later else ""))
        else:
            lines.append(f"  {process.label}: no NaN/Inf in {len(f.all_events)} "
                         f"{_nouns(f.all_events) if f.all_events else 'launches'}"
                         + (f" ({f.unmeasured} output(s) without statistics)" if f.unmeasured else ""))
    # said once for the job: the merged log's files that cannot be read and what it left out
    lines += finding_text(whole) if ranked.first is None else job_notes(whole)
    return lines


def _after(first: Optional[str], when: Optional[str]) -> Optional[str]:
    """`+5.023 ms`: how long after `first` a timestamp is; None for the same time or unreadable ones."""
    t0, t1 = moment(first), moment(when)
    if t0 is None or t1 is None:
        return None
    ms = (t1 - t0).total_seconds() * 1e3
    return f"+{ms:.3f} ms" if ms > 0 else None


def _first_only(finding: Finding) -> List[str]:
    """A process's finding without the notes the merged log says once for the job."""
    return finding_text(dataclasses.replace(finding, unreadable=[], left_out=[]))


def checker_notes(log: Log, event: Event, topic: str = "nan-check") -> List[str]:
    """What a compiled-in check (`note - nan-check`, `note - memcheck`) said about this launch."""
    prefix = f"launch {event.title} "
    return [line for r in log.records if r.kind == "note" and r.name == topic
            and r.pid == event.pid for line in r.notes if line.startswith(prefix)]


# -- text ---------------------------------------------------------------------

def _is_call(event: Event) -> bool:
    return event.ident.startswith("call ")


_named = completeness.named       # `launch ranker:1.3 cpp_fused_log_2` or `call 3 __main__.f`


def _list(checks_: List[Check], limit: int = 10) -> str:
    names = [c.event.title for c in checks_[:limit]]
    more = len(checks_) - limit
    return ", ".join(names) + (f", ... ({more} more)" if more > 0 else "")


def _nouns(events: List[Event]) -> str:
    kinds = {"call" if _is_call(e) else "launch" for e in events}
    one = len(events) == 1
    if kinds == {"call"}:
        return "call" if one else "calls"
    if kinds == {"launch"}:
        return "launch" if one else "launches"
    return "launches and calls"


def _counted(checks_: List[Check], adjective: str) -> str:
    """`3 later launches`, `1 enclosing call`."""
    return f"{len(checks_)} {adjective} {_nouns([c.event for c in checks_])}"


def capped(notes: List[str], limit: int = 10) -> List[str]:
    """The first `limit` notes and how many more there are."""
    more = len(notes) - limit
    return notes[:limit] + ([f"note: ... and {more} more like it"] if more > 0 else [])


def _process(event: Event, processes: Dict[int, Process]) -> str:
    """`rank 2, pid 4242`, or `pid 4242` for a process without a rank."""
    p = processes.get(event.pid)
    return f"rank {p.rank}, pid {p.pid}" if p is not None and p.rank is not None else f"pid {event.pid}"


def describe(check: Check, heading: str, processes: Optional[Dict[int, Process]] = None,
             op: Optional[str] = None) -> List[str]:
    processes = processes or {}
    event = check.event
    lines = [f"{heading}: {_named(event)} ({_process(event, processes)}, {event.first.where})"]
    if not _is_call(event):
        origin = event.origin
        # a kernel fusing independent computations: the line of the outputs that hold NaN/Inf;
        # its module says which layer (layers share their lines)
        bad = [e.label for e in check.outputs if e.state == NONFINITE]
        lines.append(f"  source: {origin.where_of(bad) if origin else '-'}")
        lines.append(f"  nodes:  {', '.join(origin.nodes) if origin and origin.nodes else '-'}")
        if op:
            lines.append(op)
    state = check.inputs_state
    caption = {FINITE: "all finite", UNKNOWN: "finite where known",
               NONFINITE: "already holding NaN/Inf"}[state]
    lines.append(f"  inputs ({caption}):" if check.inputs else "  inputs: none recorded")
    lines += [f"    {e.line()}" for e in check.inputs]
    lines.append("  outputs (NaN/Inf):" if check.outputs_bad else "  outputs:")
    lines += [f"    {e.line()}" for e in check.outputs]
    return lines


def stopped(finding: Finding) -> List[str]:
    """How the run stopped short and what it lost, said before anything else."""
    return finding.gaps.lines()


def text(finding: Finding) -> List[str]:
    """nan-origin's answer: how the run stopped short, if it did, then the NaN/Inf finding."""
    return stopped(finding) + finding_text(finding)


def finding_text(finding: Finding) -> List[str]:
    lines: List[str] = []
    if finding.origin is not None:
        origin = finding.origin
        # poison read or returned by the origin: a memory bug, not numerics
        heading = "NaN/Inf from memory nobody wrote" if finding.memory else "NaN/Inf origin"
        lines += describe(origin, heading, finding.processes, finding.op)
        lines += [f"  memcheck: {n}" for n in finding.memory]
        unknown = [e for e in origin.inputs if e.state == UNKNOWN]
        if unknown:
            lines.append(f"  note: {len(unknown)} input(s) have no statistics, so their "
                         f"finiteness is unknown: {', '.join(e.label for e in unknown)}")
        lines += [f"  runtime note: {n}" for n in finding.notes]
        if finding.enclosing:
            lines.append(f"{_counted(finding.enclosing, 'enclosing')} returned NaN/Inf because "
                         f"of it: {_list(finding.enclosing)}")
        if finding.victims:
            verb = "shows" if len(finding.victims) == 1 else "show"
            lines.append(f"{_counted(finding.victims, 'later')} {verb} NaN/Inf too (victims): "
                         f"{_list(finding.victims)}")
        if finding.other_origins:
            lines.append(f"{_counted(finding.other_origins, 'later')} also turned finite inputs "
                         f"into NaN/Inf: {_list(finding.other_origins)}")
    if finding.entered is not None:
        if finding.origin is None:
            readable = " whose outputs can be read" if finding.earlier_unknown else ""
            lines.append(f"no launch or call{readable} turned finite inputs into NaN/Inf: "
                         "NaN/Inf were already in the inputs")
        else:
            lines.append("before that, NaN/Inf were already in the inputs")
        lines += describe(finding.entered, "first inputs with NaN/Inf", finding.processes)
    if finding.earlier_unknown:
        lines.append(f"note: the outputs of {_counted(finding.earlier_unknown, 'earlier')} cannot be "
                     f"read, so NaN/Inf may have appeared earlier: {_list(finding.earlier_unknown)}")
    if not finding.found and finding.unreadable:
        lines.append(f"cannot tell whether NaN/Inf appear: {len(finding.unreadable)} file(s) or record(s) "
                     f"cannot be read")
    elif finding.bad_scales:
        lines += scale_text(finding)
    elif finding.saturated:
        lines += saturated_text(finding)
    elif not finding.found:
        lines.append(f"no NaN/Inf in the {len(finding.all_events)} "
                     f"{_nouns(finding.all_events) if finding.all_events else 'launches'} of the log"
                     + _unmeasured(finding))
    return lines + job_notes(finding)


def _none_wrote(finding: Finding) -> str:
    n = len(finding.all_events)
    return f"no launch wrote NaN/Inf ({n} {_nouns(finding.all_events) if n else 'launches'} in the log"  \
        + (f"; {finding.unmeasured} output(s) without statistics" if finding.unmeasured else "") + ")"


def scale_text(finding: Finding) -> List[str]:
    """The first launch that read a bad scale: a zero scale leaves no NaN/Inf behind."""
    first = finding.bad_scales[0]
    event = first.event
    lines = [f"bad scale: {_named(event)} ({_process(event, finding.processes)}, {event.first.where})",
             f"  source: {event.origin.where_of([]) if event.origin else '-'}",
             f"  nodes:  {', '.join(event.origin.nodes) if event.origin and event.origin.nodes else '-'}",
             f"  scale:  {first.holding()}: {first.tensor.summary()}"]
    if first.writer:
        lines.append(f"  written by: {first.writer}")
    lines += [f"  runtime note: {n}" for n in first.notes]
    lines.append("a bad scale is the origin of what this launch writes, not its arithmetic (a zero "
                 f"turns it into zeros); {_none_wrote(finding)}")
    later = list(dict.fromkeys(f.event.title for f in finding.bad_scales[1:] if f.event is not event))
    if later:
        lines.append(f"{len(later)} later launch{'' if len(later) == 1 else 'es'} read a bad scale too: "
                     + ", ".join(later[:10]) + (f", ... ({len(later) - 10} more)" if len(later) > 10 else ""))
    return lines


def saturated_text(finding: Finding) -> List[str]:
    """The first launch the NaN check named for saturated float8 values where its inputs had none."""
    first = finding.first_saturated
    event = first.event
    heading = f"saturated {first.format} origin" if first.first else f"saturated {first.format}"
    lines = [f"{heading}: {_named(event)} ({_process(event, finding.processes)}, "
             f"{(event.end or event.first).where})",
             f"  source: {first.source}",
             f"  nodes:  {', '.join(event.origin.nodes) if event.origin and event.origin.nodes else '-'}",
             "  outputs (saturated):"]
    lines += [f"    {e.line()}" for e in first.outputs]
    lines.append(f"  runtime note: {first.note}")
    lines.append(f"{first.count} saturated {first.format} value{'' if first.count == 1 else 's'} (the format's largest "
                 f"finite magnitude): an overflow the cast saturated silently; {_none_wrote(finding)}")
    later = list(dict.fromkeys(f.event.title for f in finding.saturated if f.event is not event))
    if later:
        lines.append(f"{len(later)} other launch{'' if len(later) == 1 else 'es'} wrote saturated values "
                     "too: " + ", ".join(later[:10]) + (f", ... ({len(later) - 10} more)" if len(later) > 10 else ""))
    return lines


def _unmeasured(finding: Finding) -> str:
    """What "no NaN/Inf" leaves out: the outputs the log has no statistics for."""
    if not finding.unmeasured:
        return ""
    return (f" where it has statistics; {finding.unmeasured} output(s) have none, so their "
            f"finiteness is unknown (first: {finding.first_unmeasured})")


def job_notes(finding: Finding) -> List[str]:
    """The files that cannot be read and the parts of the log left out."""
    return (capped([f"note: {why}; its tensors are unknown" for why in finding.unreadable])
            + [f"note: {what}" for what in finding.left_out])
