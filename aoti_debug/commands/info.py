"""`aoti-debug info`: the settings in force, their sources, and the system."""

from __future__ import annotations

import os
import platform
import sys

from .. import settings as settings_mod
from ..cli import OK, USAGE
from .._version import __version__


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    resolved, problems = settings_mod.read_with_problems()
    print("aoti-debug settings (highest precedence first: argument, AOTI_DEBUG_*, upstream alias, default)")
    for var in settings_mod.VARIABLES:
        value = getattr(resolved, var.field)
        shown = ",".join(value) if isinstance(value, tuple) else str(value)
        if isinstance(value, bool):
            shown = "1" if value else "0"
        shown = shown or "(all)"
        if len(shown) > 20:       # a long value on a line of its own keeps the columns
            print(f"  {var.name:<30} {shown}\n  {'':<30} {'':<20} from {resolved.sources[var.field]}")
        else:
            print(f"  {var.name:<30} {shown:<20} from {resolved.sources[var.field]}")
    unknown = settings_mod.unknown_variables()
    if unknown:     # a misspelt name leaves its setting "from default": say which name it was
        print()
        print("unknown variables (not read by aoti-debug)")
        for text in unknown:
            print(f"  {text}")
        problems = list(problems) + settings_mod.only_unknown()[-1:]
    from ..runtime import sink
    unusable = sink.try_destination(resolved.logdest, os.getpid())
    if unusable:     # tried as a run opens it: records would go to stderr instead
        problems = list(problems) + [f"AOTI_DEBUG_LOGDEST={resolved.logdest}: {unusable}; "
                                     "a run would write its records to stderr instead"]
    print()
    print("system")
    for key, value in system_facts():
        print(f"  {key:<30} {value}")
    if problems:
        print(file=sys.stderr)
        for text in problems:
            print(f"error: {text}", file=sys.stderr)
        return USAGE
    return OK


def torch_support() -> str:
    """Whether aoti-debug is tested with this torch, tries it, or cannot hook into it."""
    try:
        from ..codegen_patches import adapter
        status, text = adapter.support()
    except Exception as exc:
        return f"support unknown: {type(exc).__name__}: {exc}"
    newest = ".".join(map(str, adapter.TESTED[1]))
    oldest = ".".join(map(str, adapter.TESTED[0]))
    if status == "tested":
        return f"tested: aoti-debug is tested with torch {oldest} to {newest}"
    if status == "untested":
        return f"untested: newer than torch {newest}, the newest tested; instrumented anyway"
    return text.split(" is not supported: ", 1)[-1].join(("not supported: ", ""))


def system_facts():
    rank, world = settings_mod.process_rank(os.environ)
    facts = [("aoti-debug version", __version__),
             ("Python version", platform.python_version()),
             ("Platform", f"{platform.system()} {platform.machine()}"),
             ("Rank", "none (RANK and LOCAL_RANK unset)" if rank is None
              else f"{rank}" + (f" of {world}" if world else ""))]
    try:
        import torch
    except Exception as exc:
        return facts + [("PyTorch", f"not importable ({exc})")]
    facts.append(("PyTorch version", f"{torch.__version__} ({torch_support()})"))
    facts.append(("CUDA toolkit version", torch.version.cuda or "none (CPU build)"))
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            facts.append((f"GPU {i}", f"{p.name}, compute capability {p.major}.{p.minor}, "
                          f"{p.total_memory / 2**30:.1f} GiB"))
    else:
        facts.append(("GPUs", "none visible"))
    try:
        from ..native import core as _native
        facts.append(("compiled core", "ready" if _native.lib() is not None else "unavailable"))
    except Exception as exc:
        facts.append(("compiled core", f"unavailable ({exc})"))
    return facts
