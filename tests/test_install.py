"""Packaging and the process-start hook: light, safe, present in every kind of install."""

import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO, clean_env, run_python

# the venv's and, with --system-site-packages, the interpreter's: torch and its dependencies
SITES = [p for p in sys.path if p.endswith("site-packages")]


def test_import_is_light():
    proc = run_python("""
        import sys, aoti_debug
        print(sorted(m for m in sys.modules if m.startswith(("aoti_debug", "torch", "numpy"))))
    """)
    assert proc.stdout == "['aoti_debug', 'aoti_debug._version']\n"


def test_hook_does_nothing_without_variables():
    proc = run_python("import sys; print([m for m in sys.modules if m.startswith('aoti_debug')])")
    assert proc.stdout == "[]\n"


def test_hook_activates_at_the_first_entry_point_and_is_safe_twice():
    proc = run_python("""
        import sys
        print("torch" in sys.modules, end=" ")            # nothing imported at start-up
        import torch, torch._inductor
        from aoti_debug import _startup
        from aoti_debug.codegen_patches import adapter, hooks
        print(hooks.active() is None, end=" ")            # still nothing: no entry point called
        torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
        before = len(adapter._originals)
        _startup._done = False; _startup.activate()       # a second activation
        torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
        print(hooks.active().level, hooks.active().kernels, before > 0, len(adapter._originals) == before)
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT="cpp_*"))
    assert proc.stdout == "False True 3 ('cpp_*',) True True\n", proc.stderr


def test_a_child_process_with_the_variables_does_not_import_torch():
    proc = run_python("import sys, ctypes; print(sorted(m for m in sys.modules if m.startswith('torch')))",
                      env=clean_env(AOTI_DEBUG_LOGLEVEL="5"))
    assert proc.stdout == "[]\n"


def test_hook_never_raises_it_says_why_in_one_line():
    proc = run_python("print('model code runs')", env=clean_env(AOTI_DEBUG_NAN_CHECK="maybe"))
    assert proc.stdout == "model code runs\n"
    assert proc.stderr == ("aoti-debug: compiles are not instrumented: AOTI_DEBUG_NAN_CHECK='maybe' is not "
                           "valid: expected one of off, warn, raise, warn:nan, raise:nan, warn:naninf, "
                           "raise:naninf\n")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), REPO], check=True, capture_output=True)
    return next(out.glob("aoti_debug-*.whl"))


def test_wheel_carries_hook_headers_and_codegen(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "aoti_debug.pth" in names
    assert "aoti_debug/_cpp_runtime/include/aoti_debug/aoti.h" in names
    assert "aoti_debug/_cpp_runtime/include/aoti_debug/detail/checks.h" in names
    assert "aoti_debug/_cpp_runtime/CMakeLists.txt" in names
    assert "aoti_debug/codegen_patches/hooks.py" in names
    record = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/RECORD"))).decode()
    assert "\naoti_debug.pth," in "\n" + record       # so pip uninstall removes the hook


def test_non_editable_install_works(tmp_path, wheel):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True)
    # a fresh interpreter that sees only the target (plus torch): the .pth runs as in site-packages
    code = f"""
import sys, site
sys.path[:] = [p for p in sys.path if 'site-packages' not in p and p != '']
sys.path.extend({SITES!r})         # torch, without running those directories' .pth files
site.addsitedir({str(target)!r})   # runs aoti_debug.pth
import aoti_debug, aoti_debug._native as native
import torch
torch.export.export(torch.nn.ReLU(), (torch.ones(2),))   # the first entry point installs
from aoti_debug.codegen_patches import hooks
print(aoti_debug.__file__.startswith({str(target)!r}), native.include_dir().startswith({str(target)!r}))
print(hooks.active().level)
"""
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                          env=clean_env(AOTI_DEBUG_LOGLEVEL="5"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True True\n5\n"
