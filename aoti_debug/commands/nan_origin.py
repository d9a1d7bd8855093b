"""`aoti-debug nan-origin LOG_OR_DUMP_DIR`: name the launch or call where NaN/Inf first appeared."""

from __future__ import annotations

from . import reading
from ..cli import UsageError, echo, undecided, verdict


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG_OR_DUMP_DIR",
                        help="a log written at AOTI_DEBUG_LOGLEVEL=5, or a directory: its *.log files, "
                             "else its level-10 dumps (AOTI_DEBUG_DUMP_DIR); several (paths or globs) "
                             "for the processes of one job, e.g. one log per rank")
    parser.add_argument("--rerun-ops", action="store_true",
                        help="from a level-10 dump, re-run the origin launch's recorded ops in eager on its "
                             "dumped inputs to name the op that made NaN/Inf (only operators that compute "
                             "run: docs/dumps.md); without it nothing from the dump is run")


def run(args) -> int:
    from ..analysis import load, nan_origin
    with reading():
        log = load.read_many(args.paths)
    level = log.level_hint()
    if level < 5:
        raise UsageError(f"{log.path}: has no tensor statistics (it looks like a level-{level} log); "
                         "nan-origin needs a log written at level 5 (AOTI_DEBUG_LOGLEVEL=5)")
    if len(log.processes()) > 1:     # a job: each process on its own, in the order they went bad
        ranked = nan_origin.by_process(log, args.rerun_ops)
        finding, lines = ranked.whole, nan_origin.ranked_text(ranked)
    else:
        finding = nan_origin.find(log, args.rerun_ops)
        lines = nan_origin.text(finding)
    if not finding.found and finding.unreadable and not finding.stopped_short:
        raise undecided(finding.unreadable, "whether NaN/Inf appear")
    echo(lines)
    first = ranked.first if len(log.processes()) > 1 else finding
    # an origin found before the first gap stands; one after it may have an earlier cause.
    # Without NaN/Inf, a bad scale or saturated float8 values are the finding (exit 1), never clean
    return verdict(finding.flagged, finding.gaps,
                   first is not None and finding.gaps.before(log, first.record))
