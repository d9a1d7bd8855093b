"""Process-start hook, run from aoti_debug.pth in site-packages.

The .pth line checks the variables itself before importing this module, so a
process with none of them set imports nothing of ours.  This function never
raises and is safe to call twice.
"""

import sys

_done = False


def activate() -> None:
    global _done
    if _done:
        return
    _done = True
    try:
        from .codegen_patches import install
        install.from_environment()
    except Exception as exc:
        from .settings import SettingsError
        why = "; ".join(exc.problems) if isinstance(exc, SettingsError) else f"{type(exc).__name__}: {exc}"
        try:
            sys.stderr.write(f"aoti-debug: compiles are not instrumented: {why}\n")
        except Exception:
            pass
