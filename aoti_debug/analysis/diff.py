"""Align two logs of the same model launch by launch and compare output statistics.

Alignment first matches launches on their provenance (the FX nodes of the
origin line, else the kernel name) in order; what is left in between is
matched on the kernel stem (`fused_relu` for both `cpp_fused_relu_0` and
`triton_poi_fused_relu_0`), and what is still left is paired by a similarity
score (same name, same or overlapping nodes, same source line, same stem).
So a kernel fused differently or present on one side only does not shift
everything after it.

Within a pair, outputs are paired by the value they hold: the FX node a
buffer stores (the `holds:` line), else the buffer's name, so a scratch
buffer one build materialises and the other does not is shown as not
comparable instead of being compared with something else.  The model's
outputs (the `run-end` record) are always compared, in order.

Outputs are compared on their statistics; when both sides were read from
level-10 dumps (dumps.py), on their values, element by element.  Outputs whose
content hashes (docs/log-format.md section 3.1) are equal are identical bit for
bit and need no other comparison; a pair whose hashes differ is still judged by
the tolerances, unless `exact` asks for equal bits.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

from ..runtime.format import number

from . import closeness
from .records import (COUNT_KEYS, NARROW, STAT_KEYS, Event, Item, Launch, Log, Process, Record, Tensor,
                      parse_number)
from .untrusted import InputError, printable

OK, DIFFERS, UNKNOWN, ONLY_A, ONLY_B = "ok", "DIFFERS", "not compared", "only in A", "only in B"
IDENTICAL = "identical"             # every output's content hash equal on both sides
VALUE_KEYS = ("min", "max", "mean", "abs_min", "abs_max", "abs_mean")
_MAX_PAIRING_CELLS = 250_000       # larger unmatched stretches stay unpaired


class DiffInputError(InputError):
    """The logs cannot be compared (no launches of the run asked for, no statistics)."""


# -- choosing what to compare ----------------------------------------------------

Instance = Tuple[Optional[str], List[Event]]     # a model instance (None: unnamed) and its events


def select(log: Log, run: int, side: str) -> Tuple[List[Instance], List[str]]:
    """The launches of run `run` of each model instance that has one (first process that has
    it), in the order they were first written; or the calls if there are no launches."""
    notes: List[str] = []
    if not log.launches:
        if not log.calls:
            raise DiffInputError(f"{log.path}: has no launch or call records to compare")
        return [(None, list(log.calls))], notes
    in_run = [l for l in log.launches if l.run == run]
    if not in_run:
        runs = sorted({l.run for l in log.launches if l.run is not None})
        raise DiffInputError(f"{log.path}: has no launches of run {run} "
                             f"(runs in this log: {', '.join(map(str, runs)) or 'none'})")
    pids = list(dict.fromkeys(l.pid for l in in_run))
    if len(pids) > 1:
        notes.append(f"{side}: run {run} appears in {len(pids)} processes "
                     f"(pids {', '.join(map(str, pids))}); using pid {pids[0]}")
    instances: Dict[Optional[str], List[Event]] = {}
    for launch in (l for l in in_run if l.pid == pids[0]):
        instances.setdefault(launch.model, []).append(launch)
    chosen = instances.get(None)
    if chosen:      # a log whose launch ids do not name their model: numbers restart at another model
        for n, launch in enumerate(chosen[1:], 1):
            if launch.index is not None and chosen[n - 1].index is not None \
                    and launch.index <= chosen[n - 1].index:
                notes.append(f"{side}: launch numbers of run {run} restart at {launch.title} "
                             "(another model in the same process); using the first sequence")
                del chosen[n:]
                break
    return list(instances.items()), notes


def pair_instances(a: List[Instance], b: List[Instance]) -> Tuple[List[Tuple[Instance, Instance]], List[str]]:
    """Which model instance of A is compared with which of B, and a note for each left out.
    One on each side: those two, whatever their names (torch.compile's `model` and the
    artifact's `ranker`).  Several: instance with instance of the same name (`ranker#2` with
    `ranker#2`), never one instance's launches with another's."""
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])], []
    names_b = {name: inst for name, inst in b}
    pairs = [((name, events), (name, names_b[name])) for name, events in a if name in names_b]
    if not pairs:
        raise DiffInputError(
            "the model instances differ and none has a namesake on the other side (A: "
            + ", ".join(_instance(n) for n, _ in a) + "; B: " + ", ".join(_instance(n) for n, _ in b)
            + "); diff compares instance with instance of the same name when a log holds several")
    paired = {name for (name, _), _ in pairs}
    notes = [f"{side}: model instance {_instance(name)} ({len(events)} launch(es)) has no instance of that "
             f"name in {other}: not compared"
             for side, other, insts in (("A", "B", a), ("B", "A", b))
             for name, events in insts if name not in paired]
    if len(pairs) > 1 or notes:
        notes.insert(0, "compared instance by instance: " + ", ".join(
            f"A {_instance(x)} with B {_instance(y)}" for (x, _), (y, _) in pairs))
    return pairs, notes


def _instance(name: Optional[str]) -> str:
    return printable(name) if name is not None else "(unnamed)"


# -- alignment ----------------------------------------------------------------

_KERNEL_PREFIX = re.compile(r"^(?:cpp|triton(?:_(?:poi|red|per|tem|for|spl))?)_")
_KERNEL_SUFFIX = re.compile(r"_\d+$")


def stem(name: str) -> str:
    return _KERNEL_SUFFIX.sub("", _KERNEL_PREFIX.sub("", name))


def _nodes(event: Event) -> Tuple[str, ...]:
    return tuple(event.origin.nodes) if event.origin else ()


def _source(event: Event) -> Optional[str]:
    return event.origin.source if event.origin else None


def key(event: Event) -> tuple:
    nodes = _nodes(event)
    return ("nodes", nodes) if nodes else ("name", event.name)


def similarity(a: Event, b: Event) -> int:
    na, nb = _nodes(a), _nodes(b)
    score = 0
    if na and na == nb:
        score += 4
    elif set(na) & set(nb):
        score += 1
    if a.name == b.name:
        score += 2
    elif stem(a.name) == stem(b.name):
        score += 1 if na or nb else 2      # without provenance the stem is all there is
    if _source(a) and _source(a) == _source(b):
        score += 1
    return score


Pair = Tuple[Optional[Event], Optional[Event]]


def weak_key(event: Event) -> str:
    return stem(event.name)


_WINDOW = 200      # how far ahead a resynchronisation point is looked for


def align(a: Sequence[Event], b: Sequence[Event]) -> List[Pair]:
    """Walk both runs in order; on a mismatch, resynchronise at the nearest launch the
    two sides share (provenance key, else kernel stem) and pair the gap by similarity.

    Linear in the length of the runs (times the window), since logs of one model
    differ only locally: a kernel fused differently, a launch on one side only.
    """
    pairs: List[Pair] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if key(a[i]) == key(b[j]) or weak_key(a[i]) == weak_key(b[j]):
            pairs.append((a[i], b[j]))
            i, j = i + 1, j + 1
            continue
        di, dj = _resync(a, b, i, j)
        pairs += _pair_by_similarity(a[i:i + di], b[j:j + dj])
        i, j = i + di, j + dj
    return pairs + [(e, None) for e in a[i:]] + [(None, e) for e in b[j:]]


def _resync(a: Sequence[Event], b: Sequence[Event], i: int, j: int) -> Tuple[int, int]:
    """Offsets (di, dj) > (0, 0) to the nearest pair with equal keys, or a window's worth."""
    for key_of in (key, weak_key):
        ahead: dict = {}
        for dj, event in enumerate(b[j:j + _WINDOW]):
            ahead.setdefault(key_of(event), dj)
        best = None
        for di, event in enumerate(a[i:i + _WINDOW]):
            if best is not None and di >= best[0] + best[1]:
                break
            dj = ahead.get(key_of(event))
            if dj is not None and (di, dj) != (0, 0) and (best is None or di + dj < sum(best)):
                best = (di, dj)
        if best is not None:
            return best
    return min(_WINDOW, len(a) - i), min(_WINDOW, len(b) - j)


