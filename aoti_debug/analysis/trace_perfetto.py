"""A `Timeline` as Perfetto's protobuf trace (`.pftrace`), built with the `perfetto` package.

One track descriptor per process and per thread track (process and thread
descriptors carry the ids and names), then TrackEvents in time order on one
packet sequence: a slice is a begin and an end, instants are instants, args
are debug annotations.  Names are written out, never interned, so no packet
needs incremental state.  Timestamps are ns: the records' µs times 1000.

`perfetto` is imported only here and only when this format is asked for.
"""

from __future__ import annotations

import heapq
from typing import Any, BinaryIO, Iterator, List, Tuple

from .timeline import Slice, Timeline, Track

NAME = "perfetto"
SUFFIXES = (".pftrace", ".perfetto-trace")
_SEQUENCE = 1
_INT64 = 2**63
_BEGIN, _END, _INSTANT = "begin", "end", "instant"


class Unavailable(Exception):
    """The perfetto package cannot be imported: one line, saying how to install it."""


def require():
    """(TraceProtoBuilder, the trace protos module); raises Unavailable."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    except ImportError as exc:
        raise Unavailable(f"writing a Perfetto trace needs the perfetto package, which cannot be "
                          f"imported ({exc}): pip install perfetto (or pip install 'aoti-debug[timeline]'), "
                          "or write the JSON trace (-o timeline.json), which needs nothing") from None
    return TraceProtoBuilder, perfetto_trace_pb2


def render(timeline: Timeline) -> bytes:
    builder_class, pb = require()
    builder = builder_class()

    def packet():
        p = builder.add_packet()
        p.trusted_packet_sequence_id = _SEQUENCE
        return p

    # the root track: the UI orders process and thread tracks by sibling_order_rank
    # only when it asks for explicit order
    root = packet()
    root.first_packet_on_sequence = True
    root.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    root.track_descriptor.uuid = 0
    root.track_descriptor.process_ordering = pb.TrackDescriptor.PROCESS_ORDERING_EXPLICIT
    root.track_descriptor.thread_ordering = pb.TrackDescriptor.THREAD_ORDERING_EXPLICIT

    streams: List[Iterator[Tuple[int, str, Any, int]]] = []
    uuid = 0
    for rank, process in enumerate(timeline.processes):
        uuid += 1
        process_uuid = uuid
        d = packet().track_descriptor
        d.uuid, d.name, d.sibling_order_rank = process_uuid, process.name, rank
        d.process.pid, d.process.process_name = process.pid, process.name
        streams.append(iter([(i.ts, _INSTANT, i, process_uuid) for i in process.instants]))
        for order, track in enumerate(process.tracks):
            uuid += 1
            d = packet().track_descriptor
            d.uuid, d.parent_uuid, d.name, d.sibling_order_rank = uuid, process_uuid, track.name, order
            d.thread.pid, d.thread.tid, d.thread.thread_name = process.pid, track.tid, track.name
            streams.append(_track_events(track, uuid))

    for ts, kind, what, track_uuid in heapq.merge(*streams, key=lambda e: e[0]):
        p = packet()
        p.timestamp = ts * 1000
        event = p.track_event
        event.track_uuid = track_uuid
        if kind == _END:
            event.type = pb.TrackEvent.TYPE_SLICE_END
            continue
        event.type = pb.TrackEvent.TYPE_SLICE_BEGIN if kind == _BEGIN else pb.TrackEvent.TYPE_INSTANT
        event.name = what.name
        event.categories.append(what.kind)
        for key, value in what.args.items():
            annotation = event.debug_annotations.add()
            annotation.name = key
            _annotate(annotation, value)
    return builder.serialize()


def write(timeline: Timeline, out: BinaryIO) -> None:
    out.write(render(timeline))


def _track_events(track: Track, uuid: int) -> Iterator[Tuple[int, str, Any, int]]:
    """The track's begins and ends in time order (its slices nest), instants after what
    happens at their time."""
    events: List[Tuple[int, str, Any, int]] = []
    stack: List[Slice] = []
    for piece in track.slices:
        while stack and stack[-1].end <= piece.start:
            events.append((stack[-1].end, _END, stack.pop(), uuid))
        events.append((piece.start, _BEGIN, piece, uuid))
        stack.append(piece)
    while stack:
        events.append((stack[-1].end, _END, stack.pop(), uuid))
    marks: List[Tuple[int, str, Any, int]] = [(i.ts, _INSTANT, i, uuid) for i in track.instants]
    return iter(heapq.merge(events, marks, key=lambda e: e[0]))


def _annotate(annotation, value: Any) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            entry = annotation.dict_entries.add()
            entry.name = key
            _annotate(entry, sub)
    elif isinstance(value, list):
        for sub in value:
            _annotate(annotation.array_values.add(), sub)
    elif isinstance(value, bool):
        annotation.bool_value = value
    elif isinstance(value, int) and -_INT64 <= value < _INT64:
        annotation.int_value = value
    else:
        annotation.string_value = str(value)

