"""`aoti-debug timeline LOGS... -o FILE`: a trace of one job's logs for Perfetto's UI and chrome://tracing."""

from __future__ import annotations

import os
import sys

from ..cli import INCOMPLETE, OK, UsageError, echo, verdict

FORMATS = ("json", "perfetto")


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG",
                        help="logs or dump directories of one job (e.g. one log per rank), or globs of them")
    parser.add_argument("-o", "--output", default="timeline.json", metavar="FILE",
                        help="where to write the trace (default: timeline.json); a .pftrace or "
                             ".perfetto-trace name writes Perfetto's protobuf format")
    parser.add_argument("--format", choices=FORMATS,
                        help="json: Chrome trace-event JSON; perfetto: Perfetto's protobuf trace, "
                             "needs the perfetto package (default: from the output's suffix, else json)")


def run(args) -> int:
    from ..analysis import load, timeline, trace_json, trace_perfetto
    from ..analysis.nan_origin import capped
    from ..analysis.untrusted import InputError
    fmt = args.format or ("perfetto" if args.output.endswith(trace_perfetto.SUFFIXES) else "json")
    writer = trace_perfetto if fmt == "perfetto" else trace_json
    try:
        if writer is trace_perfetto:       # before any log is read: say it at once
            trace_perfetto.require()
        log = load.read_many(args.paths)
    except (InputError, trace_perfetto.Unavailable) as exc:
        raise UsageError(str(exc)) from None
    model = timeline.build(log)
    try:
        with open(args.output, "wb") as f:
            try:
                writer.write(model, f)
            except InputError:              # a log that changed while it was read: no half trace
                os.unlink(args.output)
                raise
    except OSError as exc:
        raise UsageError(f"{args.output}: cannot be written ({exc.strerror or exc}); "
                         "expected a path to a file in a writable directory") from None
    echo([f"wrote {os.path.abspath(args.output)}: {model.summary()}"] + model.gaps.lines())
    echo(capped([f"note: {note}" for note in model.notes]))
    # what could not be read is not passed over: on stderr, so that it is seen with stdout redirected
    echo(capped([f"aoti-debug timeline: unknown in the trace: {why}" for why in model.unreadable]), file=sys.stderr)
    status = verdict(False, model.gaps)      # a trace of a run with a gap is written, and not clean
    # values that could not be read leave the trace short of the run: not clean either
    return INCOMPLETE if status == OK and model.unreadable else status
