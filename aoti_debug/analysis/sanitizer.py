"""Reading NVIDIA compute-sanitizer reports and naming the launch each error is in.

`compute-sanitizer --tool memcheck` (and racecheck, initcheck) says which device
function faulted, by which thread, at which address, but not which FX node or
model line that function is.  An aoti-debug log says that of every launch.
`parse(text)` reads the sanitizer's text into a `Report` of `SanitizerError`s;
`match(report, launches)` pairs each error with the log's launch record of the
same kernel name, so a verdict can say "this launch, these nodes, this line".

The sanitizer's lines start with `=========`; an error is a headline
(`========= Invalid __global__ write of size 4 bytes`) followed by indented
detail lines.  Both documented frame formats are read:

- current:  `at kernel()+0x80 in file.cu:6`, `at kernel+0x80`, `at 0x80 in kernel`
- older:    `at 0x00000028 in file.cu:6:kernel(void)`, `at 0x00000028 in kernel(void)`

and racecheck's `Race reported between Write access at ...` and
`Potential WAW hazard detected ...` forms.  Lines without the prefix are the
program's own output and are ignored; so are host backtraces.

The text is untrusted (a file a user pasted, cut short, or crafted): `parse`
never raises, keeps at most `MAX_ERRORS` errors and `MAX_FIELD` characters of a
field, and says what it left out (`Report.truncated`, `dropped`, `notes`).
Matching compares names exactly and never guesses: a kernel no launch has the
name of stays unmatched.  Pure text processing: no torch.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .untrusted import printable, shorten

MAX_ERRORS = 1000                   # errors kept; more are counted in Report.dropped
MAX_FIELD = 1000                    # characters kept of one field (a C++ kernel name can be long)
MAX_LINE = 64 * 1024                # characters of one line read; the rest is never looked at
MAX_NOTES = 32
_TEXT_FIELD = 200                   # characters of one untrusted field in a Match.text() line

# exactly nine `=` at the start of the line: a program printing a row of `==========`,
# or indenting its own text, is not the sanitizer
_PREFIX = re.compile(r"=========(?!=)")
# what only a detail line starts with: read as one even when a copy lost the indentation
_DETAIL_START = ("at ", "by thread ", "Address ", "and ", "in ", "Saved host backtrace",
                 "Host Frame", "Device Frame", "Read Thread ", "Write Thread ", "Current Value",
                 "Uninitialized access at ")
# the tool's own status lines, noted, not errors (ERROR and RACECHECK SUMMARY are read before)
_STATUS = re.compile(r"(?:Error|Warning|Info|Note):\s|[A-Z]+ SUMMARY:|Target application returned an error")
# the banner and the deprecation words of cuda-memcheck: say nothing of the run
_BANNER = re.compile(r"(?:COMPUTE-SANITIZER|CUDA-MEMCHECK)\s*$|This tool is deprecated|Please use the ")
_RACE = re.compile(r"(?P<head>\S+:\s+Race reported between (?:Read|Write) access) at (?P<frame>.+)")
_RACE_MORE = re.compile(r"and (?P<access>(?:Read|Write) access) at (?P<frame>.+?)"
                        r"(?: (?P<hazards>\[[0-9,]{1,24} hazards?\]))?")
_HAZARD_THREAD = re.compile(r"(?:Read|Write) Thread (?P<thread>\([^)]{0,64}\)) at (?P<frame>.+)")
_IN_BLOCK = re.compile(r".* in block (?P<block>\([^)]{0,64}\))")
_BY_THREAD = re.compile(r"by thread (?P<thread>\([^)]{0,64}\)) in block (?P<block>\([^)]{0,64}\))")
_SUMMARY = re.compile(r"(?P<tool>ERROR|RACECHECK) SUMMARY: (?P<count>[0-9][0-9,]{0,30})\b")
_HAZARDS_SUFFIX = re.compile(r" \[[0-9,]{1,24} hazards?\]$")
# current format: `name+0x80` or `name+0x80 in file:line`
_FRAME_NOW = re.compile(r"(?P<fn>.+)\+(?P<off>0x[0-9A-Fa-f]{1,32})(?: in (?P<loc>.+))?")
# older format: `0x00000028 in file:line:name` or `0x00000028 in name`
_FRAME_OLD = re.compile(r"(?P<off>0x[0-9A-Fa-f]{1,32}) in (?P<rest>.+)")
# `file:line:` before an older-format name: no `(`, `<` or `>`, which a C++ name holds first
_LOCATION_HEAD = re.compile(r"(?P<loc>[^()<>]+?:[0-9]{1,10}):(?P<fn>.+)")


@dataclasses.dataclass
class SanitizerError:
    what: str                               # the headline: `Invalid __global__ write of size 4 bytes`
    line: int                               # 1-based line of the headline in the text
    kernel: Optional[str] = None            # the device function as reported; None: none is (host side)
    name: Optional[str] = None              # its bare name: no return type, no parameter list
    offset: Optional[str] = None            # `0x80`, as printed
    location: Optional[str] = None          # `file.cu:6`, where printed
    thread: Optional[str] = None            # `(3,0,0)`
    block: Optional[str] = None             # `(0,0,0)`
    address: Optional[str] = None           # `Address 0x... is out of bounds and is 4 bytes after ...`
    frame_unreadable: bool = False          # its `at` line could not be read (cut): kernel stays None


@dataclasses.dataclass
class Report:
    errors: List[SanitizerError] = dataclasses.field(default_factory=list)
    summary: Optional[str] = None           # `ERROR SUMMARY: 1 error` (else `RACECHECK SUMMARY: ...`)
    error_count: Optional[int] = None       # the summary's number
    truncated: bool = False                 # something was left out or cut: see `notes`
    dropped: int = 0                        # errors past MAX_ERRORS, counted, not kept
    notes: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Match:
    error: SanitizerError
    launch: Any = None                      # the log's launch record; None: no launch has the name
    candidates: int = 0                     # launches of the log with this kernel's name

    def text(self) -> str:
        """One bounded, printable line: the error, and the launch it is in or why none is named."""
        e = self.error
        head = f"compute-sanitizer: {_show(e.what)}"
        facts = []
        if e.thread or e.block:
            facts.append(" ".join(f"{k} {_show(v)}" for k, v in (("thread", e.thread), ("block", e.block))
                                  if v))
        if e.address:
            facts.append(_show(e.address))
        if e.location:
            facts.append(f"at {_show(e.location)}")
        said = f" ({'; '.join(facts)})" if facts else ""
        if e.name is None:
            if e.frame_unreadable:
                return f"{head}{said} (its frame cannot be read: no kernel named)"
            return f"{head}{said} (a host-side error: it names no kernel)"
        head += f" in {_show(e.name)}{said}"
        if self.launch is None:
            return (f"{head}: no launch of the log has this kernel's name "
                    "(a kernel outside the model, or a log from another run)")
        which = f"launch {_show(str(getattr(self.launch, 'id', '?')))}"
        if self.candidates > 1:
            which += f", the last of {self.candidates} launches of this kernel"
        return f"{head} = {which} ({_origin(getattr(self.launch, 'origin', None))})"


def _show(text: str) -> str:
    return shorten(text, _TEXT_FIELD)


def _origin(origin: Any) -> str:
    if origin is None:
        return "the log names no origin for it"
    nodes = ",".join(str(n) for n in (getattr(origin, "nodes", None) or ())) or "-"
    text = f"nodes={_show(nodes)} source={_show(getattr(origin, 'source', None) or '-')}"
    module = getattr(origin, "module", None)
    return text + (f", module {_show(module)}" if module else "")


# -- names --------------------------------------------------------------------

_OPEN, _CLOSE = "(<[", ")>]"


def bare_name(function: str) -> str:
    """The name of a reported device function without its parameter list and return type:
    `unaligned_kernel()` -> `unaligned_kernel`, `void foo<int>(float*, int)` -> `foo<int>`.
    Template arguments are kept.  Text whose brackets do not balance (an `operator<`, a cut
    name) is only stripped of a leading `void `: better a name that matches nothing than a
    wrong one."""
    text = function.strip()
    for qualifier in (" const", " volatile"):
        if text.endswith(qualifier):
            text = text[:-len(qualifier)].rstrip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i].rstrip()
                break
        else:
            return _no_void(function)
    tokens = _top_level_words(text)
    if tokens is None:
        return _no_void(function)
    name = tokens[-1] if tokens else ""
    if len(tokens) >= 2 and tokens[-2].endswith("operator"):   # `operator ()`: one name
        name = tokens[-2] + " " + name
    return name or _no_void(function)


def _no_void(function: str) -> str:
    text = function.strip()
    return text[len("void "):] if text.startswith("void ") else text


def _top_level_words(text: str) -> Optional[List[str]]:
    """`text` split at spaces outside brackets; None when its brackets do not balance."""
    words, start, depth = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif ch == " " and depth == 0:
            if i > start:
                words.append(text[start:i])
            start = i + 1
    if depth != 0:
        return None
    if start < len(text):
        words.append(text[start:])
    return words


def _frame(text: str) -> Optional[Tuple[str, str, Optional[str]]]:
    """(function, offset, location) of a frame's text in either format; None if neither."""
    text = _HAZARDS_SUFFIX.sub("", text.strip())
    old = _FRAME_OLD.fullmatch(text)
    if old:                         # `0x.. in ...`: an offset first is the older format
        rest = old["rest"]
        place = _LOCATION_HEAD.fullmatch(rest)
        if place:
            return place["fn"], old["off"], place["loc"]
        return rest, old["off"], None
    now = _FRAME_NOW.fullmatch(text)
    if now:
        return now["fn"], now["off"], now["loc"]
    return None


