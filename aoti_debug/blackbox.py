"""The black box from Python (docs/dumps.md, "The black box").

Artifacts compiled with ``AOTI_DEBUG_BLACKBOX`` keep the last launches of the
process in a ring file; ``dump()`` writes what it holds now as a dump folder
beside that file (a C++ server gets the same with ``kill -USR2 <pid>``).
"""

from __future__ import annotations

__all__ = ["dump"]


def dump() -> str:
    """Writes the launches the black box holds as a dump folder and returns what
    it holds, in words (the folder's path first).  RuntimeError when no model of
    this process keeps a black box."""
    from .native import core
    status, text = core.blackbox_dump()
    if status != "ok":
        raise RuntimeError(f"aoti-debug black box: {text}")
    return text
