"""Every header of cpp_runtime/include/aoti_debug compiles on its own: a
translation unit that includes just that header, -fsyntax-only, with the
flags the runtime's build uses (aoti_debug/native/build.py) and torch's
include folders.  A header that leans on what its includer happened to include
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


def needs_cuda(header: str) -> bool:
    return bool(_NEEDS_CUDA.search((INCLUDE / header).read_text()))


@functools.lru_cache(maxsize=None)
def flags():
    """The runtime's language standard, torch's flags and include folders."""
    from torch.utils import cpp_extension
    torch_includes = [f for d in cpp_extension.include_paths() for f in ("-I", d)]
    return (build.CXX_STD, "-fsyntax-only", "-fvisibility=hidden", *build.torch_flags(), *torch_includes,
            "-I", str(INCLUDE))


def compile_alone(cxx: str, header: str):
    """(command, compiler's exit status and output) for a unit of `#include <header>` alone."""
    cmd = [cxx, *flags(), *(["-I", str(CUDA_INCLUDE)] if needs_cuda(header) else []), "-x", "c++", "-"]
    proc = subprocess.run(cmd, input=f"#include <{header}>\n", capture_output=True, text=True, timeout=300)
    return " ".join(cmd), proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def compiled():
    cxx = build.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX, or install c++/g++/clang++)")
    todo = [h for h in HEADERS if not needs_cuda(h) or (CUDA_INCLUDE / "cuda.h").is_file()]
    flags()  # torch imported once, before the threads
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(todo, pool.map(lambda h: compile_alone(cxx, h), todo)))


def test_the_glue_headers_are_among_them():
    assert {"aoti_debug/detail/wrapper_args.h", "aoti_debug/detail/cuda_hooks.h",
            "aoti_debug/aoti.h", "aoti_debug/detail/registry.h"} <= set(HEADERS)


@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_on_its_own(compiled, header):
    if header not in compiled:
        pytest.skip(f"{header} includes <cuda.h>, and there is none in {CUDA_INCLUDE} (set CUDA_HOME)")
    cmd, status, output = compiled[header]
    assert status == 0, f"#include <{header}> alone does not compile:\n{cmd}\n{output[-6000:]}"
