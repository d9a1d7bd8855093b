"""Every header of cpp_runtime/include/aoti_debug compiles on its own: a
translation unit that includes just that header, -fsyntax-only, with the
flags the runtime's build uses (aoti_debug/native/build.py; torch.h, for
users' libtorch ops, in C++20 as torch.utils.cpp_extension builds them) and
torch's include folders, on whichever tested torch runs the suite.  A header that leans on what its includer happened to include
before it fails here, not in someone's build.

One compiler process per header, all of them at once on a thread pool, in one
fixture; each header is its own test, which reads its result.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import subprocess
from pathlib import Path

import pytest

from aoti_debug.native import build

INCLUDE = Path(build.include_dir())
HEADERS = sorted(p.relative_to(INCLUDE).as_posix() for p in (INCLUDE / "aoti_debug").rglob("*.h"))
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "include"
_NEEDS_CUDA = re.compile(r"^\s*#\s*include\s*<cuda\.h>", re.M)


_NEEDS_ATEN = re.compile(r"^\s*#\s*include\s*<ATen/", re.M)


def needs_cuda(header: str) -> bool:
    return bool(_NEEDS_CUDA.search((INCLUDE / header).read_text()))


def standard(header: str) -> str:
    """The runtime's C++17; a header for users' libtorch ops (it includes ATen) in the
    standard torch.utils.cpp_extension builds those with (ATen needs C++20 from 2.15)."""
    return "-std=c++20" if _NEEDS_ATEN.search((INCLUDE / header).read_text()) else build.CXX_STD


# device_ops.h needs torch's stable C API of 2.13 on: aoti.h includes it only there
NEEDS_TORCH = {"aoti_debug/detail/device_ops.h": (2, 13)}


def torch_release() -> tuple:
    from aoti_debug.codegen_patches import adapter
    return adapter.torch_version()


@functools.lru_cache(maxsize=None)
def flags():
    """torch's flags and include folders (the language standard: standard())."""
    from torch.utils import cpp_extension
    torch_includes = [f for d in cpp_extension.include_paths() for f in ("-I", d)]
    return ("-fsyntax-only", "-fvisibility=hidden", *build.torch_flags(), *torch_includes,
            "-I", str(INCLUDE))


def compile_alone(cxx: str, header: str):
    """(command, compiler's exit status and output) for a unit of `#include <header>` alone."""
    cmd = [cxx, standard(header), *flags(), *(["-I", str(CUDA_INCLUDE)] if needs_cuda(header) else []),
           "-x", "c++", "-"]
    proc = subprocess.run(cmd, input=f"#include <{header}>\n", capture_output=True, text=True, timeout=300)
    return " ".join(cmd), proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def compiled():
    cxx = build.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX, or install c++/g++/clang++)")
    todo = [h for h in HEADERS if (not needs_cuda(h) or (CUDA_INCLUDE / "cuda.h").is_file())
            and torch_release() >= NEEDS_TORCH.get(h, (0, 0))]
    flags()  # torch imported once, before the threads
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(todo, pool.map(lambda h: compile_alone(cxx, h), todo)))


def test_the_glue_headers_are_among_them():
    assert {"aoti_debug/detail/wrapper_args.h", "aoti_debug/detail/cuda_hooks.h",
            "aoti_debug/aoti.h", "aoti_debug/detail/registry.h"} <= set(HEADERS)


@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_on_its_own(compiled, header):
    if header in NEEDS_TORCH and torch_release() < NEEDS_TORCH[header]:
        pytest.skip(f"{header} is included from torch {'.'.join(map(str, NEEDS_TORCH[header]))} on (aoti.h)")
    if header not in compiled:
        pytest.skip(f"{header} includes <cuda.h>, and there is none in {CUDA_INCLUDE} (set CUDA_HOME)")
    cmd, status, output = compiled[header]
    assert status == 0, f"#include <{header}> alone does not compile:\n{cmd}\n{output[-6000:]}"
