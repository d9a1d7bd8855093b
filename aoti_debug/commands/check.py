"""`aoti-debug check DUMP_DIR` (or `--dir`): every dumped launch's ops re-run in
eager and its recorded outputs judged (analysis/check.py)."""

from __future__ import annotations

import sys

from . import add_dump_dir, add_library, allow_modules, dump_dir, load_libraries, reading
from ..cli import INCOMPLETE, OK, UsageError, echo, verdict


def add_arguments(parser) -> None:
    add_dump_dir(parser)
    parser.add_argument("--atol", type=float, default=None,
                        help="absolute tolerance against float64 (default: rtol times the output's "
                             "largest magnitude)")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance against float64 (default per dtype: float32 1e-5, "
                             "float16 4e-3, bfloat16 3e-2, float64 1e-10)")
    parser.add_argument("--allow-module", metavar="MODULE", action="append", default=[],
                        help="import the Python module MODULE first, so that the custom ops it registers "
                             "can be re-run (repeatable); without it and --library only ops already "
                             "registered (aten, prims) run")
    add_library(parser)


def run(args) -> int:
    from ..analysis import check, completeness
    from ..analysis.replay import folders, nested
    root = dump_dir(args, "check")
    for flag, value in (("--atol", args.atol), ("--rtol", args.rtol)):
        if value is not None and not value >= 0:     # also refuses NaN, which would pass everything
            raise UsageError(f"{flag} {value:g}: a tolerance must be a number >= 0")
    allow_modules(args.allow_module, load=True)
    load_libraries(args.library)
    with reading(root):
        found = check.check(root, atol=args.atol, rtol=args.rtol)
        gaps = completeness.of_dump_folders(folders(root))
    echo(gaps.lines())
    echo(launch.line_text() for launch in found)
    echo([f"note: {d}: a dump directory inside {root}, not checked (check it on its own)"
          for d in nested(root)], file=sys.stderr)
    failed = [launch for launch in found if launch.failed]
    checked = sum(launch.checkable for launch in found)
    if failed:
        first = failed[0]
        out = next(o for o in first.compared if o.outside)
        echo([f"first launch beyond tolerance: {first.ident} {first.kernel}",
              f"  folder: {first.folder}",
              f"  output {out.name} (holds {out.node}): {out.outside} of {out.numel} elements beyond "
              f"{out.tolerance}; max_abs={out.max_abs:.3g} against eager"
              + (f", max_ulp={out.max_ulp:.3g} against {out.against}" if out.max_ulp is not None else ""),
              f"  {out.worst}",
              f"  ops: {first.ops_text()}",
              f"  source: {first.where(out.name)}"])
    echo([f"{len(found)} launch(es): {checked - len(failed)} within tolerance, {len(failed)} beyond, "
          f"{len(found) - checked} not checkable"])
    status = verdict(bool(failed), gaps)     # a launch beyond tolerance is one whatever is missing
    if status == OK and (len(found) - checked) * 2 > len(found):
        # most of the run unjudged is not a clean run
        echo([f"not a verdict: {len(found) - checked} of {len(found)} launches could not be checked "
              "(each line above says why)"])
        return INCOMPLETE
    return status
