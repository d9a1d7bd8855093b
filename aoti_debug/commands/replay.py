"""`aoti-debug replay --dir D`: re-run level-10 dumps and compare with what was recorded."""

from __future__ import annotations

import os
import sys

from ..cli import FOUND, OK, UsageError


def add_arguments(parser) -> None:
    parser.add_argument("--dir", required=True, metavar="D",
                        help="the dump directory (AOTI_DEBUG_DUMP_DIR) or one dump folder in it")
    parser.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance (default: 1e-6)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default: 1e-5)")
    parser.add_argument("--package", metavar="P.pt2", default=None,
                        help="run this package instead of the .so named in a run's manifest")


def run(args) -> int:
    from ..analysis import replay
    if args.atol < 0 or args.rtol < 0:
        raise UsageError(f"--atol {args.atol:g} / --rtol {args.rtol:g}: tolerances must be >= 0")
    if args.package is not None and not os.path.isfile(args.package):
        raise UsageError(f"--package {args.package}: no such file")
    try:
        items, notes = replay.replay(args.dir, atol=args.atol, rtol=args.rtol, package=args.package)
    except replay.ReplayInputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{args.dir}: {exc}") from None
    for item in items:
        print(item.line())
    for note in notes:
        print(note, file=sys.stderr)
    failed = sum(not i.ok for i in items)
    print(f"{len(items) - failed} passed, {failed} failed")
    return FOUND if failed else OK
