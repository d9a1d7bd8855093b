"""`aoti-debug extract LAUNCH --dir DUMP_DIR -o DIR`: one dumped launch as a standalone
folder for a bug report (analysis/extract.py)."""

from __future__ import annotations

from . import add_library, allow_modules, load_libraries
from ..cli import OK, UsageError, echo


def add_arguments(parser) -> None:
    parser.add_argument("launch", metavar="LAUNCH", help="the launch id M:R.K, as the log and nan-origin name it (e.g. ranker:1.4), or R.K as a run folder's manifest writes it")
    parser.add_argument("--dir", metavar="D", required=True,
                        help="the dump directory (AOTI_DEBUG_DUMP_DIR) or one run folder in it")
    parser.add_argument("-o", "--out", metavar="DIR", required=True, help="the folder to write")
    parser.add_argument("--package", metavar="P", help="the .pt2 package the dump was made with: its kernel's "
                        "source is copied into the folder")
    parser.add_argument("--allow-module", metavar="MODULE", action="append", default=[],
                        help="import the Python module MODULE first, so that the custom ops it registers can be "
                             "written (repeatable)")
    add_library(parser)


def run(args) -> int:
    from ..analysis import extract
    from ..analysis.untrusted import InputError
    allow_modules(args.allow_module, load=True)
    load_libraries(args.library)
    try:
        written = extract.extract(args.dir, args.launch, args.out, package=args.package)
    except extract.NotExtractable as exc:
        raise UsageError(f"launch {args.launch} cannot be extracted: {exc}") from None
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{exc.filename or args.out}: {exc.strerror or exc}") from None
    echo([f"wrote {path}" for path in written] + [f"run it: python {written[-1]}"])
    return OK
