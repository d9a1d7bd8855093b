"""Switching the codegen patches on and off.

`activate()` is what the process-start hook (aoti_debug/_startup.py) and
`aoti_debug.instrument()` (below) call.  Patches are installed once and stay
inert while nothing is active, so turning instrumentation off restores
upstream's output exactly.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence, Union

from aoti_debug import settings as settings_mod

from . import hooks


def activate(resolved: settings_mod.Settings):
    """Instrument every AOTI compile from now on with `resolved`; returns the previous settings."""
    _install_patches()
    previous = hooks.active()
    hooks.set_active(resolved.compiled() if resolved.anything_compiled_in else None)
    _quiet_upstream_printers()
    return previous


def _install_patches() -> None:
    """Both wrappers' patches, once, on a torch whose hook points are all there."""
    from . import adapter, patch_cpp_wrapper, patch_python_wrapper
    if adapter.installed():
        return
    adapter.check_version()
    patch_cpp_wrapper.install()
    patch_python_wrapper.install()


def restore(previous) -> None:
    hooks.set_active(previous)


# The settings each open instrument() block puts back when it ends, outermost first.
_open_blocks: list = []


def activate_environment(resolved: settings_mod.Settings) -> None:
    """The process-start hook's settings (the environment's), installed at the
    program's first compile.  They are what is active outside instrument()
    blocks, never over an open one: its arguments win over the variables, and
    that first compile may well be inside one."""
    if not _open_blocks:
        activate(resolved)
        return
    previous = activate(resolved)     # patches installed as for any activation...
    hooks.set_active(previous)        # ...but the open block's settings stay in force
    _open_blocks[0] = resolved.compiled() if resolved.anything_compiled_in else None


def _quiet_upstream_printers() -> None:
    # The upstream aliases also switch on Inductor's own printer and NaN asserts;
    # we do their job, so keep theirs off to avoid two of everything.
    from torch._inductor import config
    aot = config.aot_inductor
    if hasattr(aot, "debug_intermediate_value_printer"):
        aot.debug_intermediate_value_printer = "0"
    if hasattr(aot, "filtered_kernel_names"):
        aot.filtered_kernel_names = None


@contextlib.contextmanager
def instrument(level: Optional[int] = None,
               kernels: Union[str, Sequence[str], None] = None,
               check_inputs: Optional[bool] = None,
               nan_check: Optional[str] = None,
               compile: Optional[str] = None,
               memcheck: Optional[str] = None,
               blackbox: Union[int, str, None] = None) -> Iterator[settings_mod.Settings]:
    """`aoti_debug.instrument()`: compile-time settings for the AOTI compiles
    in the `with` block.  ``compile="all"`` compiles everything in and makes
    the other values what a run does while its variables are unset.

    Arguments win over the environment (settings.py gives the full order);
    a bad value raises SettingsError before anything is compiled.
    """
    overrides = {"level": level, "kernels": kernels, "check_inputs": check_inputs,
                 "nan_check": nan_check, "compile": compile, "memcheck": memcheck, "blackbox": blackbox}
    resolved = settings_mod.read(overrides=overrides)
    _open_blocks.append(activate(resolved))
    try:
        yield resolved
    finally:
        restore(_open_blocks.pop())
