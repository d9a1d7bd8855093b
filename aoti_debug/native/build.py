"""Compiling the C++ runtime (``cpp_runtime/``) into the cache folder.

Two things are built from it, each once per set of sources, compiler, flags
and machine, into ``$AOTI_DEBUG_CACHE_DIR`` (default ``~/.cache/aoti_debug``):
the Python binding's library (``src/pycore.cpp``, see core.py) and the
core objects linked into AOTI artifacts (``src/core.cpp``, see
config.h's AOTI_DEBUG_LINKED_CORE).  Each output is written under a temporary
name and renamed into place, so several processes may build at once.

Importing this module imports neither torch nor the compiler.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple

CXX_STD = "-std=c++17"


class BuildError(RuntimeError):
    """The compiler is missing or rejected the sources."""


def runtime_dir() -> Path:
    """The cpp_runtime folder: installed package data or the source checkout."""
    here = Path(__file__).resolve().parent.parent     # the aoti_debug package
    for cand in (here / "_cpp_runtime", here.parent / "cpp_runtime"):
        if (cand / "include" / "aoti_debug" / "config.h").is_file():
            return cand
    raise FileNotFoundError(
        f"aoti-debug C++ runtime not found in {here / '_cpp_runtime'} or {here.parent / 'cpp_runtime'}")


def include_dir() -> str:
    """Folder to pass as -I when compiling code that includes <aoti_debug/...>."""
    return str(runtime_dir() / "include")


def cache_dir() -> Path:
    env = os.environ.get("AOTI_DEBUG_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "aoti_debug"


def compiler() -> Optional[str]:
    env = os.environ.get("CXX")
    if env:
        return shutil.which(env) or env
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


@functools.lru_cache(maxsize=None)
def _compiler_version(cxx: str) -> str:   # asked at every instrumented AOTI compile
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _build_key(root: Path, source: Path, cxx: str, flags: Sequence[str]) -> str:
    h = hashlib.sha256()
    for path in sorted((root / "include").rglob("*.h")) + [root / source]:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    for part in (cxx, _compiler_version(cxx), " ".join(flags), platform.machine(), sys.platform):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def _compile(cxx: str, flags: Sequence[str], root: Path, source: Path, out: Path) -> Optional[str]:
    """Builds into `out` atomically; returns None or the compiler's complaint."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=str(out.parent))
    os.close(fd)
    cmd = [cxx, *flags, "-I", str(root / "include"), str(root / source), "-o", tmp]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return f"{' '.join(cmd)}\n{proc.stderr[-4000:]}"
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)  # atomic: readers see the old file, none, or the whole new one
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{' '.join(cmd)}\n{exc}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _need_compiler() -> str:
    cxx = compiler()
    if cxx is None:
        raise BuildError("no C++ compiler found (set CXX, or install c++/g++/clang++)")
    return cxx


def output(source: Path, flags: Sequence[str], name: str) -> Path:
    """Where build() puts `source` built with `flags` (there or not yet); raises BuildError."""
    return cache_dir() / name.format(key=_build_key(runtime_dir(), source, _need_compiler(), tuple(flags)))


def build(source: Path, flags: Sequence[str], name: str, force: bool = False) -> Path:
    """`source` (relative to cpp_runtime/) compiled with `flags` into the cache
    as `name` (its `{key}` filled in).  No -march=native: the core object is
    linked into artifacts that may run on another CPU than the one that built
    them, and the loops that need vectors choose them at run time."""
    root, cxx, out = runtime_dir(), _need_compiler(), output(source, flags, name)
    if out.is_file() and not force:
        return out
    err = _compile(cxx, tuple(flags), root, source, out)
    if err is None:
        return out
    raise BuildError(f"building {source} of the aoti-debug C++ runtime failed:\n{err}")


def torch_flags() -> Tuple[str, ...]:
    """Flags for code compiled against the running torch's C++ headers: its C++
    ABI, its version (which also keys the cache) and its include folder."""
    import torch
    return (f"-D_GLIBCXX_USE_CXX11_ABI={int(bool(getattr(torch._C, '_GLIBCXX_USE_CXX11_ABI', True)))}",
            f"-DAOTI_DEBUG_CORE_TORCH={torch.__version__}",
            "-I", os.path.join(os.path.dirname(torch.__file__), "include"))


def core_flags(stats: bool, dumps: bool, memcheck: bool = False) -> Tuple[str, ...]:
    """How a core object for an artifact compiled with these options is built
    (the wrapper's AOTI_DEBUG_ENABLE_* must match: they change inline code)."""
    return ("-O2", CXX_STD, "-c", "-fPIC", "-fvisibility=hidden",
            f"-DAOTI_DEBUG_ENABLE_STATS={int(stats)}", f"-DAOTI_DEBUG_ENABLE_DUMPS={int(dumps)}",
            *(("-DAOTI_DEBUG_ENABLE_MEMCHECK=1",) if memcheck else ()), *torch_flags())


def core_object(flags: Iterable[str]) -> Path:
    """The core object (src/core.cpp) for `flags` from core_flags(); raises BuildError."""
    return build(Path("src") / "core.cpp", tuple(flags), "aotid_core_{key}.o")
