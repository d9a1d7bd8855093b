"""Reading aoti-debug logs back into structured records (docs/log-format.md).

`parse(text)` turns log text into a `Log`: banners, records, and the records
grouped into `Launch`es (launch + launch-end + crash trailer) and `Call`s
(call + return/raise).  What it does not understand is kept and said: lines
outside records in `Log.unknown_lines` (counted in `Log.left_out`), body lines
in `Record.unparsed`, the first of which makes the record `damage`d (what it
said is unknown; `Log.unreadable()` names it).  A record cut short by a crash
is marked `truncated`.  It raises `InputError` (one line, naming the line) only
for a line that claims to be a record header but is not one: a damaged header
would regroup every record after it.  Numbers are read only as the format
writes them, in ASCII, integers of at most 20 digits.  Files are read through
untrusted.py (regular files only, bounded lines).  Pure text processing: no torch.
load.read picks between a log file, a folder of logs and level-10 dumps.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import functools
import heapq
import itertools
import os
import re
import sys
import types
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ..runtime import format as fmt
from . import untrusted
from .untrusted import InputError, shorten, where

RULE = "=" * 80
_HEADER = re.compile(
    r"^\[(?P<ts>[^\]]*)\] \[pid (?P<pid>[^\]]*)\] (?P<kind>\S+) (?P<id>\S+)(?: (?P<name>.*))?$")
_CLAIMS_HEADER = re.compile(r"^\[[^\]]*\] \[pid ")      # what only a record header starts with
_LOST_NOTE = re.compile(r"^\[[^\]]*\] \[pid [^\]]*\] note - log$")   # records a failed write lost
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}|TIMESTAMP", re.A)
_DECIMAL = re.compile(r"[0-9]{1,20}", re.A)                  # every uint64 fits
_LONG_NUMBER = re.compile(r"[0-9]{21,}", re.A)
MAX_DEPTH = 64                      # nesting of container blocks read; deeper lines are left out
_LABELLED = re.compile(
    r"^(?P<label>(?:in|out|inout|kwarg|default|arg\[\d+\]) [^:]+|output|\[[^\]]*\]):(?: (?P<value>.*))?$")
_CONTAINER = re.compile(r"^(?P<kind>list|tuple|dict)\(len=(?P<len>[0-9]{1,20})\)$", re.A)
_ORIGIN = re.compile(r"^origin: nodes=(?P<nodes>\S+) source=(?P<source>.+)$")
# a module path: nn.Module attribute names and indexes joined by dots
_MODULE = re.compile(r"^[^\s,]+$")
_SOURCE_LINE = re.compile(r"^source-line: (?P<source>.+) nodes=(?P<nodes>\S+)$")
# what a run or call header says after its name (section 1): the thread, and the rank where known
_HEADER_FACTS = re.compile(r"^(?P<name>.*) thread=(?P<thread>[0-9]{1,20}|TID)"
                           r"(?: rank=(?P<rank>[0-9]{1,20})(?:/(?P<world>[0-9]{1,20}))?)?"
                           r"(?: reference=(?P<reference>eager))?$", re.A)
_BANNER_RANK = re.compile(r"^(?P<rank>[0-9]{1,20})(?: of (?P<world>[0-9]{1,20}))?$", re.A)

FLOATING = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
            "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"}
INTEGER = {"uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"}
COMPLEX = {"complex64", "complex128"}
STAT_KEYS = ("min", "max", "mean", "abs_min", "abs_max", "abs_mean",
             "nan_count", "inf_count", "sat_count", "true_count", "false_count")
TENSOR_KEYS = ("shape", "stride", "dtype", "device", "requires_grad", "is_contiguous") + STAT_KEYS \
    + ("hash",)
_HASH = re.compile(r"^[0-9a-f]{16}$")
COUNT_KEYS = ("nan_count", "inf_count", "sat_count", "true_count", "false_count")
# after the statistics of a tensor its kernel reads as a scale: which of its op's scales
# (a schema argument name), its zeros and subnormals (whole numbers, as the counts are)
SCALE_ARGUMENTS = ("scale_a", "scale_b", "scale_result")
SCALE_COUNTS = ("zero_count", "subnormal_count")
# after the statistics of an operand of a scaled matmul (docs/log-format.md 3.3): the
# scale that multiplies it and how (scaled_by=scale_a (rowwise)), then the statistics
# of its dequantized values (numbers, counts) or dequant=skipped (why)
DEQUANT_NUMBERS = ("dequant_min", "dequant_max", "dequant_mean")
DEQUANT_COUNTS = ("dequant_nan_count", "dequant_inf_count")
# mantissa bits of each floating format: the spacing of its values (check's ULPs, diff's
# tolerance for what went through a narrow format); float8_e8m0fnu is exponent only;
# float4_e2m1fn_x2's values (two a byte) have one
MANTISSA = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7, "float8_e4m3fn": 3,
            "float8_e4m3fnuz": 3, "float8_e5m2": 2, "float8_e5m2fnuz": 2, "float8_e8m0fnu": 0,
            "float4_e2m1fn_x2": 1}
# Formats under 16 bits with a mantissa, by their precision (2^-mantissa: one step at
# the bottom of a binade): two builds may round a value a step apart when they
# quantise it, and here a step is 6 to 25% of the value (50% for float4_e2m1fn_x2).
# float8_e8m0fnu (exponent only: a step doubles the value) is not one: its values must agree.
NARROW = {dtype: 2.0 ** -bits for dtype, bits in MANTISSA.items()
          if bits and dtype.startswith(("float8", "float4"))}
ITEM_KINDS = {"call", "return", "run", "run-end", "launch", "launch-end"}
# the roles of the items a launch or call reads from each of its records (None: every item)
_READ_ROLES = {"launch": ("in", "inout"), "launch-end": ("out", "inout"), "call": None,
               "return": None, "raise": ()}
LAUNCH_KINDS = ("launch", "launch-end", "crash")     # their id is `model:R.K`
INSTANCE = re.compile(r"[A-Za-z0-9_.+-]{1,200}(?:#[0-9]{1,20})?", re.A)   # a model instance (`ranker#2`)


class LogInputError(InputError):
    """A path that cannot be read as a log: missing, unreadable, or without records."""


def moment(stamp: str) -> Optional[datetime.datetime]:
    """A header's timestamp as a (UTC) datetime; None for a masked or malformed one."""
    try:
        return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f")
    except (TypeError, ValueError):
        return None


