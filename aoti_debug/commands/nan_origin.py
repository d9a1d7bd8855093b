"""`aoti-debug nan-origin LOG_OR_DUMP_DIR`: name the launch or call where NaN/Inf first appeared."""

from __future__ import annotations

from ..cli import CRASHED, FOUND, OK, UsageError, echo, undecided


def add_arguments(parser) -> None:
    parser.add_argument("path", metavar="LOG_OR_DUMP_DIR",
                        help="a log written at AOTI_DEBUG_LOGLEVEL=5, or a directory: its *.log files, "
                             "else its level-10 dumps (AOTI_DEBUG_DUMP_DIR)")


def run(args) -> int:
    from ..analysis import load, nan_origin
    from ..analysis.untrusted import InputError
    try:
        log = load.read(args.path)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    level = log.level_hint()
    if level < 5:
        raise UsageError(f"{args.path}: has no tensor statistics (it looks like a level-{level} log); "
                         "nan-origin needs a log written at level 5 (AOTI_DEBUG_LOGLEVEL=5)")
    finding = nan_origin.find(log)
    if not finding.found and finding.unreadable and not finding.stopped_short:
        raise undecided(finding.unreadable, "whether NaN/Inf appear")
    echo(nan_origin.text(finding))
    if finding.stopped_short:        # a crash outranks what was found before it
        return CRASHED
    return FOUND if finding.found else OK
