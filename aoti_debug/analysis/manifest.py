"""manifest.jsonl of a level-10 dump folder (docs/dumps.md), read and checked.

Every line must be a JSON object of a kind the runtimes write, with every field
they write of the type they write it (unknown extra fields are ignored).  A
line that is not, anywhere in the file, is an `InputError` naming the file and
line: the readers would otherwise build records from half a line.  The one
exception is a torn last line (no newline at its end, not JSON): the process
died while writing it, and it is skipped, as the format allows.

A folder holds one family of lines: the calls of a Python `-calls` folder, or
the `run` / `launch` / `run-end` lines of one run (all with the same `run`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Dict, List, Tuple

from .untrusted import InputError, has_control, lines, reason, shorten

MANIFEST = "manifest.jsonl"
Entry = Dict[str, Any]
_MAX_COUNT = 2**63                  # counts and numbers are int64 in the C++ shim
_MAX_TIME = 253402300800            # year 10000: a later time cannot be written as a timestamp


# -- field types: (test, what is expected) -------------------------------------------

Check = Tuple[Callable[[Any], bool], str]


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < _MAX_COUNT


def _seconds(v: Any) -> bool:
    return type(v) in (int, float) and 0 <= v < _MAX_TIME    # also false for NaN


def _line_text(v: Any) -> bool:
    return isinstance(v, str) and not has_control(v)


def _label_name(v: Any) -> bool:
    """What a log label can hold after its role: `in <name>:`."""
    return _line_text(v) and v != "" and ":" not in v


def _file_name(v: Any) -> bool:
    """A file in the folder itself: no path, so that no file outside it is read."""
    return (v is None or (_line_text(v) and v not in ("", ".", "..") and "/" not in v
                          and not v.startswith(" ")))


COUNT: Check = (_count, "a whole number from 0 to 2**63-1")
TIME: Check = (_seconds, "a number of seconds since 1970, before the year 10000")
TEXT: Check = (_line_text, "a string without control characters")
FREE_TEXT: Check = (lambda v: isinstance(v, str), "a string")
TEXT_OR_NULL: Check = (lambda v: v is None or _line_text(v), "a string without control characters, or null")
WORD: Check = (lambda v: _line_text(v) and not any(c.isspace() for c in v),
               "a string without spaces or control characters")
NAME: Check = (_label_name, "a non-empty string without `:` or control characters")
NAMES: Check = (lambda v: isinstance(v, list) and all(_label_name(n) for n in v),
                "a list of non-empty strings without `:` or control characters")
FILE: Check = (_file_name, "the name of a file in the dump folder (no `/`), or null")
ROLE: Check = (lambda v: v in ("in", "out", "inout"), '"in", "out" or "inout"')
# the artifact copy is a file of the dump directory, beside the run folder: replay loads nothing else
SO_COPY: Check = (lambda v: isinstance(v, str) and v.startswith("../") and _file_name(v[3:]),
                  "../<file name>, a file of the dump directory")
SHA256: Check = (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None,
                 "64 lowercase hexadecimal digits")


_SITE_LINE_KINDS = ("  module: ", "  source-line: ", "  output-source: ", "  output-module: ", "  holds: ")


def _site_lines(v: Any) -> bool:
    """A launch's `module:` / `source-line:` / `output-source:` / `output-module:` /
    `holds:` body lines (docs/log-format.md 1.1), each ending in a newline."""
    return isinstance(v, str) and (v == "" or (v.endswith("\n") and all(
        line.startswith(_SITE_LINE_KINDS) and _line_text(line)
        for line in v[:-1].split("\n"))))


SITE_LINES: Check = (_site_lines, 'lines "  module: ...", "  source-line: ...", "  output-source: ...", '
                     '"  output-module: ..." or "  holds: ...", each ending in a newline')


# checked op by op where they are read (ops.decode)
OPS: Check = (lambda v: isinstance(v, list), "a list of ops")


def one_of(*values: str) -> Check:
    return (lambda v: v in values), " or ".join(json.dumps(v) for v in values)


def _call_file(v: Any) -> bool:
    return v is None or (_file_name(v) and v.endswith(("_inputs.pt", "_outputs.pt")))


RUN_FILE = {"name": NAME, "role": ROLE, "file": FILE}
CALL_FILE = {"file": (_call_file, "null or a file name of the folder ending _inputs.pt or _outputs.pt")}
FILE_OPTIONAL = {"bytes": COUNT, "error": FREE_TEXT}


# (kind, event) -> (required fields, optional fields); `files` is checked element by element
FILES: Check = (lambda v: isinstance(v, list), "a list of objects")
_RUN_LINE = {"run": COUNT, "files": FILES, "bytes": COUNT, "time": TIME}
_LAUNCH = {**_RUN_LINE, "index": COUNT, "id": TEXT, "kernel": TEXT, "nodes": WORD, "source": TEXT}
_CALL = {"index": COUNT, "name": TEXT, "module": TEXT_OR_NULL, "qualname": TEXT_OR_NULL,
         "files": FILES, "time": TIME}
LINES: Dict[Tuple[str, str], Tuple[Dict[str, Check], Dict[str, Check]]] = {
    ("run", "run"): ({**_RUN_LINE, "status": one_of("ok", "incomplete"), "model": TEXT, "pid": COUNT,
                      "inputs": NAMES}, {"thread": COUNT, "rank": COUNT, "world": COUNT, "so": TEXT, "so_copy": SO_COPY, "so_sha256": SHA256, "error": FREE_TEXT}),
    ("launch", "before"): ({**_LAUNCH, "status": one_of("running")}, {"lines": SITE_LINES, "ops": OPS}),
    ("launch", "after"): ({**_LAUNCH, "status": one_of("ok", "incomplete")}, {"lines": SITE_LINES}),
    ("run-end", "run-end"): ({**_RUN_LINE, "status": one_of("ok"), "model": TEXT, "launches": COUNT}, {}),
    ("call", "before"): ({**_CALL, "status": one_of("running")}, {"error": FREE_TEXT}),
    ("call", "after"): ({**_CALL, "status": one_of("ok", "incomplete", "raised")}, {"error": FREE_TEXT}),
}
_KNOWN = ", ".join(f"{kind}/{event}" for kind, event in LINES)


def family(entry: Entry) -> str:
    return "calls" if entry["kind"] == "call" else "run"


# -- reading ------------------------------------------------------------------------

def read(folder: str) -> List[Tuple[int, Entry]]:
    """(line number, entry) of every line of the folder's manifest, each checked."""
    path = os.path.join(folder, MANIFEST)
    out: List[Tuple[int, Entry]] = []
    for number, raw, ended in lines(path):
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:      # UnicodeDecodeError is a ValueError
            if not ended:
                break                       # the torn last line of a process that died
            raise InputError(f"{path}:{number}: not a JSON line ({reason(exc)})") from None
        if b"\\u" in raw:
            entry = _without_surrogates(entry)
        check(entry, path, number)
        if out:
            _same_folder(out[0], (number, entry), path)
        out.append((number, entry))
    return out