def decimal(text: str) -> Optional[int]:
    """The value of a plain ASCII decimal of at most 20 digits, else None."""
    return int(text) if _DECIMAL.fullmatch(text) else None


# -- values -------------------------------------------------------------------

@dataclasses.dataclass
class Tensor:
    fields: Dict[str, str]                  # every key=value line, raw text, in order
    skipped: Optional[str] = None           # the reason of a `stats=skipped (...)` line
    truncated: bool = False                 # the block never reached its `)`
    dump: Optional[tuple] = None            # read from a level-10 dump: where its values are (dumps.py)
    unreadable: Optional[str] = None        # its dumped file cannot be read: the one-line reason

    @property
    def dtype(self) -> str:
        return self.fields.get("dtype", "?")

    @property
    def shape(self) -> str:
        return self.fields.get("shape", "?")

    @property
    def dtype_class(self) -> str:
        """float | complex | int | bool | unknown (section 3's classes)."""
        short = self.dtype.replace("torch.", "")
        if short in FLOATING:
            return "float"
        if short in COMPLEX:
            return "complex"
        if short in INTEGER:
            return "int"
        if short == "bool":
            return "bool"
        return "float" if "nan_count" in self.fields else "unknown"

    @functools.cached_property
    def stats(self) -> Dict[str, float]:
        """The statistics lines as numbers; empty when none were written."""
        out = {}
        for key in STAT_KEYS:
            if key in self.fields:
                value = parse_number(self.fields[key])
                if value is not None:
                    out[key] = value
        return out

    @property
    def hash(self) -> Optional[str]:
        """The content hash (section 3.1) as written, 16 hex digits; None when not written."""
        return self.fields.get("hash")

    @property
    def scale(self) -> Optional[str]:
        """Which of its op's scales the kernel reads it as (`scale_a`); None when not one."""
        return self.fields.get("scale")

    def scale_counts(self) -> Dict[str, int]:
        """A scale's zero_count and subnormal_count, those written."""
        return {k: int(self.fields[k]) for k in SCALE_COUNTS if k in self.fields}

    @property
    def scaled_by(self) -> Optional[str]:
        """An operand of a scaled matmul: the scale that multiplies it and how
        (`scale_a (rowwise)`); None when not one."""
        return self.fields.get("scaled_by")

    def dequant(self) -> Dict[str, float]:
        """Its dequantized statistics as numbers (dequant_min ... dequant_inf_count), those
        written; empty when skipped (`fields["dequant"]` says why) or not an operand."""
        out: Dict[str, float] = {}
        for key in DEQUANT_NUMBERS + DEQUANT_COUNTS:
            if key in self.fields:
                value = parse_number(self.fields[key])
                if value is not None:
                    out[key] = int(value) if key in DEQUANT_COUNTS else value
        return out

    @property
    def has_stats(self) -> bool:
        return bool(self.stats)

    def nonfinite(self) -> Optional[bool]:
        """True if it holds NaN/Inf, False if not, None if the log cannot say."""
        if self.dtype_class in ("int", "bool") or self.skipped == "empty tensor":
            return False            # no element can be NaN/Inf
        stats = self.stats
        if "nan_count" not in stats or "inf_count" not in stats:
            return None
        return stats["nan_count"] > 0 or stats["inf_count"] > 0

    def stats_text(self) -> str:
        if self.skipped is not None:
            return f"stats=skipped ({self.skipped})"
        if not self.fields and not self.truncated:
            return "no value that can be read"         # a label without its block: a damaged record
        parts = [f"{k}={self.fields[k]}" for k in STAT_KEYS if k in self.fields]
        return " ".join(parts) if parts else "no statistics (log level < 5)"

    def summary(self) -> str:
        text = f"shape={self.shape} dtype={self.dtype} {self.stats_text()}"
        return text + (" (truncated)" if self.truncated else "")


@dataclasses.dataclass
class Container:
    kind: str                               # list | tuple | dict
    length: int
    items: List["Item"]


Value = Union[str, Tensor, Container]       # str: the inline form, unparsed


@dataclasses.dataclass
class Item:
    label: str                              # `in x`, `arg[0] x`, `output`, `[0]`, `["mask"]`
    value: Value

    @property
    def role(self) -> str:
        """in | out | inout | arg | kwarg | default | output | element."""
        head = self.label.split(" ", 1)[0]
        if head.startswith("arg["):
            return "arg"
        if head.startswith("["):
            return "element"
        return head

    @property
    def name(self) -> str:
        parts = self.label.split(" ", 1)
        return parts[1] if len(parts) == 2 else parts[0]

    def tensors(self) -> Iterator[Tuple[str, Tensor]]:
        """(label path, tensor) for every tensor in this item, containers flattened."""
        return self._leaves(Tensor, None)

    def inline_values(self) -> Iterator[Tuple[str, str]]:
        """(label path, text) for every inline value in this item, containers flattened."""
        return self._leaves(str, None)

    def _leaves(self, kind, prefix: Optional[str]) -> Iterator[Tuple[str, Any]]:
        label = self.label if prefix is None else prefix + self.label
        if isinstance(self.value, kind):
            yield label, self.value
        elif isinstance(self.value, Container):
            for sub in self.value.items:
                yield from sub._leaves(kind, label)


