"""`aoti_debug.instrument()`: instrument the compiles inside a `with` block."""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence, Union

from . import settings as settings_mod


@contextlib.contextmanager
def instrument(level: Optional[int] = None,
               kernels: Union[str, Sequence[str], None] = None,
               check_inputs: Optional[bool] = None,
               nan_check: Optional[str] = None) -> Iterator[settings_mod.Settings]:
    """Compile-time settings for the AOTI compiles in the block.

    Arguments win over the environment (settings.py gives the full order);
    a bad value raises SettingsError before anything is compiled.
    """
    overrides = {"level": level, "kernels": kernels, "check_inputs": check_inputs,
                 "nan_check": nan_check}
    resolved = settings_mod.read(overrides=overrides)
    from .codegen_patches import install
    previous = install.activate(resolved)
    try:
        yield resolved
    finally:
        install.restore(previous)