def _without_surrogates(entry: Any) -> Any:
    """`entry` with each lone surrogate (JSON's `\\ud800`: the Python runtime writes a path
    from os.fsdecode that way) as the text `\\ud800`, as the log writers write it: a lone
    surrogate cannot be printed or written as UTF-8."""
    def plain(v: Any) -> Any:
        return v.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(v, str) else v

    top = [plain(entry)]
    pending = [top]
    while pending:                  # no recursion: the JSON may nest as deep as json.loads allows
        v = pending.pop()
        if isinstance(v, list):
            for i, x in enumerate(v):
                v[i] = plain(x)
            pending += [x for x in v if isinstance(x, (list, dict))]
        elif isinstance(v, dict):
            items = [(plain(k), plain(x)) for k, x in v.items()]
            v.clear()
            v.update(items)
            pending += [x for _, x in items if isinstance(x, (list, dict))]
    return top[0]


def check(entry: Any, path: str, number: int) -> None:
    """Raise InputError unless `entry` is a line the runtimes write (see LINES)."""
    here = f"{path}:{number}"
    if not isinstance(entry, dict):
        raise InputError(f"{here}: not a JSON object")
    kind, event = entry.get("kind"), entry.get("event")
    fields = LINES.get((kind, event)) if isinstance(kind, str) and isinstance(event, str) else None
    if fields is None:
        raise InputError(f"{here}: kind {_shown(kind)} with event {_shown(event)} is not a line "
                         f"aoti-debug writes (expected one of {_KNOWN})")
    required, optional = fields
    _fields(entry, required, optional, here, "")
    each = CALL_FILE if kind == "call" else RUN_FILE
    for i, f in enumerate(entry["files"]):
        if not isinstance(f, dict):
            raise InputError(f"{here}: field 'files[{i}]' is {_shown(f)} (expected an object)")
        _fields(f, each, FILE_OPTIONAL, here, f"files[{i}].")
    if kind == "launch" and entry["id"] != f"{entry['run']}.{entry['index']}":
        raise InputError(f"{here}: field 'id' is {_shown(entry['id'])} (expected "
                         f"\"{entry['run']}.{entry['index']}\", from 'run' and 'index')")


def _fields(entry: Dict[str, Any], required: Dict[str, Check], optional: Dict[str, Check],
            here: str, prefix: str) -> None:
    for name, (test, expected) in required.items():
        if name not in entry:
            raise InputError(f"{here}: field '{prefix}{name}' is missing (expected {expected})")
    for name, (test, expected) in {**required, **optional}.items():
        if name in entry and not test(entry[name]):
            raise InputError(f"{here}: field '{prefix}{name}' is {_shown(entry[name])} "
                             f"(expected {expected})")


def _same_folder(first: Tuple[int, Entry], line: Tuple[int, Entry], path: str) -> None:
    (n0, e0), (n, e) = first, line
    if family(e) != family(e0):
        raise InputError(f"{path}:{n}: a {e['kind']} line in a folder whose line {n0} is a "
                         f"{e0['kind']} line (a dump folder holds Python calls or one AOTI run)")
    if family(e) == "run" and e["run"] != e0["run"]:
        raise InputError(f"{path}:{n}: field 'run' is {e['run']}, but line {n0} says {e0['run']} "
                         "(a dump folder holds one run)")


def _shown(value: Any) -> str:
    return shorten(json.dumps(value))
