"""Which torch releases aoti-debug instruments (codegen_patches/adapter.py).

A release is judged by the hook points Inductor offers, not by its number: a
release newer than the newest tested one is tried, with one line saying so;
one that lacks a hook point is refused before anything is compiled, with one
line (no traceback) naming the torch version and the newest tested release.
The "newer" release and the missing hook point are faked in the test process.
"""

import re

import pytest
import torch

from aoti_debug.codegen_patches import adapter
from conftest import clean_env, run_python

pytestmark = pytest.mark.torch_matrix

NEWEST = ".".join(map(str, adapter.TESTED[1]))
OLDEST = ".".join(map(str, adapter.TESTED[0]))
UNTESTED = ("aoti-debug: torch 2.16.0 is newer than the newest tested release "
            f"(torch {NEWEST}); instrumenting anyway\n")


def refusal(missing, version=torch.__version__):
    return (f"aoti-debug: torch {version} is not supported: Inductor no longer has {missing}, "
            f"which aoti-debug hooks into (the newest tested release is torch {NEWEST})\n")


def test_this_release_is_tested_and_offers_every_hook_point():
    assert adapter.missing_hook_points() == []
    assert adapter.support() == ("tested", "")


@pytest.mark.parametrize("version,release", [
    ("2.15.0+cu132", (2, 15)), ("2.13.0+cpu", (2, 13)), ("2.16.0a0+git1234abc", (2, 16)),
    ("2.17.0.dev20270101", (2, 17)), ("3.0.0", (3, 0)), ("junk", (0, 0))])
def test_release_of_a_version_string(version, release):
    assert adapter._release(version) == release


# -- a newer release is tried -----------------------------------------------------

FAKE_NEWER = """
    import torch
    torch.__version__ = "2.16.0"     # what a newer release reports
"""

EXPORT_COMPILE_RUN = """
    ep = torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
    print("exported", flush=True)
    torch._inductor.aoti_compile_and_package(ep, package_path="m.pt2")
    print("compiled", flush=True)
    print(torch._inductor.aoti_load_package("m.pt2")(torch.tensor([-1.0, 2.0])))
"""


@pytest.mark.slow
def test_a_newer_release_compiles_with_one_untested_note(tmp_path, aoti_cache):
    # activated by the environment; two compiles, one note
    proc = run_python(FAKE_NEWER + EXPORT_COMPILE_RUN + """
    torch._inductor.aoti_compile_and_package(ep, package_path="m2.pt2")
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="1", TORCHINDUCTOR_CACHE_DIR=aoti_cache), cwd=tmp_path)
    # (a CUDA build of torch on a machine without a GPU adds a warning of its own)
    assert [l for l in proc.stderr.splitlines(True) if "aoti-debug" in l] == [UNTESTED]
    assert proc.stdout.startswith("exported\ncompiled\n")
    assert re.search(r"^\[[^\]]+\] \[pid \d+\] launch m:1\.1 cpp_fused_relu_0$", proc.stdout, re.M), proc.stdout
    assert proc.stdout.endswith("tensor([0., 2.])\n")


def test_a_newer_release_through_instrument_says_it_once(tmp_path):
    proc = run_python(FAKE_NEWER + """
    import aoti_debug
    from aoti_debug.codegen_patches import hooks
    with aoti_debug.instrument(level=1):
        print(hooks.active().level)
    with aoti_debug.instrument(level=3):
        print(hooks.active().level)
    """, cwd=tmp_path)
    assert (proc.stdout, proc.stderr) == ("1\n3\n", UNTESTED)


def test_info_says_whether_this_torch_is_tested(tmp_path):
    proc = run_python("import sys; from aoti_debug.cli import main; sys.exit(main(['info']))", cwd=tmp_path)
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("PyTorch version"))
    assert line.split(None, 2)[2] == (f"{torch.__version__} (tested: aoti-debug is tested with torch "
                                      f"{OLDEST} to {NEWEST})")
    proc = run_python(FAKE_NEWER + """
    import sys; from aoti_debug.cli import main; sys.exit(main(['info']))
    """, cwd=tmp_path)
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("PyTorch version"))
    assert line.split(None, 2)[2] == (f"2.16.0 (untested: newer than torch {NEWEST}, the newest tested; "
                                      "instrumented anyway)")


# -- a release without a hook point is refused --------------------------------------

# a release that renamed a method the patches wrap
RENAMED = """
    import torch
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    CppWrapperCpu.generate_c_shim_extern_kernel_call_v2 = CppWrapperCpu.generate_c_shim_extern_kernel_call
    del CppWrapperCpu.generate_c_shim_extern_kernel_call
"""
RENAMED_MISSING = "CppWrapperCpu.generate_c_shim_extern_kernel_call"

# a release whose kernel-call helper no longer takes the argument types the roles come from
NO_ARG_TYPES = """
    import torch
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    original = CppWrapperCpu._generate_kernel_call_helper
    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, arg_kinds=None):
        return original(self, kernel_name, call_args, device=device, triton=triton)
    CppWrapperCpu._generate_kernel_call_helper = _generate_kernel_call_helper
