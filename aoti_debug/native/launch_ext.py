"""torch.compile's launch records through compiled code (``cpp_runtime/src/pylaunch.cpp``).

The generated wrapper calls ``launch(run, site, *values)`` and
``launch_end(run, site, *values)`` around each launch; launches.py has
Python functions of those names, which go through ``Run.before`` /
``Run.after`` and one ctypes call a record into the compiled core.  This
builds and loads a CPython extension with the same two functions that reads
each tensor as an ``at::Tensor`` into the C++ shim's own value structs and
hands the record to the core (``aotid_write_values``), which renders it with
the same code, skipping the Python in between (docs/performance.md).

It is built against the running torch's headers and libraries, so once per
torch release (its version, git revision and install folder), Python
version and set of C++ runtime sources, into the core's cache folder
(build.py: ``$AOTI_DEBUG_CACHE_DIR``, written under a temporary name and
renamed into place).  When it cannot be built or loaded (no compiler, no
torch headers, a failed build, a core built with another layout of those
structs than the extension's, ``aotid_py_record_abi``, or
``AOTI_DEBUG_LAUNCH_EXTENSION=0``),
``functions()`` returns None after one warning and the wrapper keeps the
Python functions: the same records, more slowly.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import sysconfig
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Tuple

from . import build as _build

SOURCE = Path("src") / "pylaunch.cpp"
MODULE = "aotid_pylaunch"
SWITCH = "AOTI_DEBUG_LAUNCH_EXTENSION"   # "0": the Python functions (the extension is not built)
BUILD_TIME = "once per torch release; 15 s to 30 s measured on 2 cores"

_lock = threading.Lock()
_module = None
_tried = False


def flags() -> Tuple[str, ...]:
    """How the extension is built against the running torch and Python (they key the cache)."""
    import torch
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    return ("-O2", _cxx_std(os.path.dirname(torch.__file__)), "-shared", "-fPIC", "-fvisibility=hidden", *_build.torch_flags(),
            f"-DAOTI_DEBUG_TORCH_GIT={getattr(torch.version, 'git_version', '') or 'unknown'}",
            "-DAOTI_DEBUG_LINKED_CORE=1",   # the runtime's types only: its functions are the core's
            "-I", os.path.join(include, "torch", "csrc", "api", "include"),
            "-I", sysconfig.get_paths()["include"],
            "-Wl,--no-as-needed", "-L", lib, "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
            f"-Wl,-rpath,{lib}")


def _cxx_std(torch_dir: str) -> str:
    """The C++ standard torch builds its own extensions with (torch.utils.cpp_extension's
    common_cflags: C++20 from 2.12 on, whose headers need it; C++17 before), read from
    its source rather than imported (that module pulls in setuptools)."""
    try:
        with open(os.path.join(torch_dir, "utils", "cpp_extension.py"), encoding="utf-8") as f:
            found = re.search(r"common_cflags \+= \['(-std=c\+\+\d+)'", f.read())
    except OSError:
        found = None
    return found.group(1) if found else _build.CXX_STD


def _name() -> str:
    # the interpreter's own suffix (cpython-311-x86_64-linux-gnu.so): one file per Python version
    return MODULE + "_{key}" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def build(force: bool = False) -> Path:
    """Builds (or finds in the cache) the extension; raises build.BuildError.
    A build says so on stderr first: it takes a while."""
    f = flags()
    out = _build.output(SOURCE, f, _name())
    if out.is_file() and not force:
        return out
    import torch
    print(f"aoti-debug: building torch.compile's launch extension for torch {torch.__version__} in "
          f"{out.parent} ({BUILD_TIME})", file=sys.stderr, flush=True)
    start = time.monotonic()
    out = _build.build(SOURCE, f, _name(), force=force)
    print(f"aoti-debug: built {out} in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    return out


def _load(runtime: tuple):
    """The initialised extension module; raises on any failure."""
    import importlib.machinery
    import importlib.util
    import torch
    from . import core
    lib, held = core.lib(), core._need_held()
    path = build()
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(MODULE, str(path),
                                                                                    loader=loader))
    loader.exec_module(module)

    def address(fn) -> int:
        return ctypes.cast(fn, ctypes.c_void_p).value

    run_type, site_type, launch, launch_end, site_handle = runtime
    # the extension checks the core's aotid_py_record_abi against its own before it keeps any
    module.init(run_type, site_type, torch.nn.Parameter, launch, launch_end, site_handle,
                address(lib.aotid_py_record_abi), address(lib.aotid_write_values), address(held.aotid_write_launch),
                address(held.aotid_clear_inflight))
    return module


def module(runtime: Optional[tuple] = None):
    """The loaded extension, built on first use; None (after one warning) if impossible or
    switched off, and before a runtime loaded it.  `runtime`: what the extension reads in
    place and hands records over to, given by the runtime that calls it (runtime/launches.py:
    its Run and Site, its launch and launch_end, blackbox.site_handle)."""
    global _module, _tried
    if _module is not None or _tried or runtime is None:
        return _module
    with _lock:
        if _module is None and not _tried:
            from . import core
            # without the core there is nothing to write through (its own warning said why)
            if os.environ.get(SWITCH, "") != "0" and core.lib() is not None:
                try:
                    _module = _load(runtime)
                except Exception as exc:
                    warnings.warn(f"aoti-debug: torch.compile's launch extension unavailable ({_why(exc)}); "
                                  "its launch records are written through ctypes instead (the same records, "
                                  "slower)", RuntimeWarning, stacklevel=2)
                    _module = None
            _tried = True
    return _module


def _why(exc: Exception) -> str:
    """One line: a failed build's first compiler error (BuildError holds the whole output)."""
    lines = [l.strip() for l in str(exc).strip().splitlines() if l.strip()]
    if isinstance(exc, _build.BuildError):
        errors = [l for l in lines if "error" in l.lower() and not l.startswith(("building ", _build.compiler() or "-"))]
        return f"building {SOURCE} failed" + (f": {errors[0]}" if errors else "")
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def functions(runtime: tuple) -> Optional[Tuple[Callable, Callable]]:
    """(launch, launch_end) of the extension, or None; `runtime` as for module()."""
    m = module(runtime)
    return None if m is None else (m.launch, m.launch_end)
