"""`aoti-debug blackbox recover`: the rings that ended processes left in a
dump directory, written as ordinary dump folders (docs/dumps.md, "The black box").

The ring's format is read by the C++ runtime that writes it
(detail/blackbox.h, through aoti_debug.native), so one reader checks every
entry: a torn or truncated ring gives its whole launches and a note, never
part of one.  A ring whose process is still running is left alone; one whose
process id is not 1 to 4194304 is refused (0 and -1 would name a process group
or every process to kill: no `kill -USR2` advice is given for them).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import List

from .untrusted import InputError, refused

RING_NAME = re.compile(r"^\d+-blackbox(\.\d+)?\.ring$")


@dataclass
class Recovered:
    ring: str
    status: str   # "ok", "live" or "error"
    text: str     # what the folder holds, or why nothing was written


def rings(root: str) -> List[Recovered]:
    """The ring files in `root`; a ring name that is not a regular file (a link, a FIFO)
    is not read, and is named as refused."""
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise InputError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    found = []
    for name in names:
        if RING_NAME.match(name):
            path = os.path.join(root, name)
            found.append(Recovered(path, "", "") if _is_regular(path) else Recovered(path, "error", _refusal(path)))
    if not found:
        raise InputError(f"{root}: no black box ring (<pid>-blackbox.ring) in it")
    return found


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _refusal(path: str) -> str:
    try:
        return str(refused(path, os.lstat(path).st_mode))
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc})"


def recover(root: str, out_dir: str = "") -> List[Recovered]:
    """Every ring of `root` (a dump directory, or one ring file), each written as a
    folder <pid>-blackbox under `out_dir` (default: beside the ring).  Only regular files
    are read: a link is not followed, and a FIFO is never opened (it would block)."""
    from ..native import core
    try:
        mode = os.lstat(root).st_mode
    except OSError as exc:
        raise InputError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        todo = rings(root)
    elif stat.S_ISREG(mode):
        todo = [Recovered(root, "", "")]
    else:
        raise refused(root, mode)
    for r in todo:
        if not r.status:
            r.status, r.text = core.blackbox_recover(r.ring, out_dir or os.path.dirname(r.ring) or ".")
    return todo
