"""A `Timeline` as Chrome's trace-event JSON: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.

Complete events (`ph: X`) for slices, instants (`ph: i`, thread or process
scoped) and metadata (`ph: M`: process and thread names and sort order).
Perfetto's UI and chrome://tracing both open it.  `ts` and `dur` are µs.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Dict, Iterator

from .timeline import Instant, Slice, Timeline

NAME = "json"


def render(timeline: Timeline) -> bytes:
    return b"".join(chunks(timeline))


def write(timeline: Timeline, out: BinaryIO) -> None:
    """The trace written an event at a time: a long run's values are never all in memory."""
    for chunk in chunks(timeline):
        out.write(chunk)


def chunks(timeline: Timeline) -> Iterator[bytes]:
    yield b'{"traceEvents":['
    for n, event in enumerate(_events(timeline)):
        # no NaN or Infinity can reach the file: every value is text or a whole number
        yield (b"," if n else b"") + json.dumps(event, allow_nan=False, separators=(",", ":")).encode("ascii")
    yield b'],"displayTimeUnit":"ms"}'


def _events(timeline: Timeline) -> Iterator[Dict[str, Any]]:
    for rank, process in enumerate(timeline.processes):
        pid = process.pid
        yield _meta("process_name", pid, pid, {"name": process.name})
        yield _meta("process_sort_index", pid, pid, {"sort_index": rank})
        for order, track in enumerate(process.tracks):
            yield _meta("thread_name", pid, track.tid, {"name": track.name})
            yield _meta("thread_sort_index", pid, track.tid, {"sort_index": order})
        for track in process.tracks:
            # in nesting order, so a viewer that keeps the file's order for equal
            # times puts an enclosing slice first
            yield from (_complete(s, pid, track.tid) for s in track.slices)
            yield from (_instant(i, pid, track.tid, "t") for i in track.instants)
        yield from (_instant(i, pid, pid, "p") for i in process.instants)


def _meta(name: str, pid: int, tid: int, args: Dict[str, Any]) -> Dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _complete(piece: Slice, pid: int, tid: int) -> Dict[str, Any]:
    return {"ph": "X", "name": piece.name, "cat": piece.kind, "ts": piece.start,
            "dur": piece.end - piece.start, "pid": pid, "tid": tid, "args": piece.args}


def _instant(instant: Instant, pid: int, tid: int, scope: str) -> Dict[str, Any]:
    return {"ph": "i", "name": instant.name, "cat": instant.kind, "ts": instant.ts, "s": scope,
            "pid": pid, "tid": tid, "args": instant.args}