_INTEGER = re.compile(r"-?[0-9]{1,20}", re.A)
_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|nan|inf)", re.A)


def parse_number(text: str) -> Optional[float]:
    """A number as section 2 of the format writes it; None for anything else."""
    if _INTEGER.fullmatch(text):
        return int(text)
    return float(text) if _FLOAT.fullmatch(text) else None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NONFINITE_WORD = re.compile(r"(?<![\w.])-?(?:nan|inf)(?![\w.])")


def inline_nonfinite(text: str) -> bool:
    """Whether an inline value (scalar or scalar container) holds nan/inf."""
    return bool(_NONFINITE_WORD.search(_STRING.sub('""', text)))


# -- records ------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class Origin:
    nodes: List[str]                        # FX node names; empty when unknown (`-`)
    source: Optional[str]                   # `file:line` as written; None when unknown
    lines: List[Tuple[str, List[str]]] = dataclasses.field(default_factory=list)   # every user line, its nodes
    holds: Optional[Dict[str, str]] = None  # output name -> FX node whose value it holds; None: not written
    # output name -> its own line, where it differs from `source` (`output-source:` lines)
    output_sources: Dict[str, str] = dataclasses.field(default_factory=dict)
    module: Optional[str] = None            # the module path running `source` (`module:`); None: unknown
    # output name -> the module of its own line, where it differs (`output-module:` lines)
    output_modules: Dict[str, str] = dataclasses.field(default_factory=dict)

    @staticmethod
    def _names(outputs: List[str]) -> List[str]:
        return [(o.split(" ", 1)[1] if o.startswith(("out ", "inout ")) else o).split("[", 1)[0]
                for o in outputs]

    def source_of(self, outputs: List[str]) -> Optional[str]:
        """The line to name for these outputs (labels such as `out buf2` or names):
        their own lines (docs/log-format.md 1.1), else the launch's `source`."""
        own = list(dict.fromkeys(self.output_sources.get(n, self.source) for n in self._names(outputs)))
        own = [s for s in own if s]
        return ", ".join(own) if own else self.source

    def where_of(self, outputs: List[str]) -> str:
        """`file:line, module a.b.c` (format.where) of these outputs, as every finding
        names it; outputs of several lines are named each, `; ` between them."""
        def own(name: str):
            if name in self.output_sources:     # another line: its module, never the launch's
                return self.output_sources[name], self.output_modules.get(name)
            return self.source, self.module
        places = list(dict.fromkeys(own(n) for n in self._names(outputs))) or [(self.source, self.module)]
        known = [p for p in places if p[0]] or [(self.source, self.module)]
        return "; ".join(fmt.where(source, module) for source, module in known)

    @property
    def file_and_line(self) -> Tuple[Optional[str], Optional[int]]:
        if not self.source:
            return None, None
        path, _, line = self.source.rpartition(":")
        number = decimal(line)
        if path and number is not None:
            return path, number
        return self.source, None

    def text(self) -> str:
        return f"nodes={','.join(self.nodes) or '-'} source={self.source or '-'}"


@dataclasses.dataclass(slots=True)
class Record:
    kind: str
    id: str
    name: str
    pid: int                                # -1 for a masked `[pid PID]`
    timestamp: str
    line: int                               # 1-based line of the header in its file
    file: Optional[str] = None
    origin: Optional[Origin] = None
    held: List[Item] = dataclasses.field(default_factory=list)     # see `items`
    notes: List[str] = dataclasses.field(default_factory=list)     # note / exception / signal lines
    unparsed: List[str] = dataclasses.field(default_factory=list)  # body lines not understood
    truncated: bool = False
    header_cut: bool = False                # the file ends inside the header line itself
    damage: Optional[str] = None            # a body line that cannot be read: where and what
    thread: Optional[int] = None            # run and call records: the thread that ran it (-1: masked)
    rank: Optional[int] = None              # run records: the process's rank, where known
    world: Optional[int] = None             # run records: the world size, where known
    reference: Optional[str] = None         # run records: "eager" for an eager reference's run
    # read from a file by `parse_file`: where its body is, to read its items again when asked
    # (which reading, header offset, body lines, whether the file ended inside it), and the
    # level they show
    body_at: Optional[Tuple[int, int, int, bool]] = None
    level: int = 0
    kept_finiteness: Optional[Finiteness] = None
    kept_narrow: Optional[bool] = None      # `narrow`, kept when the items are not

    @property
    def items(self) -> List[Item]:
        """The values the record holds.  A record `parse_file` read keeps none in memory
        (a long run's log is gigabytes): they are read again from its file, each time."""
        if self.body_at is None:
            return self.held
        return list(_reread(self.file, self.line, self.kind, self.id, self.timestamp, *self.body_at))

    @property
    def values(self) -> List[Item]:
        """The items its launch or call reads from it: a launch's inputs, a launch-end's
        outputs, a call's arguments, a return's value; none of a raise."""
        roles = _READ_ROLES.get(self.kind)
        if roles is None:
            return self.items
        return [i for i in self.items if i.role in roles] if roles else []

    @property
    def finiteness(self) -> Finiteness:
        return self.kept_finiteness or Finiteness.of(self)

    @property
    def narrow(self) -> bool:
        """Whether some tensor it holds is in a NARROW format."""
        if self.kept_narrow is not None:
            return self.kept_narrow
        return any(t.dtype.replace("torch.", "") in NARROW for i in self.held for _, t in i.tensors())

    @property
    def model(self) -> Optional[str]:
        """The model instance (`ranker#2`) the record belongs to: a run's or run-end's name, the
        `model:` of a launch id (section 1); None for a launch of a log older than that field."""
        if self.kind in ("run", "run-end"):
            return self.name
        if self.kind in LAUNCH_KINDS:
            model, sep, _ = self.id.rpartition(":")
            return model if sep else None
        return None

    @property
    def where(self) -> str:
        if not self.file:
            return f"line {self.line}"
        name = os.path.basename(self.file)
        if name == "manifest.jsonl":      # read from a dump: its folder names the run
            name = os.path.join(os.path.basename(os.path.dirname(self.file)), name)
        return f"{name}:{self.line}"


