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


def settings() -> settings_mod.Settings:
    global _settings
    current = _settings
    if current is None:
        with _lock:
            if _settings is None:
                resolved, problems = settings_mod.read_with_problems()
                _settings = resolved   # set first: the notes below emit through it
                for text in problems:
                    note("settings", settings_mod.with_fallback(text))
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
    emit(fmt.record(fmt.header("note", "-", topic, os.getpid()), ["  " + l for l in lines]))