def _pair_by_similarity(a: Sequence[Event], b: Sequence[Event]) -> List[Pair]:
    """Order-preserving pairing that maximises total similarity (scores below 2 never pair)."""
    n, m = len(a), len(b)
    if n == 0 or m == 0 or n * m > _MAX_PAIRING_CELLS:
        return [(e, None) for e in a] + [(None, e) for e in b]
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            s = similarity(a[i], b[j])
            best = max(score[i + 1][j], score[i][j + 1])
            if s >= 2:
                best = max(best, s + score[i + 1][j + 1])
            score[i][j] = best
    pairs: List[Pair] = []
    i = j = 0
    while i < n and j < m:
        s = similarity(a[i], b[j])
        if s >= 2 and score[i][j] == s + score[i + 1][j + 1]:
            pairs.append((a[i], b[j]))
            i, j = i + 1, j + 1
        elif score[i][j] == score[i + 1][j]:
            pairs.append((a[i], None))
            i += 1
        else:
            pairs.append((None, b[j]))
            j += 1
    return pairs + [(e, None) for e in a[i:]] + [(None, e) for e in b[j:]]


# -- against an eager reference (runtime/eager.py) ---------------------------------

@dataclasses.dataclass
class Held(Launch):
    """A launch seen through its outputs that hold one FX node's value (`holds:`)."""
    node: str = ""

    @property
    def outputs(self) -> List[Item]:
        holds = _holds(self) or {}
        return [i for i in super().outputs if holds.get(i.name.split("[", 1)[0]) == self.node]


def pair_with_reference(ref: Sequence[Event], other: Sequence[Event]) -> Tuple[List[Pair], int]:
    """The eager reference's records (one per FX node, in execution order) against a
    build's launches: each output a launch holds (`holds:`) with the record of that node,
    in the reference's order, so the first pair that differs is the first node whose value
    differs.  A launch holding no node of the reference stays unpaired, after the pairs of
    the launch before it.  Also: how many reference nodes no launch output holds (fused
    away inside a kernel, kept in a scratch buffer, or filtered out)."""
    order = {}
    for i, event in enumerate(ref):
        for node in (_holds(event) or {}).values():
            order.setdefault(node, (i, event))
    keyed: List[Tuple[tuple, Pair]] = []
    last = -1.0
    paired = set()
    for j, launch in enumerate(other):
        nodes = [n for n in dict.fromkeys((_holds(launch) or {}).values()) if n in order]
        if not nodes or not isinstance(launch, Launch):
            keyed.append(((last, 1, j), (None, launch)))
            continue
        for node in nodes:
            i, event = order[node]
            paired.add(node)
            keyed.append(((i, 0, j), (event, Held(launch.start, launch.end, launch.crash, node=node))))
            last = max(last, i)
    keyed.sort(key=lambda k: k[0])
    return [pair for _, pair in keyed], len(order) - len(paired)


# -- what went through a narrow format (records.NARROW) ---------------------------

# Two builds may quantise a value one step apart (x * (1/s) against x / s), and
# a step of a format under 16 bits is 6 to 25% of the value.  So a narrow value
# that differs between the sides is judged at its format's precision, and so is
# what a launch computes from narrow inputs that differ (or that only one side
# has), and what the launches after it compute from those results, until both
# sides hold a value alike again.  A matmul whose fp8 operands are the same on
# both sides is judged at the tolerances asked for: a wrong scale beside them is
# still found.

