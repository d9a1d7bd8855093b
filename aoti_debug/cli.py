"""The `aoti-debug` command line: a table of commands with fixed exit codes.

Each command lives in its own module and is imported only when run, so
`aoti-debug info` does not pay for the analysis code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import List, Optional

OK = 0            # success; for checks: nothing found / everything agrees
FOUND = 1         # a check found something: a failure, a NaN origin, a divergence
USAGE = 2         # bad command line or unreadable input
CRASHED = 3       # the run in the log or dump crashed or never finished (said first)
INCOMPLETE = 4    # records or tensors of the run were lost (said first), or most launches unjudged
CLOSED = 141      # the reader of our output went away (`| head`): 128 + SIGPIPE, as a shell says

EXIT_STATUS = f"""exit status (every command):
  {OK}    ok; for checks: nothing found, everything agrees, over a whole run
  {FOUND}    a check found something: a NaN origin, a divergence, a launch beyond tolerance
       (found before any gap below, which is said with it)
  {USAGE}    bad usage, or input that cannot be read
  {CRASHED}    the run never finished: crashed, or cut short (no end record of a launch,
       call or run); what is missing is said first
  {INCOMPLETE}    records or tensors of the run were lost: the logger's "records lost" note,
       a recorder that stopped (a limit, a full disk), a dumped file that is absent;
       or `check` could judge less than half of the run's launches
  {CLOSED}  the output's reader went away (e.g. | head)"""

# name -> (module implementing add_arguments(parser) and run(args) -> int, one-line help)
COMMANDS = {
    "info": ("aoti_debug.commands.info", "show the resolved settings, where each came from, and the system"),
    "nan-origin": ("aoti_debug.commands.nan_origin", "name the first launch or call that turned finite inputs into NaN/Inf"),
    "diff": ("aoti_debug.commands.diff", "align two logs launch by launch and name the first diverging launch"),
    "report": ("aoti_debug.commands.report", "write one self-contained HTML page: timeline, statistics, NaN origin, divergence"),
    "timeline": ("aoti_debug.commands.timeline", "write a trace of one job's logs (one process per rank) for ui.perfetto.dev or chrome://tracing"),
    "replay": ("aoti_debug.commands.replay", "re-run level-10 dumps (Python calls, AOTI runs) and compare with the recorded outputs"),
    "check": ("aoti_debug.commands.check", "re-run each dumped launch's ops in eager (its dtype and float64) and name the first launch beyond tolerance"),
    "extract": ("aoti_debug.commands.extract", "write one dumped launch as a standalone folder (script, inputs, kernel source) for a bug report"),
    "blackbox": ("aoti_debug.commands.blackbox", "recover the black box rings that crashed or killed processes left, as dump folders"),
    "triage": ("aoti_debug.commands.triage", "run a command (or a package) under the guide's chain of checks and name the launch, kernel, line and layer that went wrong"),
    "build-runner": ("aoti_debug.commands.build_runner", "build aoti-debug-run, the C++ runner for .pt2 packages, and print its path"),
}


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if sys.stderr is None:   # closed: errors have nowhere to go, the exit status still says
        sys.stderr = open(os.devnull, "w")
    if sys.stdout is None:   # closed (`>&-`): what the command finds would be dropped unseen
        command = next((a for a in argv if not a.startswith("-")), None)
        say_error(command, "standard output is closed, so nothing could be printed "
                           "(give it a file or a pipe, e.g. > out.txt or > /dev/null)")
        return USAGE
    try:
        status = _main(argv)
        sys.stdout.flush()   # a buffered stdout meets the closed pipe here, not at exit
        return status
    except BrokenPipeError:
        # a closed pipe ends the command quietly; the interpreter's own final
        # flush of stdout must not raise again
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return CLOSED


def _main(argv: List[str]) -> int:
    from ._version import __version__
    parser = argparse.ArgumentParser(
        prog="aoti-debug",
        description="Debugging instrumentation for AOT Inductor artifacts.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"aoti-debug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    modules, parsers = {}, {}
    for name, (module_name, help_text) in COMMANDS.items():
        parsers[name] = p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:   # only the command that runs pays for its imports
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(p)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:            # said by the command's own parser, with its own usage line
            (parsers[args.command] if args.command else parser).error(
                "unrecognized arguments: " + " ".join(extra))
    except SystemExit as exc:
        return USAGE if exc.code not in (0, None) else OK
    if not args.command:
        parser.print_help()
        return USAGE
    # a log read again mid-answer (records.py) that changed meanwhile: said as bad input is
    from .analysis.untrusted import InputError
    try:
        return modules[args.command].run(args)
    except (UsageError, InputError) as exc:
        say_error(args.command, printable(str(exc)))
        return USAGE
    except BrokenPipeError:
        raise
    except OSError as exc:   # a file the command reads or writes that the system refuses
        what = f"{exc.filename}: " if exc.filename is not None else ""
        say_error(args.command, printable(f"{what}{exc.strerror or exc}"))
        return USAGE


def say_error(command: Optional[str], message: str) -> None:
    """The one stderr line of a failed command; nothing when stderr cannot be written."""
    try:
        print(f"aoti-debug {command}: {message}" if command else f"aoti-debug: {message}",
              file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def verdict(found: bool, gaps, before_gap: bool = True) -> int:
    """The exit status of a check over a run with `gaps` (analysis/completeness.py): a finding
    made before the first gap stands; else a run that never finished is CRASHED, one with
    records or tensors lost INCOMPLETE; never OK over a gap."""
    if found and before_gap:
        return FOUND
    if gaps.unfinished:
        return CRASHED
    if gaps.lost:
        return INCOMPLETE
    return FOUND if found else OK


class UsageError(Exception):
    """Bad arguments or unreadable input: printed in one line, exit status 2."""


def printable(text: str) -> str:
    """Text that may come from an input file, with its control characters escaped."""
    from .analysis.untrusted import printable as escape
    return escape(text)


def echo(lines, file=None) -> None:
    """Print lines that may hold text from an input file: one inert line each."""
    for line in lines:
        print(printable(line), file=file or sys.stdout)


def undecided(reasons: List[str], question: str) -> UsageError:
    """The exit-2 error of a check that found nothing where it could read, but could not read
    everything: `reasons` says why each file could not be read."""
    more = len(reasons) - 1
    return UsageError(f"{reasons[0]}; without it, {question} cannot be told"
                      + (f" ({more} more file(s) or record(s) cannot be read)" if more else ""))


def check_tolerances(atol: float, rtol: float) -> None:
    if not (atol >= 0 and rtol >= 0):       # also refuses NaN, which would make every value agree
        raise UsageError(f"--atol {atol:g} / --rtol {rtol:g}: tolerances must be >= 0")
