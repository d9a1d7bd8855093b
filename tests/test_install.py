"""Packaging and the process-start hook: light, safe, present in every kind of install."""

import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO, clean_env, run_python, two_refused_compiles

# torch_matrix (every tested torch release): the tests marked below, where the
# installed Inductor decides the result; the rest of the file runs on the default one.

# the venv's and, with --system-site-packages, the interpreter's: torch and its dependencies
SITES = [p for p in sys.path if p.endswith("site-packages")]


@pytest.mark.torch_matrix
def test_import_is_light():
    proc = run_python("""
        import sys, aoti_debug
        print(sorted(m for m in sys.modules if m.startswith(("aoti_debug", "torch", "numpy"))))
    """)
    assert proc.stdout == "['aoti_debug', 'aoti_debug._version']\n"


def test_hook_does_nothing_without_variables():
    proc = run_python("import sys; print([m for m in sys.modules if m.startswith('aoti_debug')])")
    assert proc.stdout == "[]\n"


@pytest.mark.torch_matrix
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


def test_hook_never_raises_and_a_process_that_compiles_nothing_runs_silently():
    proc = run_python("print('model code runs')", env=clean_env(AOTI_DEBUG_NAN_CHECK="maybe"))
    assert (proc.stdout, proc.stderr) == ("model code runs\n", "")


EXPORT_THEN_COMPILE = """
    import torch
    ep = torch.export.export(torch.nn.ReLU(), (torch.ones(2),))   # compiles nothing: allowed
    print("exported", flush=True)
    torch._inductor.aoti_compile_and_package(ep, package_path="m.pt2")
    print("compiled")
"""


def test_a_bad_run_time_variable_fails_the_compile_even_with_nothing_compiled_in(tmp_path):
    # it used to say one line and compile an uninstrumented artifact, exit 0
    proc = run_python(EXPORT_THEN_COMPILE, env=clean_env(AOTI_DEBUG_DUMP_MAX_COUNT="-1"),
                      cwd=tmp_path, check=False)
    assert proc.returncode == 1 and proc.stdout == "exported\n"
    assert proc.stderr.endswith("\naoti_debug.settings.SettingsError: AOTI_DEBUG_DUMP_MAX_COUNT='-1' "
                                "is not valid: expected a whole number >= 0\n"), proc.stderr
    assert not (tmp_path / "m.pt2").exists()


@pytest.mark.torch_matrix
def test_every_problem_fails_aoti_and_torch_compile_alike(tmp_path):
    # a Unicode digit used to compile in level 3; an empty glob used to be dropped
    env = clean_env(AOTI_DEBUG_LOGLEVEL="\u0663", AOTI_DEBUG_KERNELS="relu,")
    problems = ("AOTI_DEBUG_LOGLEVEL='\u0663' is not valid: expected one of 0, 1, 3, 5, 10\n"
                "AOTI_DEBUG_KERNELS='relu,' is not valid: expected comma-separated globs (*, ?, [...]), "
                "none of them empty, every [ closed by ]")
    proc = run_python("""
    import torch
    try:
        torch.compile(torch.nn.ReLU())(torch.ones(2))
    except Exception as exc:
        print(type(exc).__name__, "SettingsError: " in str(exc), flush=True)
    """ + EXPORT_THEN_COMPILE, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stdout == "BackendCompilerFailed True\nexported\n"
    assert proc.stderr.endswith(f"\naoti_debug.settings.SettingsError: {problems}\n"), proc.stderr
    assert proc.stderr.count(problems) == 1


@pytest.mark.torch_matrix
def test_valid_spellings_compile_an_instrumented_artifact(tmp_path, aoti_cache):
    proc = run_python(EXPORT_THEN_COMPILE + """
    torch._inductor.aoti_load_package("m.pt2")(torch.ones(2))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL=" 1 ", AOTI_DEBUG_KERNELS=" *RELU* ",
                       AOTI_DEBUG_DUMP_MAX_COUNT="03", AOTI_DEBUG_DUMP_MAX_SIZE_GB=".5",
                       TORCHINDUCTOR_CACHE_DIR=aoti_cache), cwd=tmp_path)
    assert proc.stdout.startswith("exported\ncompiled\n")
    assert " launch m:1.1 cpp_fused_relu_0\n" in proc.stdout


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
    assert "aoti_debug/_cpp_runtime/include/aoti_debug/checks.h" in names
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
import aoti_debug, aoti_debug.native.core as native
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


def test_only_misspelt_variables_refuse_the_compile(tmp_path):
    # it used to write a package with exit 0, instrumented with nothing
    proc = run_python(EXPORT_THEN_COMPILE, env=clean_env(AOTI_DEBUG_LOGLEVLE="5", AOTI_DEBUG_NANCHECK="raise"),
                      cwd=tmp_path, check=False)
    assert proc.returncode == 1 and proc.stdout == "exported\n"
    assert proc.stderr.endswith(
        "\naoti_debug.settings.SettingsError: "
        "AOTI_DEBUG_LOGLEVLE is not a variable aoti-debug reads (did you mean AOTI_DEBUG_LOGLEVEL?)\n"
        "AOTI_DEBUG_NANCHECK is not a variable aoti-debug reads (did you mean AOTI_DEBUG_NAN_CHECK?)\n"
        "no aoti-debug variable is set, only the unknown one(s) above: the compile is refused rather than "
        "build an artifact without the instrumentation asked for\n"), proc.stderr
    assert not (tmp_path / "m.pt2").exists()


def test_a_misspelt_variable_beside_known_ones_is_one_line_at_the_first_compile(tmp_path):
    proc = two_refused_compiles(tmp_path, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_NAN_CHECK="raise",
                                AOTI_DEBUG_LOGLEVLE="5")
    assert proc.stderr == ("aoti-debug settings: AOTI_DEBUG_LOGLEVLE is not a variable aoti-debug reads "
                           "(did you mean AOTI_DEBUG_LOGLEVEL?); ignoring it\n")