# -- what the log says of NaN/Inf -------------------------------------------------

FINITE, NONFINITE, UNKNOWN = "finite", "nonfinite", "unknown"


@dataclasses.dataclass
class Evidence:
    """One tensor or scalar of an event, and what the log says about its finiteness."""
    label: str
    value: object                           # Tensor or the inline text
    state: str                              # FINITE | NONFINITE | UNKNOWN
    unreadable: Optional[str] = None        # what could not be read (a dumped file, a damaged record)

    def line(self) -> str:
        if isinstance(self.value, Tensor):
            return f"{self.label}: {self.value.summary()}"
        return f"{self.label}: {self.value}"


def evidence(items: List[Item]) -> List[Evidence]:
    out: List[Evidence] = []
    for item in items:
        for label, tensor in item.tensors():
            nonfinite = tensor.nonfinite()
            state = UNKNOWN if nonfinite is None else NONFINITE if nonfinite else FINITE
            out.append(Evidence(label, tensor, state, tensor.unreadable))
        for label, text in item.inline_values():
            out.append(Evidence(label, text, NONFINITE if inline_nonfinite(text) else FINITE))
    return out


def damage(record: Optional[Record]) -> List[Evidence]:
    """A damaged record says less than it held: one unknown piece of evidence for what is lost."""
    if record is None or record.damage is None:
        return []
    return [Evidence("unreadable", record.damage, UNKNOWN, record.damage)]


def record_evidence(record: Optional[Record]) -> List[Evidence]:
    """The evidence of what a launch or call reads from `record` (`Record.values`), and of its damage."""
    return evidence(record.values) + damage(record) if record is not None else []


def overall(evs: List[Evidence]) -> str:
    states = {e.state for e in evs}
    return NONFINITE if NONFINITE in states else UNKNOWN if UNKNOWN in states else FINITE


@dataclasses.dataclass(frozen=True, slots=True)
class Finiteness:
    """What one record's values (`Record.values`) and its damage say of NaN/Inf: what
    nan-origin needs of every record, kept when the values themselves are not (`parse_file`)."""
    state: str = FINITE                     # overall(): FINITE | NONFINITE | UNKNOWN
    nonfinite: bool = False                 # some value holds NaN/Inf
    unreadable: bool = False                # some value (or the record) cannot be read
    unknown: int = 0                        # readable values the log has no statistics for
    first_unknown: Optional[str] = None     # the first of them, as Evidence.line() says it

    @classmethod
    def of(cls, record: "Record") -> "Finiteness":
        evs = record_evidence(record)
        unknown = [e for e in evs if e.state == UNKNOWN and not e.unreadable]
        return cls(overall(evs), any(e.state == NONFINITE for e in evs), any(e.unreadable for e in evs),
                   len(unknown), unknown[0].line() if unknown else None)


@dataclasses.dataclass
class Banner:
    pid: int
    timestamp: str
    facts: Dict[str, str]
    line: int

    @property
    def rank(self) -> Tuple[Optional[int], Optional[int]]:
        """(rank, world size) from the `Rank:` line; (None, None) when the process had no rank."""
        match = _BANNER_RANK.match(self.facts.get("Rank", ""))
        if not match:
            return None, None
        return int(match["rank"]), (int(match["world"]) if match["world"] else None)


@dataclasses.dataclass(frozen=True)
class Process:
    """One process of a log: its pid, and its rank and world size where the log says them."""
    pid: int
    rank: Optional[int] = None
    world: Optional[int] = None

    @property
    def order(self) -> Tuple[int, int]:
        """Sort key: processes by rank, then those without one by pid."""
        return (0, self.rank) if self.rank is not None else (1, self.pid)

    @property
    def label(self) -> str:
        """`rank 2 (pid 4242)`, or `pid 4242` for a process without a rank."""
        return f"rank {self.rank} (pid {self.pid})" if self.rank is not None else f"pid {self.pid}"


def _split_id(ident: str) -> Tuple[Optional[int], Optional[int]]:
    """(R, K) of a launch id `model:R.K` (or `R.K`, written before ids named the model)."""
    run, _, launch = ident.rpartition(":")[2].partition(".")
    r, k = decimal(run), decimal(launch)
    return (r, k) if r is not None and k is not None else (None, None)


@dataclasses.dataclass(slots=True)
class _Span:
    """What a launch and a call share: the record that opens it and the one that closes it."""
    start: Optional[Record]
    end: Optional[Record] = None

    @property
    def first(self) -> Record:
        return self.start or self.end  # type: ignore[return-value]

    @property
    def pid(self) -> int:
        return self.first.pid

    @property
    def name(self) -> str:
        return self.first.name

    @property
    def title(self) -> str:
        return f"{self.ident} {self.name}"  # type: ignore[attr-defined]

    @property
    def finished(self) -> bool:
        return self.end is not None


@dataclasses.dataclass(slots=True)
class Launch(_Span):
    """One kernel launch: its `launch` record, `launch-end` and crash trailer when present."""
    crash: Optional[Record] = None

    @property
    def first(self) -> Record:
        return self.start or self.end or self.crash  # type: ignore[return-value]

    @property
    def ident(self) -> str:
        return self.first.id

    @property
    def run(self) -> Optional[int]:
        return _split_id(self.ident)[0]

    @property
    def model(self) -> Optional[str]:
        """The model instance that launched it (`ranker#2`); None in a log older than that."""
        return self.first.model

    @property
    def instance(self) -> Tuple[int, Optional[str]]:
        """(pid, model instance): whose run numbers R and launch numbers K these are."""
        return self.pid, self.model

    @property
    def index(self) -> Optional[int]:
        return _split_id(self.ident)[1]

    @property
    def origin(self) -> Optional[Origin]:
        return self.start.origin if self.start else None

    @property
    def inputs(self) -> List[Item]:
        return self.start.values if self.start else []

    @property
    def outputs(self) -> List[Item]:
        return self.end.values if self.end else []


