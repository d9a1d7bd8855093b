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

Bad values are a compile-time error, never a silent uninstrumented artifact
(and so are AOTI_DEBUG_* variables that are all unknown names, a misspelling;
beside known ones, each unknown name is one line on stderr at the first compile):
the compile entry points (aoti_compile_and_package, compile_fx) are replaced
by functions that raise SettingsError listing every problem, for as long as
the process lives.  Process start stays silent, so a program that merely
inherits a bad variable (a model server) keeps running; its run-time reader
notes the problem in the log.  torch.export.export compiles nothing and is
left alone.  So is it when this torch lacks a hook point the instrumentation
needs (codegen_patches/adapter.py): every compile then raises UnsupportedTorch,
whose one line is all an uncaught one prints.
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
        from .settings import only_unknown, read_with_problems
        resolved, problems = read_with_problems()
        problems += only_unknown()       # a misspelt name alone: no artifact nobody asked for
        if problems:
            finder = _EntryPoints(problems, COMPILE_ENTRY_POINTS)
        elif resolved.anything_compiled_in:
            finder = _EntryPoints(resolved, ENTRY_POINTS)
        else:
            return
        sys.meta_path.insert(0, finder)
        for name in finder.entry_points:
            if name in sys.modules:
                finder.guard(sys.modules[name])
    except Exception as exc:
        _say(exc)


def _install(resolved) -> None:
    try:
        from .settings import unknown_variables, upstream_notes
        for text in unknown_variables() + upstream_notes():    # said once, at the first compile
            sys.stderr.write(f"aoti-debug settings: {text}\n")
        from .codegen_patches import install
        install.activate_environment(resolved)
    except Exception as exc:
        from .codegen_patches.adapter import UnsupportedTorch
        if isinstance(exc, UnsupportedTorch):
            _refuse_compiles(exc)
        else:
            _say(exc)


def _refuse_compiles(exc: Exception) -> None:
    """This torch lacks a hook point: every compile raises the one-line refusal
    (an uncaught one ends the program with that line alone); torch.export,
    which compiles nothing, goes on."""
    import importlib
    for module_name, attr in COMPILE_ENTRY_POINTS.items():
        module = importlib.import_module(module_name)
        function = getattr(module, attr, None)
        if function is None or getattr(function, "__aoti_debug_refuse__", False):
            continue

        def refuse(*args, **kwargs):
            raise type(exc)(str(exc))
        refuse.__wrapped__ = function
        refuse.__aoti_debug_refuse__ = True
        setattr(module, attr, refuse)


def _say(exc: Exception) -> None:
    try:
        sys.stderr.write(f"aoti-debug: compiles are not instrumented: {type(exc).__name__}: {exc}\n")
    except Exception:
        pass


# module -> the function whose first call installs the patches
COMPILE_ENTRY_POINTS = {"torch._inductor": "aoti_compile_and_package",
                        "torch._inductor.compile_fx": "compile_fx"}
ENTRY_POINTS = {"torch.export": "export", **COMPILE_ENTRY_POINTS}
_originals = []       # (module, name, function) put back before installing


class _EntryPoints(importlib.abc.MetaPathFinder):
    """When an entry-point module has loaded, its function is replaced: with
    valid settings by a trampoline whose first call puts every original back,
    installs the patches (all imports are done by then) and calls the patched
    function; with bad ones (`resolved` is the list of problems) by a
    function that raises SettingsError, at every call."""

    def __init__(self, resolved, entry_points) -> None:
        self.resolved = resolved
        self.entry_points = entry_points

    def find_spec(self, name, path=None, target=None):
        if name not in self.entry_points:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, original = spec.loader, spec.loader.exec_module

        def exec_module(module):
            original(module)
            self.guard(module)
        loader.exec_module = exec_module
        return spec

    def guard(self, module) -> None:
        attr, resolved = self.entry_points[module.__name__], self.resolved
        function = getattr(module, attr, None)
        if function is None:
            return
        if isinstance(resolved, list):
            def refuse(*args, **kwargs):
                from .settings import SettingsError
                raise SettingsError(resolved)
            refuse.__wrapped__ = function
            setattr(module, attr, refuse)
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
