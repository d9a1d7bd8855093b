"""`aoti-debug build-runner`: build the C++ runner (once) and print its path."""

from __future__ import annotations

import sys

from ..cli import FOUND, OK


def add_arguments(parser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="rebuild even if a runner for these sources and this torch exists")


def run(args) -> int:
    from .. import runner
    try:
        path = runner.build_runner(force=args.force)
    except runner.RunnerBuildError as exc:
        print(f"aoti-debug build-runner: {exc}", file=sys.stderr)
        return FOUND
    print(path)
    return OK
