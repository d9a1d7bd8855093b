"""Masking of run-specific details before two logs are compared (log-format.md section 7)."""

from __future__ import annotations

import re

_TIMESTAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\]")
_PID = re.compile(r"\[pid \d+\]")
_POINTER = re.compile(r"0x[0-9a-fA-F]+")
_THREAD = re.compile(r"^(\[[^\]]*\] \[pid [^\]]*\] (?:run|call) \S+ .* thread=)[0-9]+")


def mask_line(line: str) -> str:
    line = _TIMESTAMP.sub("[TIMESTAMP]", line)
    line = _PID.sub("[pid PID]", line)
    line = _THREAD.sub(r"\1TID", line)
    return _POINTER.sub("0xPTR", line)


def mask(text: str) -> str:
    return "".join(mask_line(line) for line in text.splitlines(keepends=True))
