"""Building and loading the C++ runtime for Python (aoti_debug/native/)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from aoti_debug.native import core as _native

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def test_include_dir_holds_the_headers():
    inc = _native.include_dir()
    assert os.path.isfile(os.path.join(inc, "aoti_debug", "config.h"))
    assert os.path.isfile(os.path.join(inc, "aoti_debug", "aoti.h"))


def test_import_does_not_import_torch():
    proc = subprocess.run([sys.executable, "-c",
                           "import sys, aoti_debug.native.core; print('torch' in sys.modules)"],
                          env=env_with(), capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "False"


def test_concurrent_first_builds_share_one_cached_library(tmp_path):
    cache = tmp_path / "cache"
    code = textwrap.dedent("""
        import torch
        from aoti_debug.native import core as _native
        from aoti_debug.runtime.stats import compute_native
        assert _native.lib() is not None
        print(compute_native(torch.arange(10.0)).mean)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env_with(AOTI_DEBUG_CACHE_DIR=str(cache)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert [o[0].strip() for o in outs] == ["4.5"] * 3
    files = sorted(os.listdir(cache))
    assert len(files) == 1 and files[0].startswith("libaotid_") and files[0].endswith(".so"), files


def test_no_compiler_means_one_warning_and_none(tmp_path):
    code = textwrap.dedent("""
        import warnings
        from aoti_debug.native import core as _native
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert _native.lib() is None and _native.lib() is None
        print(len(w), "C++ runtime unavailable" in str(w[0].message))
        try:
            _native.format_number(1.0)
        except _native.NativeUnavailable:
            print("raised")
    """)
    proc = subprocess.run([sys.executable, "-c", code],
                          env=env_with(AOTI_DEBUG_CACHE_DIR=str(tmp_path / "c"),
                                       CXX="/nonexistent/c++"),
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["1", "True", "raised"], proc.stderr


# The functions that choose their instruction set at run time (stats-inl.h:
# __attribute__((target)) with a CPU check before each call).
DISPATCHED = ("stats_blocks_w4", "stats_blocks_w8", "hash_words_w4", "hash_words_w8",
              "convert_chunk_w4", "convert_chunk_w8", "any_above_w4", "any_above_w8",
              "dequant_blocks_w4")


def test_the_core_object_runs_on_any_x86_64_cpu():
    """An artifact may be built on one CPU and served on another: outside the
    dispatched functions, the core object linked into it uses no AVX register
    (it was built with -march=native, which put AVX-512 across 30 functions)."""
    import platform
    import shutil
    import pytest
    from aoti_debug.native import build
    if platform.machine() != "x86_64" or shutil.which("objdump") is None:
        pytest.skip("needs x86_64 and objdump")
    obj = build.core_object(build.core_flags(stats=True, dumps=True))
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(obj)],
                             capture_output=True, text=True, check=True, timeout=300).stdout
    using, fn = set(), None
    for line in listing.splitlines():
        if line.endswith(">:") and " <" in line:
            fn = line.split(" <", 1)[1][:-2]
        elif fn is not None and ("%ymm" in line or "%zmm" in line):
            using.add(fn)
    names = {u.split("(")[0].rsplit("::", 1)[-1] for u in using}
    assert using and names <= set(DISPATCHED), sorted(using)


def test_the_headers_build_in_a_strict_users_project(tmp_path):
    """A custom op's library includes the runtime's headers with its own
    warnings as errors: -Wall -Wextra -Wpedantic -Werror (torch's headers as
    system headers, as CMake's imported targets give them)."""
    import torch
    from aoti_debug.native import build
    torch_inc = os.path.join(os.path.dirname(torch.__file__), "include")
    src = tmp_path / "strict.cpp"
    src.write_text("#include <aoti_debug/aoti_debug.h>\n#include <aoti_debug/torch.h>\n"
                   "#include <aoti_debug/aoti.h>\nint main() { return 0; }\n")
    cmd = [build.compiler(), "-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))}",
           "-isystem", torch_inc, "-isystem", os.path.join(torch_inc, "torch", "csrc", "api", "include"),
           "-I", _native.include_dir(), "-c", str(src), "-o", str(tmp_path / "strict.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