@dataclasses.dataclass(frozen=True)
class Precision:
    rtol: float                             # 2^-mantissa of `dtype`
    dtype: str                              # the narrowest format on the value's path


def _narrowest(*found: Optional[Precision]) -> Optional[Precision]:
    return max((p for p in found if p is not None), key=lambda p: p.rtol, default=None)


def _own(tensor: object) -> Optional[Precision]:
    if not isinstance(tensor, Tensor):
        return None
    short = tensor.dtype.replace("torch.", "")
    return Precision(NARROW[short], short) if short in NARROW else None


def _item(label: str) -> str:
    """The item a (flattened) label names: `out buf5[0]` -> `buf5`."""
    return label.split(" ", 1)[-1].split("[", 1)[0]


def has_narrow(events: Sequence[Event]) -> bool:
    return any(r.narrow for e in events if isinstance(e, Launch) for r in (e.start, e.end) if r is not None)


@dataclasses.dataclass
class Paths:
    """Each side's names holding a value computed from narrow values that differed."""
    sides: Tuple[Dict[str, Precision], Dict[str, Precision]] = \
        dataclasses.field(default_factory=lambda: ({}, {}))

    def reads(self, a: Event, b: Event) -> Optional[Precision]:
        """What the pair computes from: narrow inputs that differ between the sides or that
        one side lacks, and values on a path."""
        if isinstance(a, ModelOutputs):     # the model's outputs: the values the run ended with
            return _narrowest(*[self.sides[0].get(i.name) for i in a.outputs],
                              *[self.sides[1].get(i.name) for i in b.outputs])
        found = [self.sides[0].get(i.name) for i in a.inputs] + [self.sides[1].get(i.name) for i in b.inputs]
        ins_a, ins_b = _outputs(a.inputs), _outputs(b.inputs)
        paired, _ = pair_outputs(ins_a, ins_b)
        kept = {id(v) for _, va, vb in paired for v in (va, vb)}
        found += [_own(va) for _, va, vb in paired
                  if isinstance(va, Tensor) and isinstance(vb, Tensor) and not same_bytes(va, vb)]
        found += [_own(v) for _, v in ins_a + ins_b if id(v) not in kept]
        return _narrowest(*found)

    def wrote(self, a: Event, b: Event, came: Optional[Precision], paired) -> None:
        """After the pair: its outputs continue a path unless both sides hold them alike."""
        for _, la, lb, va, vb in paired:
            alike = isinstance(va, Tensor) and isinstance(vb, Tensor) and same_bytes(va, vb)
            for side, label, value in ((0, la, va), (1, lb, vb)):
                on = None if alike else _narrowest(came, _own(value))
                if on is None:
                    self.sides[side].pop(_item(label), None)
                else:
                    self.sides[side][_item(label)] = on


def tolerances(atol: float, rtol: float, precision: Optional[Precision], b: Tensor) -> Tuple[float, float]:
    """(atol, rtol) for a pair whose values went through `precision`'s format: rtol at
    least its precision, atol at least that times B's largest |value| (judged at the
    output's own scale, as check does)."""
    if precision is None or precision.rtol <= rtol:
        return atol, rtol
    scale = b.stats.get("abs_max", max((abs(b.stats[k]) for k in ("min", "max") if k in b.stats), default=0.0))
    return max(atol, precision.rtol * scale if math.isfinite(scale) else 0.0), precision.rtol


# -- comparison ---------------------------------------------------------------

@dataclasses.dataclass
class Delta:
    label: str                              # the output, e.g. `out buf1`
    field: str                              # `mean`, `nan_count`, `shape`, `outputs`, ...
    a: str
    b: str
    size: float                             # absolute difference (inf for a mismatch of kind)
    allowed: float                          # what the tolerance allows (0 for exact fields)
    values: Optional[closeness.Closeness] = None    # dumped tensors compared element by element

    @property
    def violates(self) -> bool:
        if self.values is not None:
            return not self.values.ok
        return self.size > self.allowed

    @property
    def badness(self) -> float:
        if self.allowed == 0:
            return math.inf if self.size > 0 else 0.0
        return self.size / self.allowed

    def text(self) -> str:
        if (self.field in VALUE_KEYS or self.values is not None) and math.isfinite(self.size):
            return f"{self.label} {self.field} {self.a} vs {self.b} (delta {self.size:.3g})"
        return f"{self.label} {self.field} {self.a} vs {self.b}"


