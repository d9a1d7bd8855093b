"""Process-start hook, run from aoti_debug.pth in site-packages.

The .pth line checks the variables itself before importing this module, so a
process with none of them set imports nothing of ours.  With one set, the
settings are validated now (cheap), but the codegen patches wait until the
program imports torch._inductor: many processes inherit the variables and
never compile anything (Inductor's own probe subprocesses, workers, the
model server itself), and they must not pay for importing torch.  This
function never raises and is safe to call twice.
"""

import importlib.abc
import importlib.util
import sys

_done = False


def activate() -> None:
    global _done
    if _done:
        return
    _done = True
    try:
        from .settings import read
        resolved = read()
        if not resolved.anything_compiled_in:
            return
        if "torch._inductor" in sys.modules:
            _install(resolved)
        else:
            sys.meta_path.insert(0, _WhenInductorLoads(resolved))
    except Exception as exc:
        _say(exc)


def _install(resolved) -> None:
    try:
        from .codegen_patches import install
        install.activate(resolved)
    except Exception as exc:
        _say(exc)


def _say(exc: Exception) -> None:
    from .settings import SettingsError
    why = "; ".join(exc.problems) if isinstance(exc, SettingsError) else f"{type(exc).__name__}: {exc}"
    try:
        sys.stderr.write(f"aoti-debug: compiles are not instrumented: {why}\n")
    except Exception:
        pass


class _WhenInductorLoads(importlib.abc.MetaPathFinder):
    """Installs the patches right after torch._inductor finishes importing."""

    def __init__(self, resolved) -> None:
        self.resolved = resolved

    def find_spec(self, name, path=None, target=None):
        if name != "torch._inductor":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, resolved = spec.loader, self.resolved
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _install(resolved)
        loader.exec_module = exec_module
        return spec
