"""`aoti-debug blackbox recover DIR`: the black box rings that crashed or killed
processes left, as dump folders (analysis/blackbox.py)."""

from __future__ import annotations

import sys

from . import reading
from ..cli import FOUND, OK, USAGE, echo, printable


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    rec = sub.add_parser("recover", help="write the ring of each process that has ended as a dump folder "
                                         "and say which launch was in flight",
                         description="write the ring of each process that has ended as a dump folder "
                                     "<pid>-blackbox and say which launch was in flight; a ring whose "
                                     "process still runs is left alone")
    rec.add_argument("path", metavar="DIR", help="the dump directory (AOTI_DEBUG_DUMP_DIR), or one ring file")
    rec.add_argument("-o", "--out", metavar="DIR", default="", help="where to write the folders "
                     "(default: beside each ring)")


def run(args) -> int:
    from ..analysis import blackbox
    with reading():
        done = blackbox.recover(args.path, args.out)
    lines = []
    for r in done:
        if r.status == "ok":
            lines += [f"recovered {printable(r.ring)} into {r.text.splitlines()[0]}"] + r.text.splitlines()[1:]
        else:
            print(f"aoti-debug blackbox: {printable(r.text)}", file=sys.stderr)
    echo(lines)
    if any(r.status == "error" for r in done):
        return USAGE
    return OK if any(r.status == "ok" for r in done) else FOUND
