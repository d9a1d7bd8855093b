"""`aoti-debug report LOG -o report.html`: one self-contained HTML page about a log."""

from __future__ import annotations

import os

from . import reading
from ..cli import UsageError, echo, verdict


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG",
                        help="a log written by aoti-debug (level 5 shows statistics), or several of one job "
                        "(paths or globs, e.g. one log per rank): shown side by side")
    parser.add_argument("-o", "--output", default="report.html", metavar="HTML",
                        help="where to write the page (default: report.html)")
    parser.add_argument("--against", metavar="OTHER_LOG",
                        help="a level-5 log of the same model: highlight the first divergence from it")
    parser.add_argument("--run", type=int, default=1, metavar="R",
                        help="with --against: which run to compare (default: 1)")
    parser.add_argument("--rerun-ops", action="store_true",
                        help="from a level-10 dump, re-run the NaN/Inf origin launch's recorded ops in eager "
                             "to name the op, as nan-origin --rerun-ops does; without it nothing from the "
                             "dump is run")


def run(args) -> int:
    from ..analysis import diff, load, report
    from ..analysis.untrusted import InputError
    with reading():
        log = load.read_many(args.paths)
        other = load.read(args.against) if args.against else None
        divergence = diff.diff(log, other, run=args.run) if other is not None else None
    page = report.render(log, against=other, divergence=divergence, rerun_ops=args.rerun_ops)
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            try:
                page.write(f)
            except InputError:              # a log that changed while it was read: no half page
                os.unlink(args.output)
                raise
    except OSError as exc:
        raise UsageError(f"{args.output}: cannot be written ({exc.strerror})") from None
    echo([f"wrote {os.path.abspath(args.output)}: {page.summary}"])
    return verdict(False, page.gaps)         # a page of a run with a gap says so, and so does the exit
