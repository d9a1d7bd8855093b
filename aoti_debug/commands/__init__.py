"""One module per CLI command: add_arguments(parser) and run(args) -> exit status."""

from __future__ import annotations

from typing import Sequence


def allow_modules(modules: Sequence[str], load: bool) -> None:
    """Check each `--allow-module` name, and with `load` import it now, so that the
    ops it registers can run; a UsageError names the one that fails."""
    import importlib

    from ..analysis import runnable
    from ..cli import UsageError
    for module in modules:
        if not runnable.module_name(module):
            raise UsageError(f"--allow-module {module!r}: not a module name (e.g. mylib or mylib.ops)")
        if load:
            try:
                importlib.import_module(module)
            except Exception as exc:       # the user's module: say what it raised
                raise UsageError(f"--allow-module {module}: importing it raised {type(exc).__name__}: {exc}") from None