# -- parsing ------------------------------------------------------------------

class _Reader:
    def __init__(self) -> None:
        self.report = Report()
        self.current: Optional[SanitizerError] = None     # the error whose details follow
        self.in_error = False                               # also one past MAX_ERRORS, not kept
        self.more_notes = 0

    def note(self, text: str) -> None:
        if len(self.report.notes) < MAX_NOTES:
            self.report.notes.append(printable(text))
        else:
            self.more_notes += 1

    def cap(self, text: str, number: int) -> str:
        if len(text) <= MAX_FIELD:
            return text
        self.report.truncated = True
        self.note(f"line {number}: a field of {len(text)} characters cut to {MAX_FIELD}")
        return text[:MAX_FIELD]

    def headline(self, text: str, number: int) -> None:
        summary = _SUMMARY.match(text)
        if summary:
            # ERROR SUMMARY is memcheck's and initcheck's; racecheck says RACECHECK SUMMARY instead
            if summary["tool"] == "ERROR" or self.report.summary is None \
                    or not self.report.summary.startswith("ERROR"):
                self.report.summary = self.cap(text, number)
                self.report.error_count = int(summary["count"].replace(",", "")[:20])
            self.current, self.in_error = None, False
            return
        if _BANNER.match(text):
            self.current, self.in_error = None, False
            return
        if _STATUS.match(text) and not _RACE.match(text):
            self.note(f"line {number}: {shorten(text, 200)}")
            self.current, self.in_error = None, False
            return
        if len(self.report.errors) >= MAX_ERRORS:
            self.report.dropped += 1
            self.report.truncated = True
            self.current, self.in_error = None, True     # its detail lines are not read either
            return
        race = _RACE.fullmatch(text)
        hazard = _IN_BLOCK.match(text) if "hazard" in text else None
        what = race["head"] if race else text.rstrip(" :") if hazard else text
        error = SanitizerError(what=self.cap(what, number), line=number)
        if race:
            self.set_frame(error, race["frame"], number)
        if hazard:
            error.block = self.cap(hazard["block"], number)
        self.report.errors.append(error)
        self.current, self.in_error = error, True

    def detail(self, text: str, number: int) -> None:
        error = self.current
        if error is None:
            # a frame without its headline: the report's start is missing
            if text.startswith("at ") and not self.in_error:
                self.note(f"line {number}: a frame outside any error (the report's start is cut?)")
            return
        if text.startswith("at "):
            if error.kernel is None:     # the first frame is where the access happened
                self.set_frame(error, text[3:], number)
        elif text.startswith("by thread "):
            match = _BY_THREAD.match(text)
            if match:
                error.thread, error.block = match["thread"], match["block"]
        elif text.startswith("Address "):
            error.address = self.cap(text, number)
        elif text.startswith("and is ") and error.address is not None:
            error.address = self.cap(f"{error.address} {text}", number)
        elif text.startswith("and ") and error.what.endswith(" access"):
            more = _RACE_MORE.fullmatch(text)
            if more:                     # the other side of a race: the first one is said
                said = f"{error.what} and {more['access']}"
                error.what = self.cap(f"{said} {more['hazards']}" if more["hazards"] else said, number)
        elif text.startswith(("Read Thread ", "Write Thread ")):
            match = _HAZARD_THREAD.match(text)
            if match and error.kernel is None:
                error.thread = match["thread"]
                self.set_frame(error, match["frame"], number)

    def set_frame(self, error: SanitizerError, text: str, number: int) -> None:
        frame = _frame(text)
        if frame is None:
            error.frame_unreadable = True
            self.note(f"line {number}: a frame that cannot be read: {shorten(text.strip(), 80)}")
            return
        function, offset, location = frame
        error.kernel = self.cap(function, number)
        error.name = bare_name(error.kernel) if len(function) <= MAX_FIELD else error.kernel
        error.offset = offset
        error.location = self.cap(location, number) if location else None


