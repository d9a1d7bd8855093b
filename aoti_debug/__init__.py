"""aoti-debug: debugging instrumentation compiled into AOT Inductor artifacts.

Importing the package is cheap: the public names are loaded on first use.
"""

from ._version import __version__

__all__ = ["__version__", "log_api", "instrument", "cpp_include_dir", "read_settings", "blackbox", "eager_log"]


def __getattr__(name):
    if name == "log_api":
        from .runtime.logger import log_api
        return log_api
    if name == "instrument":
        from .codegen_patches.install import instrument
        return instrument
    if name == "cpp_include_dir":
        from .native.core import include_dir
        return include_dir
    if name == "blackbox":
        import importlib
        return importlib.import_module(".blackbox", __name__)
    if name == "eager_log":
        from .reference import eager_log
        return eager_log
    if name == "read_settings":
        from .settings import read
        return read
    raise AttributeError(f"module 'aoti_debug' has no attribute {name!r}")