"""
NO_ARG_TYPES_MISSING = "CppWrapperCpu._generate_kernel_call_helper(arg_types)"


@pytest.mark.parametrize("fake,missing", [(RENAMED, RENAMED_MISSING), (NO_ARG_TYPES, NO_ARG_TYPES_MISSING)],
                         ids=["renamed-method", "renamed-parameter"])
def test_a_missing_hook_point_stops_the_compile_with_one_line(tmp_path, fake, missing):
    # activated by the environment: export goes on, the compile stops, nothing is written
    proc = run_python(fake + EXPORT_COMPILE_RUN, env=clean_env(AOTI_DEBUG_LOGLEVEL="5"),
                      cwd=tmp_path, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "exported\n", refusal(missing))
    assert not (tmp_path / "m.pt2").exists()


def test_a_missing_hook_point_through_instrument_and_torch_compile(tmp_path):
    # instrument(): the same line, and a program can catch it
    proc = run_python(RENAMED + """
    import aoti_debug
    from aoti_debug.codegen_patches.adapter import UnsupportedTorch
    try:
        with aoti_debug.instrument(level=1):
            pass
    except UnsupportedTorch as exc:
        print("caught:", exc)
    with aoti_debug.instrument(level=1):
        print("not reached")
    """, cwd=tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stdout == "caught: " + refusal(RENAMED_MISSING)
    assert proc.stderr == refusal(RENAMED_MISSING)

    # torch.compile wraps its backend's exception: the line is still all that is printed
    proc = run_python(RENAMED + """
    print(torch.compile(torch.nn.ReLU())(torch.ones(2)))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="1"), cwd=tmp_path, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", refusal(RENAMED_MISSING))


def test_info_names_the_missing_hook_point(tmp_path):
    proc = run_python(RENAMED + """
    import sys; from aoti_debug.cli import main; sys.exit(main(['info']))
    """, cwd=tmp_path)
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("PyTorch version"))
    assert line.split(None, 2)[2] == (
        f"{torch.__version__} (not supported: Inductor no longer has {RENAMED_MISSING}, which aoti-debug "
        f"hooks into (the newest tested release is torch {NEWEST}))")


def test_an_older_release_is_refused(tmp_path):
    proc = run_python("""
    import torch
    torch.__version__ = "2.10.0"
    import aoti_debug
    with aoti_debug.instrument(level=1):
        pass
    """, cwd=tmp_path, check=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"aoti-debug: torch 2.10.0 is not supported: aoti-debug needs torch {OLDEST} "
                           f"or newer (the newest tested release is torch {NEWEST})\n")


def test_other_exceptions_keep_their_traceback(tmp_path):
    proc = run_python("""
    import torch
    from aoti_debug.codegen_patches import adapter
    adapter._one_line_excepthook()
    raise ValueError("not ours")
    """, cwd=tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback (most recent call last):\n")
    assert proc.stderr.endswith("ValueError: not ours\n")
