"""AOTI_DEBUG_KERNELS: case-insensitive globs over kernel names and origins.

The C++ shim implements the same matcher (detail/settings.h); both accept
`*`, `?` and `[...]` (`[!...]` negates), as fnmatch does.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable, Sequence


def matches(patterns: Sequence[str], names: Iterable[str]) -> bool:
    """True when no pattern is given or any pattern matches any of the names."""
    if not patterns:
        return True
    lowered = [n.lower() for n in names if n]
    return any(fnmatch.fnmatchcase(n, p.lower()) for p in patterns for n in lowered)
