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

from .untrusted import InputError

RING_NAME = re.compile(r"^\d+-blackbox(\.\d+)?\.ring$")


@dataclass
class Recovered:
    ring: str
    status: str   # "ok", "live" or "error"
    text: str     # what the folder holds, or why nothing was written


def rings(root: str) -> List[str]:
    """The ring files in `root` (regular files only: a link is not followed)."""
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise InputError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    found = []
    for name in names:
        path = os.path.join(root, name)
        if RING_NAME.match(name) and stat.S_ISREG(os.lstat(path).st_mode):
            found.append(path)
    if not found:
        raise InputError(f"{root}: no black box ring (<pid>-blackbox.ring) in it")
    return found


def recover(root: str, out_dir: str = "") -> List[Recovered]:
    """Every ring of `root` (a dump directory, or one ring file), each written as a
    folder <pid>-blackbox under `out_dir` (default: beside the ring)."""
    from ..native import core
    paths = [root] if os.path.isfile(root) else rings(root) if os.path.isdir(root) else None
    if paths is None:
        raise InputError(f"{root}: no such file or directory")
    done = []
    for path in paths:
        status, text = core.blackbox_recover(path, out_dir or os.path.dirname(path) or ".")
        done.append(Recovered(path, status, text))
    return done