@dataclasses.dataclass
class Row:
    a: Optional[Event]
    b: Optional[Event]
    status: str
    deltas: List[Delta] = dataclasses.field(default_factory=list)
    reason: str = ""
    extra: str = ""                         # outputs present on one side only (not compared)
    unreadable: List[str] = dataclasses.field(default_factory=list)  # dumped files that cannot be read
    bits_differ: Optional[str] = None       # the first output whose content hashes differ
    unhashed: int = 0                       # tensor pairs without a content hash on both sides
    dumped: bool = False                    # its outputs were read from dumps on both sides
    precision: Optional[Precision] = None   # values went through a narrow format: judged at its precision

    @property
    def worst(self) -> Optional[Delta]:
        """The delta furthest outside its tolerance, else the largest value delta."""
        bad = [d for d in self.deltas if d.violates]
        if bad:
            return max(bad, key=lambda d: d.badness)
        sized = [d for d in self.deltas if (d.field in VALUE_KEYS + ("value",) or d.values is not None)
                 and math.isfinite(d.size)]
        return max(sized, key=lambda d: d.size) if sized else None

    @property
    def event(self) -> Event:
        return self.a or self.b  # type: ignore[return-value]

    def _values(self) -> List[closeness.Closeness]:
        return [d.values for d in self.deltas if d.values is not None]

    @property
    def max_abs(self) -> Optional[float]:
        """Over the outputs compared element by element; None when none was (0 for dumped
        outputs that are identical bit for bit)."""
        values = self._values()
        if not values:
            return 0.0 if self.dumped and self.status == IDENTICAL else None
        return max(v.max_abs for v in values)

    @property
    def max_rel(self) -> Optional[float]:
        values = self._values()
        if not values:
            return 0.0 if self.dumped and self.status == IDENTICAL else None
        return max(v.max_rel for v in values)

    def kernel(self) -> str:
        if self.a and self.b and self.a.name != self.b.name:
            return f"{self.a.name} / {self.b.name}"
        return self.event.name

    def largest(self) -> str:
        if self.status == IDENTICAL:
            return "0 (bit for bit)"
        text = self.reason or self._largest_delta()
        return f"{text} ({self.extra})" if self.extra else text

    def _largest_delta(self) -> str:
        worst = self.worst
        if worst is None:
            return "-"
        if worst.violates:
            return worst.text()
        if worst.size == 0:     # equal statistics; the content hashes may still tell them apart
            return "0 (bits differ)" if self.bits_differ else "0"
        return f"{worst.label} {worst.field} delta {worst.size:.3g}"


def _outputs(items: List[Item]) -> List[Tuple[str, object]]:
    flat: List[Tuple[str, object]] = []
    for item in items:
        flat += list(item.tensors())
        flat += list(item.inline_values())
    return flat


def _holds(event: Event) -> Optional[dict]:
    return event.origin.holds if event.origin else None


def _paired(a: Event, b: Event):
    """(the outputs compare pairs, as (label, A's label, B's label, value A, value B); what
    is left unpaired; a Row saying why nothing can be compared, or None)."""
    # a damaged record may have lost outputs, and the pairing of the others with them
    damaged = [r.damage for r in (a.end, b.end) if r is not None and r.damage]
    if damaged:
        return [], "", Row(a, b, UNKNOWN, reason=f"unknown: {damaged[0]}", unreadable=damaged)
    out_a, out_b = _outputs(a.outputs), _outputs(b.outputs)
    if not out_a or not out_b:
        missing = " and ".join(s for s, o in (("A", out_a), ("B", out_b)) if not o)
        return [], "", Row(a, b, UNKNOWN, reason=f"no outputs recorded in {missing}")
    holds_a, holds_b = _holds(a), _holds(b)
    # held values are comparable only where the two graphs name nodes alike (torch.compile
    # and export may number them differently): at least one value must be held on both sides
    if not holds_a or not holds_b or not set(holds_a.values()) & set(holds_b.values()):
        paired, extra = pair_outputs(out_a, out_b)
    else:
        paired, extra = pair_by_value(out_a, out_b, holds_a, holds_b)
    label_a, label_b = {id(v): la for la, v in out_a}, {id(v): lb for lb, v in out_b}
    return [(label, label_a[id(va)], label_b[id(vb)], va, vb) for label, va, vb in paired], extra, None


def compare(a: Event, b: Event, atol: float, rtol: float, exact: bool = False,
            paths: Optional[Paths] = None) -> Row:
    """`paths`: the values computed from narrow values that differ, followed through the
    pairs compared before this one (None: the run holds no narrow value)."""
    paired, extra, cannot = _paired(a, b)
    if cannot is not None:
        return cannot
    came = paths.reads(a, b) if paths is not None else None
    if paths is not None:
        paths.wrote(a, b, came, paired)
    if not paired:
        return Row(a, b, UNKNOWN, reason="no common outputs", extra=extra)
    deltas: List[Delta] = []
    unknown = False
    unreadable: List[str] = []
    hashed = same = 0           # tensor pairs with a content hash on both sides; of the same bytes
    bits_differ = None
    judged: Optional[Precision] = None      # the narrow format that widened a tolerance
    for label, la, lb, va, vb in paired:
        if isinstance(va, Tensor) and isinstance(vb, Tensor) and va.hash and vb.hash:
            hashed += 1
            same += same_bytes(va, vb)
            if va.hash != vb.hash and bits_differ is None:
                bits_differ = label
                if exact and va.fields.get("shape") == vb.fields.get("shape") \
                        and va.dtype == vb.dtype:
                    deltas.append(Delta(label, "hash", va.hash, vb.hash, math.inf, 0))
        if isinstance(va, Tensor) and isinstance(vb, Tensor):
            narrow = _narrowest(came, _own(va), _own(vb))
            if narrow is not None and narrow.rtol > rtol and not same_bytes(va, vb):
                judged = _narrowest(judged, narrow)
            try:
                found = compare_tensors(label, va, vb, *tolerances(atol, rtol, narrow, vb))
            except InputError as exc:       # a dumped file that cannot be read: unknown, not a difference
                found, unreadable = None, unreadable + [str(exc)]
            if found is None:
                unknown = True
            else:
                deltas += found
        elif isinstance(va, str) and isinstance(vb, str):
            deltas.append(_compare_value(label, "value", va, vb, atol, rtol))
        else:
            deltas.append(Delta(label, "kind", _kind(va), _kind(vb), math.inf, 0))
    if any(d.violates for d in deltas):
        return Row(a, b, DIFFERS, deltas, extra=extra, unreadable=unreadable, bits_differ=bits_differ,
                   precision=judged)
    if unreadable:
        return Row(a, b, UNKNOWN, deltas, reason=f"unknown: {unreadable[0]}", extra=extra,
                   unreadable=unreadable, bits_differ=bits_differ, precision=judged)
    if unknown:
        return Row(a, b, UNKNOWN, deltas, reason="outputs without statistics", extra=extra,
                   bits_differ=bits_differ, precision=judged)
    tensors = [(va, vb) for *_, va, vb in paired if isinstance(va, Tensor) and isinstance(vb, Tensor)]
    identical = same == len(tensors) > 0 and not extra \
        and all(d.a == d.b for d in deltas if d.field == "value")
    return Row(a, b, IDENTICAL if identical else OK, deltas, extra=extra, bits_differ=bits_differ,
               unhashed=len(tensors) - hashed,
               dumped=any(va.dump is not None and vb.dump is not None for va, vb in tensors),
               precision=judged)