def parse(text: str) -> Report:
    """The errors of compute-sanitizer's output `text`; other lines are ignored.  Never raises."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = str(text)
    reader = _Reader()
    for number, line in enumerate(text.splitlines(), 1):
        prefix = _PREFIX.match(line)
        if not prefix:
            continue                         # the program's own output
        if len(line) > MAX_LINE:
            reader.report.truncated = True
            reader.note(f"line {number}: {len(line)} characters, only the first {MAX_LINE} read")
            line = line[:MAX_LINE]
        rest = line[prefix.end():]
        body = rest.strip()
        if not body:
            continue
        indent = len(rest) - len(rest.lstrip(" \t"))
        if indent >= 2 or body.startswith(_DETAIL_START):
            reader.detail(body, number)
        else:
            reader.headline(body, number)
    report = reader.report
    if report.dropped:
        reader.note(f"{report.dropped} errors after the first {MAX_ERRORS} counted, not kept")
    seen = len(report.errors) + report.dropped
    if report.error_count is not None and report.summary and report.summary.startswith("ERROR") \
            and report.error_count != seen:
        reader.note(f"the summary counts {report.error_count} errors, the text shows {seen}")
    if report.summary is None and seen:
        reader.note("no ERROR SUMMARY line: the report may be cut short")
    if reader.more_notes:
        report.notes.append(f"... and {reader.more_notes} more notes")
    return report


# -- matching -----------------------------------------------------------------

def match(report: Report, launches: Sequence[Any]) -> List[Match]:
    """Each error of `report` with the log's launch of its kernel: `launches` are the log's
    `launch` records in the order written.  Names are compared exactly.  Of several launches
    of one kernel the last is named: under AOTI_DEBUG_SYNC=1 the faulting launch is the last
    of its kernel that started.  `candidates` says how many there were."""
    last: Dict[str, Tuple[int, Any]] = {}
    for record in launches:
        if getattr(record, "kind", None) != "launch":
            continue
        name = getattr(record, "name", None)
        if isinstance(name, str):
            count, _ = last.get(name, (0, None))
            last[name] = (count + 1, record)
    out = []
    for error in report.errors:
        count, record = last.get(error.name, (0, None)) if error.name is not None else (0, None)
        out.append(Match(error, record, count))
    return out