@dataclasses.dataclass(slots=True)
class Call(_Span):
    """One `log_api` call: `call` record and its `return` or `raise`."""

    @property
    def ident(self) -> str:
        return f"call {self.first.id}"

    @property
    def origin(self) -> Optional[Origin]:
        return None

    @property
    def inputs(self) -> List[Item]:
        return self.start.values if self.start else []

    @property
    def outputs(self) -> List[Item]:
        return self.end.values if self.end is not None else []

    @property
    def crash(self) -> Optional[Record]:
        return None


Event = Union[Launch, Call]


@dataclasses.dataclass
class Log:
    path: Optional[str]
    records: List[Record]
    banners: List[Banner]
    unknown_lines: List[Tuple[int, str]]
    launches: List[Launch]
    calls: List[Call]
    crashes: List[Record]                   # every crash trailer, with or without a launch
    # what was not understood, one line per file and kind: "x.log: 3 line(s) ... (first: line 7)"
    left_out: List[str] = dataclasses.field(default_factory=list)

    @property
    def events(self) -> List[Event]:
        """Launches and calls in the order their first record was written."""
        order = {id(r): n for n, r in enumerate(self.records)}
        return sorted([*self.launches, *self.calls], key=lambda e: order[id(e.first)])

    def processes(self) -> List[Process]:
        """Every process with records, in order of its first record; a rank comes from the
        process's banner or its run records."""
        ranks: Dict[int, Tuple[Optional[int], Optional[int]]] = {}
        for banner in self.banners:
            if banner.rank[0] is not None:
                ranks.setdefault(banner.pid, banner.rank)
        for r in self.records:
            if r.rank is not None:
                ranks.setdefault(r.pid, (r.rank, r.world))
        pids = dict.fromkeys(r.pid for r in self.records)
        return [Process(pid, *ranks.get(pid, (None, None))) for pid in pids]

    def process(self, pid: int) -> Process:
        return next((p for p in self.processes() if p.pid == pid), Process(pid))

    def of_process(self, pid: int) -> "Log":
        """The records of one process, as a Log of their own."""
        log = _group(self.path, [r for r in self.records if r.pid == pid],
                     [b for b in self.banners if b.pid == pid], [])
        log.left_out = list(self.left_out)
        return log

    def unreadable(self) -> List[str]:
        """What could not be read, in log order, once each: a dumped file (why), a damaged
        record (where).  What a check finds nothing in without these is not known."""
        return list(dict.fromkeys(
            # only a dump's tensors (held in memory) can be unreadable
            [why for r in self.records for why in [r.damage] + [t.unreadable for i in r.held
                                                                  for _, t in i.tensors()] if why]))

    def lost(self) -> List[str]:
        """The logger's own `note - log` lines: records it could not write (log-format.md 5)."""
        return [f"{r.file or 'the log'}:{r.line}: pid {r.pid}: {note}" for r in self.records
                if r.kind == "note" and r.name == "log" for note in r.notes]

    def level_hint(self) -> int:
        """The least level that explains what the log holds: 0 (nothing), 1, 3 or 5."""
        if not self.records:
            return 0
        return max(r.level if r.body_at is not None else _level(r) for r in self.records)


# -- parsing ------------------------------------------------------------------

def parse(text: str, path: Optional[str] = None) -> Log:
    """The records of log text held in memory."""
    pieces = text.split("\n")
    last = pieces.pop()                     # "" when the text ends with a newline
    # a copy made on Windows or sent through a tool that writes CRLF: the same records
    lines = [(piece[:-1] if piece.endswith("\r") else piece, 0, True) for piece in pieces]
    return _parse(iter(lines + ([(last, 0, False)] if last else [])), path, lazy=False)


def parse_file(path: str) -> Log:
    """The records of a log file, read a block at a time: what is kept of each record is its
    header, origin, notes and what its values say of NaN/Inf (`Finiteness`); the values are
    read again when asked for (`Record.items`), so memory grows with the number of records,
    not with what they hold."""
    return _parse(untrusted.text_lines(path), path, lazy=True)


class _Ahead:
    """Lines (text, byte offset, ended by a newline) with a look ahead of as many as asked."""

    def __init__(self, source: Iterator[Tuple[str, int, bool]]) -> None:
        self.source, self.buffer = source, collections.deque()
        self.number = 0                     # 1-based number of the last line taken

    def peek(self, k: int = 0) -> Optional[Tuple[str, int, bool]]:
        while len(self.buffer) <= k:
            got = next(self.source, None)
            if got is None:
                return None
            self.buffer.append(got)
        return self.buffer[k]

    def take(self) -> Optional[Tuple[str, int, bool]]:
        got = self.buffer.popleft() if self.buffer else next(self.source, None)
        if got is not None:
            self.number += 1
        return got