def pair_outputs(out_a, out_b):
    """Pairs (label, value A, value B) in argument order, which both wrappers keep.

    Buffer names are not compared: one extra buffer shifts every later number.
    When one side has more outputs (e.g. AOTI fuses a copy of a constant into the
    kernel, torch.compile does not), the lists are aligned on role, shape and dtype
    and the outputs left over are named in the second result and not compared.
    """
    if len(out_a) == len(out_b):
        return [(_pair_label(la, lb), va, vb) for (la, va), (lb, vb) in zip(out_a, out_b)], ""
    matcher = difflib.SequenceMatcher(None, [_shape_key(o) for o in out_a],
                                      [_shape_key(o) for o in out_b], autojunk=False)
    paired, extra = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            paired += [(_pair_label(la, lb), va, vb)
                       for (la, va), (lb, vb) in zip(out_a[i1:i2], out_b[j1:j2])]
        else:
            extra += [f"{l} only in A" for l, _ in out_a[i1:i2]]
            extra += [f"{l} only in B" for l, _ in out_b[j1:j2]]
    return paired, ", ".join(extra)


def _identity(label: str, holds: dict) -> tuple:
    name = label.split(" ", 1)[-1]
    value = holds.get(name)
    return ("value", value) if value else ("name", name)


def pair_by_value(out_a, out_b, holds_a: dict, holds_b: dict):
    """Pairs (label, value A, value B) of outputs holding the same FX node's value
    (or, where neither log says, of the same name), in A's order; the rest are
    named in the second result as not comparable."""
    in_b = {}
    for j, (label, value) in enumerate(out_b):
        in_b.setdefault(_identity(label, holds_b), j)
    paired, extra, used = [], [], set()       # used: B's outputs paired, by position
    for la, va in out_a:
        j = in_b.get(_identity(la, holds_a))
        if j is not None and j not in used:
            lb, vb = out_b[j]
            paired.append((_pair_label(la, lb), va, vb))
            used.add(j)
        else:
            extra.append(f"{la} of A")
    # B's second output holding one value is named too, as A's is
    extra += [f"{lb} of B" for j, (lb, _) in enumerate(out_b) if j not in used]
    return paired, ("not comparable: " + ", ".join(extra)) if extra else ""


def _shape_key(output) -> tuple:
    label, value = output
    role = label.split(" ", 1)[0]
    if isinstance(value, Tensor):
        return (role, value.shape, value.dtype)
    return (role, "scalar")


def _pair_label(la: str, lb: str) -> str:
    """`out buf5`, or `out buf5/buf6` when B calls the same output by another name."""
    if la == lb:
        return la
    return f"{la}/{lb.split(' ', 1)[-1]}"


def _kind(value: object) -> str:
    return "Tensor" if isinstance(value, Tensor) else "scalar"


def compare_tensors(label: str, a: Tensor, b: Tensor, atol: float,
                    rtol: float) -> Optional[List[Delta]]:
    """Deltas of every statistic; None when either side has no statistics (nor a shape:
    not dumped).  InputError when a dumped file of either side cannot be read."""
    for t in (a, b):
        if t.unreadable:
            raise InputError(t.unreadable)
    if any(f not in t.fields for t in (a, b) for f in ("shape", "dtype")):
        return None
    for field in ("shape", "dtype"):
        if a.fields.get(field) != b.fields.get(field):
            return [Delta(label, field, a.fields.get(field, "?"), b.fields.get(field, "?"),
                          math.inf, 0)]
    if same_bytes(a, b):                    # nothing else can differ
        return []
    if a.dump is not None and b.dump is not None:
        return [compare_values(label, a, b, atol, rtol)]
    if not a.has_stats or not b.has_stats:
        return None
    deltas = []
    for field in COUNT_KEYS:
        if field in a.fields or field in b.fields:
            ca, cb = a.stats.get(field), b.stats.get(field)
            size = abs(ca - cb) if ca is not None and cb is not None else math.inf
            deltas.append(Delta(label, field, a.fields.get(field, "-"), b.fields.get(field, "-"),
                                size, 0))
    for field in VALUE_KEYS:
        if field in a.fields or field in b.fields:
            deltas.append(_compare_value(label, field, a.fields.get(field, "-"),
                                         b.fields.get(field, "-"), atol, rtol))
    return deltas


def compare_values(label: str, a: Tensor, b: Tensor, atol: float, rtol: float) -> Delta:
    """The dumped values of A against B's, element by element (B's magnitude scales rtol,
    as for the statistics); the delta names the element furthest outside the tolerance."""
    from .dumps import load_ref
    c = closeness.tensors(load_ref(b.dump), load_ref(a.dump), atol, rtol)
    if c.worst is None:                     # empty tensors
        return Delta(label, "values", "-", "-", 0.0, 0.0, values=c)
    index, vb, va, allowed = c.worst
    if va == vb or (math.isnan(va) and math.isnan(vb)):
        size = 0.0
    elif math.isfinite(va) and math.isfinite(vb):
        size = abs(va - vb)
    else:
        size, allowed = math.inf, 0.0
    where = "[" + ", ".join(map(str, index)) + "]"
    return Delta(label, where, number(va), number(vb), size, allowed, values=c)


