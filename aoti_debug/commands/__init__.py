"""One module per CLI command: add_arguments(parser) and run(args) -> exit status."""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence


@contextlib.contextmanager
def reading(where: Optional[str] = None) -> Iterator[None]:
    """What a command reads is the user's input: a refusal of it (InputError: a
    log or dump that is not one, damaged, hostile) is a usage error in its own
    words, and with `where`, so is an OS error reading it (named by `where`)."""
    from ..analysis.untrusted import InputError
    from ..cli import UsageError
    try:
        yield
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        if where is None:
            raise
        raise UsageError(f"{where}: {exc}") from None


def allow_modules(modules: Sequence[str], load: bool) -> None:
    """Check each `--allow-module` name, and with `load` import it now, so that the
    ops it registers can run; a UsageError names the one that fails."""
    import importlib

    from ..analysis import runnable
    from ..cli import UsageError
    for module in modules:
        if not runnable.module_name(module):
            raise UsageError(f"--allow-module {module!r}: not a module name (e.g. mylib or mylib.ops)")
        if load:
            try:
                importlib.import_module(module)
            except Exception as exc:       # the user's module: say what it raised
                raise UsageError(f"--allow-module {module}: importing it raised {type(exc).__name__}: {exc}") from None


def add_library(parser) -> None:
    parser.add_argument("--library", metavar="LIB.so", action="append", default=[],
                        help="load this C++ op library first (torch.ops.load_library), so that the custom "
                             "ops it registers can be re-run (repeatable); found as `aoti-debug-run "
                             "--library` finds it: a name without '/' is a file of the current directory, "
                             "else searched on the library path as dlopen does")


def load_libraries(libraries: Sequence[str]) -> None:
    """Load each `--library` as the C++ runner does (cpp_runtime/runner/aoti_debug_run.cpp,
    library_path); a UsageError names the one that fails and dlopen's reason."""
    import ctypes
    import os

    import torch

    from ..cli import UsageError, printable
    for lib in libraries:
        try:
            if "/" in lib or os.path.isfile(lib):
                torch.ops.load_library(lib)
            else:
                # torch.ops.load_library would take a bare name for a file here;
                # dlopen searches the library path for it, as the runner's does
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                torch.ops.loaded_libraries.add(lib)
        except OSError as exc:
            why = str(exc.__cause__ or exc)     # load_library's own error wraps dlopen's
            raise UsageError(f"--library {printable(lib)}: cannot load it: {printable(why)}") from None


def add_dump_dir(parser) -> None:
    """The dump directory, as `COMMAND DUMP_DIR` or `COMMAND --dir DUMP_DIR`."""
    parser.add_argument("path", nargs="?", metavar="DUMP_DIR",
                        help="the dump directory (AOTI_DEBUG_DUMP_DIR) or one run folder in it")
    parser.add_argument("--dir", metavar="D", help="the same, as an option")


def dump_dir(args, command: str) -> str:
    """The dump directory add_dump_dir's arguments give; a UsageError unless exactly one is given."""
    from ..cli import UsageError
    if args.path is not None and args.dir is not None and args.path != args.dir:
        raise UsageError(f"two dump directories given ({args.path} and --dir {args.dir}); give one")
    root = args.dir if args.dir is not None else args.path
    if root is None:
        raise UsageError(f"no dump directory given (expected `aoti-debug {command} DUMP_DIR`, or --dir DUMP_DIR)")
    return root
