"""`aoti-debug replay D` (or `--dir D`): re-run level-10 dumps and compare with what was recorded."""

from __future__ import annotations

import os
import sys

from . import add_dump_dir, allow_modules, dump_dir, reading
from ..cli import UsageError, check_tolerances, echo, undecided, verdict


def add_arguments(parser) -> None:
    add_dump_dir(parser)
    parser.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance (default: 1e-6)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default: 1e-5)")
    parser.add_argument("--package", metavar="P.pt2", default=None,
                        help="replay AOTI runs with this package (or artifact .so) instead of the "
                             "artifact copy kept in the dump directory")
    parser.add_argument("--trust-dump-code", action="store_true",
                        help="without --package, run the artifact copy kept in the dump directory (code "
                             "the dump holds: only for a dump you recorded yourself); without it such a "
                             "replay is refused")
    parser.add_argument("--library", metavar="PATH", action="append", default=[],
                        help="load this custom-op library (torch.ops.load_library) in the process that "
                             "replays AOTI runs, as `aoti-debug-run --library` does (repeatable)")
    parser.add_argument("--allow-module", metavar="MODULE", action="append", default=[],
                        help="let recorded Python calls run functions of MODULE and its submodules "
                             "(repeatable); without it only torch.ops operators are called")


def run(args) -> int:
    from ..analysis import completeness, replay
    args.dir = dump_dir(args, "replay")
    check_tolerances(args.atol, args.rtol)
    if args.package is not None and not os.path.isfile(args.package):
        raise UsageError(f"--package {args.package}: no such file")
    allow_modules(args.allow_module, load=False)
    for library in args.library:
        if not os.path.isfile(library):
            raise UsageError(f"--library {library}: no such file")
    with reading(args.dir):
        items, notes = replay.replay(args.dir, atol=args.atol, rtol=args.rtol, package=args.package,
                                     allow=args.allow_module, libraries=args.library,
                                     trust_dump_code=args.trust_dump_code)
        gaps = completeness.of_dump_folders(replay.folders(args.dir))
    echo(gaps.lines())
    echo(item.line() for item in items)
    echo(notes, file=sys.stderr)
    failed = sum(i.failed for i in items)
    unknown = [i.unreadable for i in items if i.unreadable]
    skipped = sum(bool(i.skipped) for i in items)
    passed = len(items) - failed - len(unknown) - skipped
    echo([f"{passed} passed, {failed} failed" + (f", {len(unknown)} unknown" if unknown else "")
          + (f", {skipped} skipped" if skipped else "")])
    if unknown and not failed and not gaps:   # nothing failed where the recorded files could be read
        raise undecided(unknown, "whether the replay matches the recording")
    return verdict(bool(failed), gaps)        # a failure is one whatever is missing