def same_bytes(a: Tensor, b: Tensor) -> bool:
    """Equal content hashes, and statistics written alike: the same bytes.  Equal hashes
    beside different statistics mean an edited or damaged log; the statistics decide."""
    return bool(a.hash) and a.hash == b.hash and all(
        a.fields.get(k) == b.fields.get(k) for k in STAT_KEYS + ("shape", "dtype"))


def _compare_value(label: str, field: str, ta: str, tb: str, atol: float, rtol: float) -> Delta:
    va, vb = parse_number(ta), parse_number(tb)
    if va is None or vb is None:
        return Delta(label, field, ta, tb, 0 if ta == tb else math.inf, 0)
    if (math.isnan(va) and math.isnan(vb)) or va == vb:   # also equal infinities
        return Delta(label, field, ta, tb, 0.0, atol + rtol * abs(vb) if math.isfinite(vb) else 0)
    if not (math.isfinite(va) and math.isfinite(vb)):
        return Delta(label, field, ta, tb, math.inf, 0)
    return Delta(label, field, ta, tb, abs(va - vb), atol + rtol * abs(vb))


# -- the whole diff -------------------------------------------------------------

@dataclasses.dataclass
class Result:
    rows: List[Row]
    notes: List[str]
    atol: float
    rtol: float
    exact: bool = False

    @property
    def first_divergence(self) -> Optional[Row]:
        return next((r for r in self.rows if r.status == DIFFERS), None)

    @property
    def first_bitwise(self) -> Optional[Row]:
        """The first aligned pair whose outputs' content hashes differ."""
        return next((r for r in self.rows if r.bits_differ is not None), None)

    def _launch_rows(self) -> List[Row]:
        return [r for r in self.rows if r.status in (OK, DIFFERS, IDENTICAL)
                and not isinstance(r.a, ModelOutputs)]

    @property
    def compared(self) -> int:
        return len(self._launch_rows())

    @property
    def identical(self) -> bool:
        """Every row compared, every one identical bit for bit."""
        return bool(self.rows) and all(r.status == IDENTICAL for r in self.rows)

    @property
    def unreadable(self) -> List[str]:
        """The dumped files that kept aligned outputs from being compared, once each."""
        return list(dict.fromkeys(why for r in self.rows for why in r.unreadable))

    @property
    def by_value(self) -> bool:
        """Whether outputs were compared element by element (both sides read from dumps)."""
        return any(r.max_abs is not None for r in self.rows)


def diff(log_a: Log, log_b: Log, run: int = 1, atol: float = 1e-5, rtol: float = 1e-3,
         exact: bool = False) -> Result:
    for log in (log_a, log_b):
        if log.level_hint() < 5:
            raise DiffInputError(f"{log.path}: has no tensor statistics (it looks like a "
                                 f"level-{log.level_hint()} log); diff needs logs written at "
                                 "level 5 (AOTI_DEBUG_LOGLEVEL=5)")
    instances_a, notes_a = select(log_a, run, "A")
    instances_b, notes_b = select(log_b, run, "B")
    notes_a += [f"A: {what}" for what in log_a.left_out]     # lost records: completeness.py
    notes_b += [f"B: {what}" for what in log_b.left_out]
    pairs, notes_pairs = pair_instances(instances_a, instances_b)
    rows: List[Row] = []
    for (_, events_a), (_, events_b) in pairs:
        eager = [is_reference(log, events) for log, events in ((log_a, events_a), (log_b, events_b))]
        if eager[0] != eager[1]:        # a build against the eager reference: by held value
            ref, other = (events_a, events_b) if eager[0] else (events_b, events_a)
            matched, unheld = pair_with_reference(ref, other)
            aligned = matched if eager[0] else [(b, a) for a, b in matched]
            side = "A" if eager[0] else "B"
            notes_b = notes_b + [f"{side} is an eager reference: each output is compared with the eager "
                                 "value of the FX node it holds, in execution order; "
                                 f"{unheld} of its {len(ref)} node(s) have no output of the other side "
                                 "holding their value (fused away inside a kernel, kept in a scratch "
                                 "buffer, or filtered out): not compared"]
        else:
            aligned = align(events_a, events_b)
        paths = Paths() if has_narrow(events_a) or has_narrow(events_b) else None
        for a, b in aligned:
            if a is None:
                rows.append(Row(None, b, ONLY_B))
            elif b is None:
                rows.append(Row(a, None, ONLY_A))
            else:
                rows.append(compare(a, b, atol, rtol, exact, paths))
        ends = [model_outputs(log, events) for log, events in ((log_a, events_a), (log_b, events_b))]
        if all(ends):
            rows.append(compare(ends[0], ends[1], atol, rtol, exact, paths))
        elif any(ends):
            (has, lacks), other = (("A", "B"), (log_b, events_b)) if ends[0] else (("B", "A"), (log_a, events_a))
            why = ("its run-end record holds none: a dump does not keep them" if _run_end(*other)
                   else "it has no run-end record for the run: the run was cut short")
            notes_b = notes_b + [f"the model's outputs are only in {has} ({lacks}: {why}): not compared"]
    return Result(rows, notes_pairs + notes_a + notes_b, atol, rtol, exact)


# -- replicas of one job (--ranks) -------------------------------------------------