def _parse(source: Iterator[Tuple[str, int, bool]], path: Optional[str], lazy: bool) -> Log:
    lines = _Ahead(source)
    reading = next(_READINGS)               # a record's items are cached for its own reading only
    records: List[Record] = []
    banners: List[Banner] = []
    unknown: List[Tuple[int, str]] = []
    body: List[str] = []
    current: Optional[Record] = None
    at = 0                                  # the byte offset of current's header
    ended = True                            # the last line read ended with a newline

    def close() -> None:
        nonlocal current, body
        if current is not None:
            cut = current.truncated         # set only when the file ends inside this record
            _fill_body(current, body)
            if lazy and current.kind in ITEM_KINDS:
                current.level = _level(current)
                current.kept_finiteness = _shared(Finiteness.of(current))
                current.kept_narrow = current.narrow
                current.held = ()               # read again when asked: `items`
                current.body_at = (reading, at, len(body), cut)
            records.append(current)
        current, body = None, []

    while True:
        got = lines.take()
        if got is None:
            break
        line, offset, ended = got
        number = lines.number
        if line.startswith("  ") and current is not None:
            body.append(line)
            continue
        close()
        if line == RULE:
            banner = _banner(lines, number, path)
            if banner is None:
                unknown.append((number, line))
            else:
                banners.append(banner)
            continue
        # the last line of a file cut short may be any prefix of a header, and so
        # may a line a failed write cut short (the runtime's lost-records note follows)
        following = lines.peek()
        cut = (following is None and not ended) or bool(following and _LOST_NOTE.match(following[0]))
        match = _header(line, path, number, strict=not cut)
        if match:
            # kinds and kernel names repeat on every launch: one string each
            current = Record(kind=sys.intern(match["kind"]), id=match["id"],
                             name=sys.intern(match["name"] or ""), pid=_pid(match),
                             timestamp=match["ts"], line=number, file=path)
            at = offset
            if current.kind in ("run", "call"):
                _header_facts(current)
        elif line.strip():
            unknown.append((number, line))
    if current is not None and not ended:
        current.truncated = True
        current.header_cut = not body
    close()
    log = _group(path, records, banners, unknown)
    log.left_out = _left_out(path, unknown)
    return log


def _level(record: Record) -> int:
    """The least level that explains what one record holds: 1, 3 or 5 (`Log.level_hint`)."""
    if any(t.has_stats or t.skipped is not None for i in record.held for _, t in i.tensors()):
        return 5
    return 3 if record.held or record.origin else 1


_READINGS = itertools.count()
_REREAD_BLOCK = 64 * 2**10               # a record's body is read again, not the file's next MiB
_SHARED: Dict[Finiteness, Finiteness] = {}


def _shared(finiteness: Finiteness) -> Finiteness:
    """One object for each of the few summaries most records share."""
    if finiteness.first_unknown is not None:
        return finiteness
    return _SHARED.setdefault(finiteness, finiteness)


# a few records' items, for the launch and call being looked at: memory stays within
# a few of the largest records
@functools.lru_cache(maxsize=8)
def _reread(path: str, number: int, kind: str, ident: str, stamp: str,
            reading: int, at: int, count: int, cut: bool) -> Tuple[Item, ...]:
    """The items of the record whose header is line `number` of `path`, at byte `at`,
    read again as `parse_file` first read them.  A file that no longer holds that header
    there changed while it was read: said, never taken for the record."""
    with contextlib.closing(untrusted.text_lines(path, at, number - 1, _REREAD_BLOCK)) as lines:
        text = [line for line, _, _ in itertools.islice(lines, count + 1)]
    match = _HEADER.match(text[0]) if text else None
    if (match is None or (match["kind"], match["id"], match["ts"]) != (kind, ident, stamp)
            or len(text) != count + 1 or any(not t.startswith("  ") for t in text[1:])):
        raise InputError(f"{where(path, number)}: the file changed while it was being read "
                         "(read a log once its process has stopped writing it, or a copy)")
    record = Record(kind=kind, id=ident, name="", pid=0, timestamp=stamp, line=number, file=path,
                    truncated=cut)
    _fill_body(record, text[1:])
    return tuple(record.held)


def _header(line: str, path: Optional[str], number: int, strict: bool) -> Optional["re.Match[str]"]:
    """The header match of `line`; None for a line that is no header.  A line that starts
    like a header (`[...] [pid `) but is not a valid one raises InputError when `strict`."""
    match = _HEADER.match(line)
    if not strict or not _CLAIMS_HEADER.match(line):
        return match if match and _pid(match) is not None else None
    if match is None:
        problem = "not a record header (expected `[timestamp] [pid N] kind id name`)"
    elif _pid(match) is None:
        problem = f"pid '{shorten(match['pid'])}' is not a process id (a decimal of at most 20 digits)"
    elif not _TIMESTAMP.fullmatch(match["ts"]):
        problem = f"timestamp '{shorten(match['ts'])}' is not of the form YYYY-MM-DD hh:mm:ss.micro"
    elif _LONG_NUMBER.search(match["id"]):
        problem = f"id '{shorten(match['id'])}' holds a number of more than 20 digits"
    else:
        return match
    raise InputError(f"{where(path, number)}: {problem}")


def _header_facts(record: Record) -> None:
    """Split `thread=T rank=R/W reference=eager` off a run or call header's name."""
    match = _HEADER_FACTS.match(record.name)
    if match is None:
        return
    record.name = match["name"]
    record.thread = -1 if match["thread"] == "TID" else int(match["thread"])
    if match["rank"] is not None:
        record.rank = int(match["rank"])
        record.world = int(match["world"]) if match["world"] else None
    record.reference = match["reference"]


def _pid(match: "re.Match[str]") -> Optional[int]:
    """The header's pid; -1 when masked (`PID`), None when it is not a process id."""
    return -1 if match["pid"] == "PID" else decimal(match["pid"])


def _left_out(path: Optional[str], unknown: List[Tuple[int, str]]) -> List[str]:
    name = path or "the log"
    out = []
    if unknown:
        out.append(f"{name}: {len(unknown)} line(s) that are not aoti-debug records were left out "
                   f"(first: line {unknown[0][0]})")
    return out


_NONE: Tuple = ()
_EMPTY: Mapping = types.MappingProxyType({})
MAX_BANNER_FACTS = 256                  # lines between a banner's rules; more is no banner


