"""The memory check's guarding allocator for torch.compile's wrappers, through
ctypes (``cpp_runtime/src/pymemcheck.cpp``).

Built on first use against the running torch's c10 (headers and library), into
the cache folder like the core library (build.py).  The allocator is the very
one artifacts install (detail/memcheck.h): whichever comes first installs it,
the others find it in the process registry.  Imported only when a wrapper
compiled with the memory check runs.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import List, Optional, Tuple

from . import build as _build


class Damage(ctypes.Structure):
    # mirrors detail::GuardDamage (memcheck.h)
    _fields_ = [("data", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("after", ctypes.c_int32),
                ("freed", ctypes.c_int32), ("offset", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("run", ctypes.c_int64), ("launch", ctypes.c_int64), ("kernel", ctypes.c_char * 128)]


_lock = threading.Lock()
_api: Optional[ctypes.CDLL] = None
_why: Optional[str] = None


def _flags() -> Tuple[str, ...]:
    import torch
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    return ("-O2", _build.CXX_STD, "-shared", "-fPIC", "-fvisibility=hidden", *_build.torch_flags(),
            "-Wl,--no-as-needed", f"-L{lib}", f"-Wl,-rpath,{lib}", "-lc10")


def api() -> Tuple[Optional[ctypes.CDLL], Optional[str]]:
    """(the library with the allocator installed, None) or (None, why not)."""
    global _api, _why
    with _lock:
        if _api is None and _why is None:
            try:
                path = _build.build(Path("src") / "pymemcheck.cpp", _flags(), "libaotid_mc_{key}.so")
                handle = ctypes.CDLL(str(path))
                handle.aotid_mc_install.restype = ctypes.c_int32
                handle.aotid_mc_install.argtypes = [ctypes.c_char_p, ctypes.c_int64]
                handle.aotid_mc_mark.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p]
                handle.aotid_mc_take.restype = ctypes.c_int64
                handle.aotid_mc_take.argtypes = [ctypes.POINTER(Damage), ctypes.c_int64]
                handle.aotid_mc_concurrent.restype = ctypes.c_int32
                handle.aotid_mc_damage_size.restype = ctypes.c_int64
                if handle.aotid_mc_damage_size() != ctypes.sizeof(Damage):
                    raise OSError("GuardDamage layout differs between C++ and Python")
                buf = ctypes.create_string_buffer(512)
                if handle.aotid_mc_install(buf, 512) != 0:
                    _why = buf.value.decode("utf-8", "replace")
                else:
                    _api = handle
            except (_build.BuildError, OSError) as exc:
                _why = f"its library could not be built or loaded: {exc}".splitlines()[0]
    return _api, _why


def take(handle: ctypes.CDLL) -> List[Damage]:
    found: List[Damage] = []
    while True:
        buf = (Damage * 16)()
        n = handle.aotid_mc_take(buf, 16)
        found += [buf[i] for i in range(n)]
        if n < 16:
            return found