@dataclasses.dataclass
class Replica:
    """One process of a job against the reference process, run by run."""
    process: Process
    runs: List[Tuple[int, Result]]          # every run both processes have, in order
    unmatched: List[int]                    # runs only one of the two has

    @property
    def divergence(self) -> Optional[Tuple[int, Row]]:
        """(run, row) of this process's first differing launch."""
        return next(((run, result.first_divergence) for run, result in self.runs
                     if result.first_divergence is not None), None)


@dataclasses.dataclass
class Replicas:
    reference: Process
    others: List[Replica]

    @property
    def first(self) -> Optional[Replica]:
        """The process that differs first: by run, then by when its differing launch was written."""
        differing = [r for r in self.others if r.divergence is not None]
        return min(differing, key=lambda r: (r.divergence[0], _written(r.divergence[1].b)), default=None)

    @property
    def unreadable(self) -> List[str]:
        return list(dict.fromkeys(why for r in self.others for _, res in r.runs for why in res.unreadable))


def _written(event: Optional[Event]) -> str:
    return event.first.timestamp if event is not None else ""


def _runs(log: Log) -> List[int]:
    return sorted({l.run for l in log.launches if l.run is not None})


def diff_replicas(log: Log, atol: float = 1e-5, rtol: float = 1e-3,
                  run: Optional[int] = None, exact: bool = False) -> Replicas:
    """Compare every process of a job with the one of the lowest rank (else the first), run
    by run (or only `run`): replicas that should agree (data parallel)."""
    processes = sorted(log.processes(), key=lambda p: p.order)
    if len(processes) < 2:
        raise DiffInputError(f"{log.path}: --ranks compares the processes of one job, and this holds "
                             f"{'one' if processes else 'no'} process{'' if processes else 'es'}"
                             + (f" ({processes[0].label})" if processes else "")
                             + " (expected the logs of two or more ranks)")
    reference, others = processes[0], processes[1:]
    ref = log.of_process(reference.pid)
    out = []
    for p in others:
        sub = log.of_process(p.pid)
        mine, theirs = set(_runs(ref)), set(_runs(sub))
        both = sorted(mine & theirs) if run is None else [run]
        out.append(Replica(p, [(r, diff(ref, sub, run=r, atol=atol, rtol=rtol, exact=exact)) for r in both],
                           sorted(mine ^ theirs) if run is None else []))
    return Replicas(reference, out)


def replicas_text(rep: Replicas) -> List[str]:
    """A line per process, then the first divergence in full."""
    lines = [f"reference: {rep.reference.label}"]
    for r in rep.others:
        compared = sum(res.compared for _, res in r.runs)
        only = f"; run(s) {', '.join(map(str, r.unmatched))} only on one side (not compared)" if r.unmatched else ""
        gaps = replica_gaps(rep.reference, r)
        if r.divergence is None:
            verdict = "agrees where compared" if gaps else "agrees"
            lines.append(f"{r.process.label}: {verdict}: {len(r.runs)} run(s), {compared} aligned launch(es) "
                         f"compared{only}" + "".join(f"; {gap}" for gap in gaps))
        else:
            at, row = r.divergence
            lines.append(f"{r.process.label}: differs from run {at}: {_title(row)}{only}"
                         + "".join(f"; {gap}" for gap in gaps))
        lines += [f"  run {run} (A: the reference, B: this rank): {note}" for run, res in r.runs
                  for note in res.notes]
    first = rep.first
    if first is None:
        return lines
    at, row = first.divergence
    result = dict(first.runs)[at]
    lines.append(f"first divergence: {first.process.label}, run {at}, {_title(row)} "
                 f"(A: {rep.reference.label}, B: {first.process.label})")
    return lines + divergence_detail(result, row)


def replica_gaps(reference: Process, r: Replica) -> List[str]:
    """What one rank's runs left uncompared, as `summary` says it for two logs."""
    return uncompared([row for _, res in r.runs for row in res.rows], reference.label, "this rank")


def uncompared(rows: List[Row], a: str = "A", b: str = "B") -> List[str]:
    """What `rows` left uncompared: launches only one side has, aligned ones without
    statistics or outputs, and a crash on either side (`a`, `b`: how the sides are named)."""
    only_a = sum(1 for row in rows if row.status == ONLY_A)
    only_b = sum(1 for row in rows if row.status == ONLY_B)
    unknown = sum(1 for row in rows if row.status == UNKNOWN)
    gaps = []
    if only_a or only_b:
        gaps.append(f"{only_a} launch(es) only in {a}, {only_b} only in {b} (not compared)")
    if unknown:
        gaps.append(f"{unknown} aligned launch(es) could not be compared (no statistics or outputs)")
    for row in rows:
        for side, event in ((a, row.a), (b, row.b)):
            if event is not None and event.crash is not None:
                why = "; ".join(event.crash.notes) or "no signal recorded"
                gaps.append(f"{side} crashed in {event.title} ({why})")
    return gaps


def _title(row: Row) -> str:
    event = row.b or row.a
    return f"launch {event.title}" if isinstance(event, Launch) and not isinstance(event, ModelOutputs) \
        else "the model's outputs"


@dataclasses.dataclass
class ModelOutputs(Launch):
    """The `run-end` record of a run: the model's outputs, compared in order."""

    @property
    def ident(self) -> str:
        return "end"


def _run_end(log: Log, events: Sequence[Event], kind: str = "run-end") -> Optional[Record]:
    """The run-end record (or the `kind` record) of the run `events` belong to, outputs or not."""
    launches = [e for e in events if isinstance(e, Launch)]
    if not launches or launches[0].run is None:
        return None
    run, pid, model = launches[0].run, launches[0].pid, launches[0].model
    return next((r for r in log.records if r.kind == kind and r.id == str(run) and r.pid == pid
                 and model in (None, r.name)), None)