def _banner(lines: _Ahead, number: int, path: Optional[str]) -> Optional[Banner]:
    """The banner whose first rule is line `number` (taken), its lines taken; None, and
    nothing more taken, when what follows the rule is no banner."""
    head, rule = lines.peek(0), lines.peek(1)
    match = _header(head[0], path, number + 1, strict=False) if head else None
    if not match or match["kind"] != "aoti-debug" or rule is None or rule[0] != RULE:
        return None
    facts: Dict[str, str] = {}
    j = 2
    while (line := lines.peek(j)) is not None and line[0] != RULE:
        key, sep, value = line[0].partition(": ")
        if not sep or line[0].startswith(("[", " ")) or j > MAX_BANNER_FACTS:
            return None          # not a banner's `key: value`: its closing rule is missing
        facts[key] = value
        j += 1
    for _ in range(j + 1):
        lines.take()
    return Banner(pid=_pid(match), timestamp=match["ts"], facts=facts, line=number + 1)


def parse_origin(body: List[str], lost: Callable[[int], None]) -> Tuple[Optional[Origin], int]:
    """A launch's origin from the start of its body (`origin:`, then `module:`,
    `source-line:`, `output-source:`, `output-module:` and `holds:` lines, each
    optional), and the index of the first line after them; `lost(j)` is told of
    each damaged line.  (None, 0) when the body does not start with `origin:`."""
    if not body or not body[0].startswith("  origin:"):
        return None, 0
    origin: Optional[Origin] = None
    match = _ORIGIN.match(body[0][2:])
    if match:
        nodes = [] if match["nodes"] == "-" else match["nodes"].split(",")
        origin = Origin(nodes, None if match["source"] == "-" else match["source"])
    else:
        lost(0)
    j = 1
    if j < len(body) and body[j].startswith("  module: "):
        module = body[j][len("  module: "):]
        if origin is not None and _MODULE.match(module):
            origin.module = module
        else:
            lost(j)
        j += 1
    while j < len(body) and body[j].startswith("  source-line: "):
        match = _SOURCE_LINE.match(body[j][2:])
        if match and origin is not None:
            origin.lines.append((match["source"], match["nodes"].split(",")))
        else:
            lost(j)       # damage: the line of some outputs is lost
        j += 1
    while j < len(body) and body[j].startswith("  output-source: "):
        name, _, source = body[j][len("  output-source: "):].partition(" ")
        if name and source and origin is not None:
            origin.output_sources[name] = source
        else:
            lost(j)
        j += 1
    while j < len(body) and body[j].startswith("  output-module: "):
        name, _, module = body[j][len("  output-module: "):].partition(" ")
        if name and _MODULE.match(module) and origin is not None:
            origin.output_modules[name] = module
        else:
            lost(j)
        j += 1
    if j < len(body) and body[j].startswith("  holds: ") and origin is not None:
        pairs = [p.rpartition("=") for p in body[j][len("  holds: "):].split(" ")]
        origin.holds = {name: node for name, eq, node in pairs if eq and name and node}
        j += 1
    if origin is not None:                  # most launches have one line: no empty containers each
        origin.lines = origin.lines or _NONE
        origin.output_sources = origin.output_sources or _EMPTY
        origin.output_modules = origin.output_modules or _EMPTY
    return origin, j


def _fill_body(record: Record, body: List[str]) -> None:
    if record.kind not in ITEM_KINDS:
        for line in body:
            record.notes.append(line[2:])
        return
    # record.truncated is only set yet when the file ends inside this record: its last line is cut
    b = _Body(record, body, cut=len(body) - 1 if record.truncated else -1)
    j = 0
    if record.kind == "launch":
        record.origin, j = parse_origin(body, b.lost)
    while j < len(body):
        item, j2, truncated = _item(b, j, 1)
        if item is None:
            b.lost(j)
            j += 1
            continue
        record.held.append(item)
        record.truncated = record.truncated or truncated
        j = j2


class _Body:
    """The body lines of one record while its items are read.  A line that cannot be read
    is kept in `record.unparsed`, and the first one makes the record `damage`d: what it
    said is lost, so what the record says is not all there was.  A line cut short by the end
    of the file is not damage (the record is `truncated`)."""

    def __init__(self, record: Record, lines: List[str], cut: int) -> None:
        self.record, self.lines, self.cut = record, lines, cut

    def lost(self, j: int, why: str = "") -> None:
        self.record.unparsed.append(self.lines[j])
        if j != self.cut and self.record.damage is None:
            self.record.damage = (f"{where(self.record.file, self.record.line + 1 + j)}: "
                                  + (why or f"line '{shorten(self.lines[j].strip())}' cannot be read"))


def _depth(line: str) -> int:
    return (len(line) - len(line.lstrip(" "))) // 2


def _item(b: _Body, j: int, depth: int) -> Tuple[Optional[Item], int, bool]:
    """Parse the item whose label line is b.lines[j]; returns (item, next index, truncated)."""
    body = b.lines
    line = body[j]
    if _depth(line) != depth:
        return None, j, False
    labelled = _label(line[2 * depth:])
    if labelled is None:
        return None, j, False
    label, value = labelled
    if value is not None:
        return Item(label, value), j + 1, False
    block, j2, truncated = _block(b, j + 1, depth + 1)
    if block is not None:
        return Item(label, block), j2, truncated
    cut = j + 1 >= len(body) and b.cut >= 0     # the file ends after the label
    if not cut:
        b.lost(j, f"'{shorten(label)}' has no value that can be read")
    return Item(label, Tensor({}, truncated=cut)), j + 1, cut


