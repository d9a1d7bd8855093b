"""Process-start hook, run from aoti_debug.pth in site-packages.

The .pth line checks the variables itself before importing this module, so a
process with none of them set imports nothing of ours.  With one set, the
settings are validated now (cheap), but the codegen patches wait for the
program's first call into an entry point (torch.export.export,
aoti_compile_and_package, compile_fx): many processes inherit the variables
and never compile anything (Inductor's own probe subprocesses, workers, the
model server itself) and must not pay for importing torch, and installing
while torch is still importing its own modules would meet half-initialised
ones.  This function never raises and is safe to call twice.
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
        sys.meta_path.insert(0, _EntryPoints(resolved))
        for name in ENTRY_POINTS:
            if name in sys.modules:
                _EntryPoints.guard(sys.modules[name], ENTRY_POINTS[name], resolved)
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


# module -> the function whose first call installs the patches
ENTRY_POINTS = {"torch.export": "export",
                "torch._inductor": "aoti_compile_and_package",
                "torch._inductor.compile_fx": "compile_fx"}
_originals = []       # (module, name, function) put back before installing


class _EntryPoints(importlib.abc.MetaPathFinder):
    """When an entry-point module has loaded, its function is replaced by a
    trampoline; the first call puts every original back, installs the
    patches (all imports are done by then) and calls the patched function."""

    def __init__(self, resolved) -> None:
        self.resolved = resolved

    def find_spec(self, name, path=None, target=None):
        if name not in ENTRY_POINTS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, resolved, attr = spec.loader, self.resolved, ENTRY_POINTS[name]
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _EntryPoints.guard(module, attr, resolved)
        loader.exec_module = exec_module
        return spec

    @staticmethod
    def guard(module, attr, resolved) -> None:
        function = getattr(module, attr, None)
        if function is None:
            return
        _originals.append((module, attr, function))

        def trampoline(*args, **kwargs):
            while _originals:
                owner, name, fn = _originals.pop()
                setattr(owner, name, fn)
            for finder in [f for f in sys.meta_path if isinstance(f, _EntryPoints)]:
                sys.meta_path.remove(finder)
            _install(resolved)
            return getattr(module, attr)(*args, **kwargs)
        trampoline.__wrapped__ = function
        setattr(module, attr, trampoline)