def is_reference(log: Log, events: Sequence[Event]) -> bool:
    """Whether `events` are the launches of an eager reference's run (`reference=eager`)."""
    run = _run_end(log, events, kind="run")
    return run is not None and run.reference == "eager"


def model_outputs(log: Log, events: Sequence[Event]) -> Optional[ModelOutputs]:
    end = _run_end(log, events)
    return ModelOutputs(None, end) if end is not None and end.items else None


def _index(event: Optional[Event]) -> str:
    if event is None:
        return "-"
    return event.ident


def _measure(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.6g}"


def table(result: Result) -> List[str]:
    """One line per aligned pair; `max abs` / `max rel` columns when values were compared."""
    values = result.by_value
    head = ("A", "B", "kernel", "status") + (("max abs", "max rel") if values else ()) + ("largest delta",)
    body = [tuple(map(printable, (_index(r.a), _index(r.b), r.kernel(), r.status)
                      + ((_measure(r.max_abs), _measure(r.max_rel)) if values else ()) + (r.largest(),)))
            for r in result.rows]       # escaped before the columns are measured
    widths = [max(len(row[c]) for row in [head, *body]) for c in range(len(head) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1]
            for row in [head, *body]]


def narrow_note(rows: List[Row]) -> List[str]:
    """Which pairs were judged at a narrow format's precision, by format."""
    by: Dict[Precision, int] = {}
    for r in rows:
        if r.precision is not None:
            by[r.precision] = by.get(r.precision, 0) + 1
    return [f"{n} aligned pair(s) hold values computed through {p.dtype}: judged at its precision "
            f"(rtol at least {p.rtol:g}, atol at least {p.rtol:g} times the output's largest |value|)"
            for p, n in sorted(by.items(), key=lambda kv: (-kv[0].rtol, kv[0].dtype))]


def summary(result: Result) -> List[str]:
    lines = list(result.notes) + uncompared(result.rows) + narrow_note(result.rows)
    lines += bitwise_summary(result)
    unhashed = sum(r.unhashed for r in result.rows)
    if result.exact and unhashed:
        lines.append(f"--exact: {unhashed} output pair(s) without a content hash on both sides "
                     "(a log older than hashes, or statistics skipped) were compared on statistics")
    row = result.first_divergence
    if row is None and result.unreadable:
        lines.append(f"cannot tell whether A and B agree: {len(result.unreadable)} file(s) or record(s) "
                     f"cannot be read (first: {result.unreadable[0]})")
        return lines
    if row is None and result.identical:
        end = " and the model's outputs" if any(isinstance(r.a, ModelOutputs) for r in result.rows) else ""
        lines.append(f"A and B are identical bit for bit: the outputs of {result.compared} aligned "
                     f"launch(es){end} have equal content hashes")
        return lines
    if row is None:
        verdict = ("no aligned launch diverges" if any(r.status == UNKNOWN for r in result.rows)
                   else "the dumps agree" if result.by_value else "the logs agree")
        how = "element by element" if result.by_value else "counts exact"
        lines.append(f"{verdict}: {result.compared} aligned launch(es) compared "
                     f"(atol={result.atol:g}, rtol={result.rtol:g}; {how})")
        return lines
    assert row.a is not None and row.b is not None
    held = next((e.node for e in (row.a, row.b) if isinstance(e, Held)), None)   # against eager
    node = f"node {held}: " if held else ""
    lines.append(f"first divergence: {node}A {row.a.title} / B {row.b.title}")
    return lines + divergence_detail(result, row)


def bitwise_summary(result: Result) -> List[str]:
    """Where the outputs first differ bit for bit (content hashes), when they do: for two runs
    of one artifact, the first non-deterministic launch.  Nothing when no hash differs."""
    row = result.first_bitwise
    if row is None or result.exact:         # with exact it is the first divergence
        return []
    before = result.rows[:result.rows.index(row)]
    same = sum(1 for r in before if r.status == IDENTICAL)
    where = "the model's outputs" if isinstance(row.a, ModelOutputs) else \
        f"A {row.a.title} / B {row.b.title}"            # type: ignore[union-attr]
    return [f"first bitwise difference: {where} ({row.bits_differ}); "
            f"{same} of the {len(before)} aligned pair(s) before it identical"]


def divergence_detail(result: Result, row: Row) -> List[str]:
    """What the first diverging pair `row` shows: its line, nodes, the deltas beyond the
    tolerance, both sides' outputs, and how many later pairs differ too."""
    a, b = row.a, row.b
    lines: List[str] = []
    origin = a.origin or b.origin
    # a kernel fusing independent computations: the line of the outputs that diverge;
    # its module says which layer (layers share their lines)
    diverging = [d.label for d in row.deltas if d.violates]
    lines.append(f"  source: {origin.where_of(diverging) if origin else '-'}")
    lines.append(f"  nodes:  {', '.join(origin.nodes) if origin and origin.nodes else '-'}")
    for d in row.deltas:
        if d.violates:
            allowed = f", allowed {d.allowed:.3g}" if d.allowed and math.isfinite(d.size) else ""
            v = d.values
            measured = (f"; {v.outside} of {v.numel} element(s) outside the tolerance, "
                        f"max abs {v.max_abs:.6g}, max rel {v.max_rel:.6g}") if v is not None else ""
            lines.append(f"  {d.text()}{allowed}{measured}")
    for side, event in (("A", a), ("B", b)):
        for label, tensor in (t for item in event.outputs for t in item.tensors()):
            lines.append(f"  {side} {label}: {tensor.summary()}")
    later = sum(1 for r in result.rows if r.status == DIFFERS) - 1
    if later:
        lines.append(f"{later} later aligned launch(es) differ too")
    return lines
