"""Where records go (docs/log-format.md sections 4-6).

The normal path hands each record to the process registry in the compiled
core, which every artifact's copy of the C++ shim shares: one lock, one
banner per destination, one write(2) per record.  When the core cannot be
built, a Python writer with the same rules takes over.
"""

from __future__ import annotations

import itertools
import os
import platform as _platform
import sys
import threading
from typing import Dict

from . import format as fmt
from ._version import __version__


def torch_version() -> str:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except Exception:
            return "not installed"
    return str(torch.__version__)


def platform_name() -> str:
    return f"{_platform.system()} {_platform.machine()}"


def native():
    """The compiled core's binding (aoti_debug._native) when it is usable, else None."""
    try:
        from . import _native
        return _native if _native.lib() is not None else None
    except Exception:
        return None


def write(dest: str, text: str) -> None:
    """Write one whole record; never raises."""
    core = native()
    if core is not None:
        try:
            core.sink_write(dest, text, torch_version())
            return
        except Exception:
            pass
    _fallback.write(dest, text)


_local_calls = itertools.count(1)   # next() on a count is atomic under the GIL


def next_call_number() -> int:
    """The next call number N, from the registry's counter when the compiled
    core is there: C++ ops (AOTI_DEBUG_SCOPE) in this process count with it."""
    core = native()
    if core is not None:
        try:
            return core.next_call_number()
        except Exception:
            pass
    return next(_local_calls)


def resolve(dest: str, pid: int) -> str:
    return dest.replace("%i", str(pid))


class _PythonWriter:
    """Used only when the compiled core is unavailable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: Dict[str, int] = {}
        self._bannered: set = set()
        self._pid = -1

    def write(self, dest: str, text: str) -> None:
        try:
            with self._lock:
                pid = os.getpid()
                if pid != self._pid:      # forked: banners and fds are per process
                    self._fds, self._bannered, self._pid = {}, set(), pid
                fd = self._fds.get(dest)
                if fd is None:
                    fd = self._fds[dest] = self._open(dest, pid)
                if fd not in self._bannered:
                    self._bannered.add(fd)
                    os.write(fd, fmt.banner(pid, __version__, torch_version(),
                                            platform_name()).encode())
                os.write(fd, text.encode())
        except Exception:
            pass

    def _open(self, dest: str, pid: int) -> int:
        if dest == "stdout":
            return 1
        if dest == "stderr":
            return 2
        path = resolve(dest, pid)
        parent = os.path.dirname(path)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
        except OSError:
            pass  # the open below reports the reason
        try:
            return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            note = fmt.record(fmt.header("note", "-", "settings", pid),
                              [f"  AOTI_DEBUG_LOGDEST={dest!r} is not valid: cannot open {path} "
                               f"({exc.strerror}); keeping stderr"])
            os.write(2, note.encode())
            return 2


_fallback = _PythonWriter()