def _label(text: str) -> Optional[Tuple[str, Optional[str]]]:
    """(label, inline value or None) of an item line; dict keys may hold any character."""
    if not text.startswith('["'):
        m = _LABELLED.match(text)
        return (m["label"], m["value"]) if m else None
    key = _STRING.match(text, 1)
    if not key or text[key.end():key.end() + 2] != "]:":
        return None
    rest = text[key.end() + 2:]
    return text[:key.end() + 1], (rest[1:] if rest.startswith(" ") else None)


def _block(b: _Body, j: int, depth: int) -> Tuple[Optional[Value], int, bool]:
    body = b.lines
    if j >= len(body) or _depth(body[j]) != depth or depth > MAX_DEPTH:
        return None, j, False
    head = body[j].strip(" ")
    if head == "Tensor(":
        fields: Dict[str, str] = {}
        skipped = None
        j += 1
        deeper = "  " * (depth + 1)           # a line of the block: indented past its head
        while j < len(body) and body[j].startswith(deeper):
            key, sep, value = body[j].strip(" ").partition("=")
            if sep and key == "stats" and value.startswith("skipped (") and value.endswith(")"):
                skipped = value[len("skipped ("):-1]
            elif sep and (key in COUNT_KEYS or key in SCALE_COUNTS or key in DEQUANT_COUNTS) \
                    and decimal(value) is None:
                # `nan_count=nan` or `-1` is no count: read as a number it would say "no NaN"
                b.lost(j, f"'{shorten(key + '=' + value)}' is not a count (expected a whole number "
                          "of at most 20 digits)")
            elif sep and key in TENSOR_KEYS and (key not in STAT_KEYS or parse_number(value) is not None) \
                    and (key != "hash" or _HASH.match(value)):
                fields[key] = value
            elif sep and (key in SCALE_COUNTS or (key == "scale" and value in SCALE_ARGUMENTS)):
                fields[key] = value
            elif sep and (key in DEQUANT_COUNTS or (key in DEQUANT_NUMBERS and parse_number(value) is not None)
                          or (key == "scaled_by" and value.split(" ", 1)[0].split("[", 1)[0] in SCALE_ARGUMENTS)
                          or (key == "dequant" and value.startswith("skipped (") and value.endswith(")"))):
                fields[key] = value
            else:
                b.lost(j)
            j += 1
        if j < len(body) and body[j].strip(" ") == ")" and _depth(body[j]) == depth:
            return Tensor(fields, skipped), j + 1, False
        return Tensor(fields, skipped, truncated=True), j, True
    container = _CONTAINER.match(head)
    if container:
        items: List[Item] = []
        j += 1
        truncated = False
        deeper = "  " * (depth + 1)
        while j < len(body) and body[j].startswith(deeper):
            item, j2, cut = _item(b, j, depth + 1)
            if item is None:
                b.lost(j)            # an element we cannot read; skip it, keep the rest
                j += 1
                continue
            items.append(item)
            truncated = truncated or cut
            j = j2
        truncated = truncated or len(items) < int(container["len"])
        return Container(container["kind"], int(container["len"]), items), j, truncated
    return None, j, False


def _group(path, records: List[Record], banners, unknown) -> Log:
    launches: List[Launch] = []
    calls: List[Call] = []
    crashes: List[Record] = []
    open_launches: Dict[Tuple[int, str, str], Launch] = {}
    open_calls: Dict[Tuple[int, str], Call] = {}
    for rec in records:
        key = (rec.pid, rec.id, rec.name)
        if rec.kind == "launch":
            open_launches[key] = launch = Launch(rec)
            launches.append(launch)
        elif rec.kind == "launch-end":
            launch = open_launches.pop(_open_key(open_launches, key, rec), None)
            if launch is None:            # the log starts after the launch record
                launches.append(Launch(None, end=rec))
            else:
                launch.end = rec
        elif rec.kind == "crash":
            crashes.append(rec)
            key = _open_key(open_launches, key, rec)
            if key in open_launches:
                open_launches.pop(key).crash = rec
        elif rec.kind == "call":
            open_calls[(rec.pid, rec.id)] = call = Call(rec)
            calls.append(call)
        elif rec.kind in ("return", "raise"):
            call = open_calls.pop((rec.pid, rec.id), None)
            if call is None:
                calls.append(Call(None, end=rec))
            else:
                call.end = rec
    return Log(path, records, banners, unknown, launches, calls, crashes)


def _open_key(open_launches, key, rec: Record):
    """The key of the open launch `rec` closes; a header cut short may have lost part of its name."""
    if key in open_launches or not rec.header_cut:
        return key
    return next((k for k in open_launches if k[0] == rec.pid and k[1].startswith(rec.id)
                 and k[2].startswith(rec.name)), key)


# -- files and directories ------------------------------------------------------

def merge(path: Optional[str], logs: List[Log]) -> Log:
    """One Log of several files (or dump folders), each in write order, merged by timestamp."""
    if len(logs) == 1:
        return logs[0]
    _one_rank_per_pid(logs)
    records = list(heapq.merge(*(log.records for log in logs), key=lambda r: r.timestamp))
    merged = _group(path, records, [b for log in logs for b in log.banners],
                    [u for log in logs for u in log.unknown_lines])
    merged.left_out = [note for log in logs for note in log.left_out]
    return merged


def _one_rank_per_pid(logs: List[Log]) -> None:
    """Records are grouped by pid: two ranks with one pid (processes of two machines or
    containers) would be read as one process, their launches paired with each other's ends."""
    seen: Dict[int, Tuple[Optional[str], int]] = {}
    for log in logs:
        for p in log.processes():
            if p.rank is None:
                continue
            path, rank = seen.setdefault(p.pid, (log.path, p.rank))
            if rank != p.rank:
                raise LogInputError(
                    f"{path} and {log.path}: pid {p.pid} is rank {rank} in one and rank {p.rank} in the "
                    "other (processes of different machines or containers that share a pid); records are "
                    "grouped by pid, so read them apart: one command per machine's logs")
