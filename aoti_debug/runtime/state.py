"""Run-time state of the Python side: the settings in force and the emit path.

Settings are read once per process (lazily, thread-safely); a bad value
never raises here: one note, then the default.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from . import format as fmt
from .. import settings as settings_mod
from . import sink

_lock = threading.Lock()
_settings: Optional[settings_mod.Settings] = None
_pid = [os.getpid()]


def _forked() -> None:
    _pid[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)


def pid() -> int:
    """os.getpid() without a system call per record (read again in a forked child)."""
    return _pid[0]


def settings() -> settings_mod.Settings:
    global _settings
    current = _settings
    if current is None:
        with _lock:
            if _settings is None:
                resolved, problems = settings_mod.read_with_problems()
                _settings = resolved   # set first: the notes below emit through it
                # as the C++ runtime says them (detail::read_settings): bad values, then unknown names
                told = [settings_mod.with_fallback(p) for p in problems] + settings_mod.unknown_variables()
                if told:
                    tell(resolved.level, "settings", *told, once=True)
            current = _settings
    return current


def reset() -> None:
    """Forget the cached settings (tests, and `instrument()` scopes)."""
    global _settings
    with _lock:
        _settings = None


def emit(text: str) -> None:
    sink.write(settings().logdest, text)


def note(topic: str, *lines: str) -> None:
    emit(fmt.record(fmt.header("note", "-", topic, pid()), ["  " + l for l in lines]))


_told: set = set()
_told_lock = threading.Lock()   # settings() tells while holding _lock


def tell(level: int, topic: str, *lines: str, once: bool = False) -> None:
    """Something the user must see (a NaN-check warning, a refused setting):
    a note record at level >= 1; at level 0 the log stays empty and each line
    goes to stderr as ``aoti-debug <topic>: <line>``.  ``once``: first time
    per process, counted with every C++ runtime in it (detail::tell)."""
    dest = settings().logdest
    core = sink.native()
    if core is not None:
        try:
            core.write_note(dest, topic, "\n".join(lines), once=once, level=level)
            return
        except Exception:
            pass
    with _told_lock:
        if once and (topic, lines) in _told:
            return
        _told.add((topic, lines))
    if level >= 1:
        note(topic, *lines)
    else:
        sink.write_stderr("".join(f"aoti-debug {topic}: {line}\n" for line in lines))


def found(topic: str, msg: str, error: Exception, raising: bool, level: int, fired, launch: int, site,
          values) -> None:
    """A check's finding (the memory and plan checks): told (at level 0 a raised error
    alone says it), handed to the black box (`fired`, while it is on), then `error`
    raised when the check raises."""
    if level >= 1 or not raising:
        tell(level, topic, msg)
    if fired is not None:
        fired(topic, launch, site, values)
    if raising:
        raise error
