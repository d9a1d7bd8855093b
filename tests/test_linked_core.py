"""The two ways the runtime goes into an AOTI artifact (config.h:
AOTI_DEBUG_LINKED_CORE): linked as a prebuilt core object (AOTI builds on
torch 2.13 and later tested releases), or compiled header-only (package_cpp_only,
other versions).
Both write the same records, so neither can drift from the other."""

import os
import subprocess
import zipfile

import pytest

from aoti_debug.analysis.mask import mask
from aoti_debug.codegen_patches import cpp_emit
from conftest import TESTS, clean_env, run_package, run_python

pytestmark = pytest.mark.torch_matrix

# the core object is linked from torch 2.13 on (codegen_patches/ir_queries.py, linked_core);
# before, every artifact compiles the runtime header-only
needs_linked_core = pytest.mark.skipif(
    tuple(int(p) for p in __import__("torch").__version__.split("+")[0].split(".")[:2]) < (2, 13),
    reason="before torch 2.13 the runtime is compiled header-only into every artifact (no core to link)")


def member(pt2, suffix):
    with zipfile.ZipFile(pt2) as z:
        [name] = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


@pytest.fixture(scope="module")
def linked(packages):
    return packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10")


@pytest.fixture(scope="module")
def header_only(tmp_path_factory, aoti_cache):
    out = str(tmp_path_factory.mktemp("header-only") / "mlp.pt2")
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        from aoti_debug.codegen_patches import ir_queries
        ir_queries.linked_core = lambda *options: None     # as where the core cannot be linked
        torch._inductor.aoti_compile_and_package(models.export("mlp"), package_path={out!r})
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="10"), timeout=600)
    return out


@needs_linked_core
def test_aoti_wrapper_declares_the_core_and_the_artifact_contains_it(tmp_path, linked, header_only):
    wrapper = member(linked, ".wrapper.cpp").decode()
    [core] = [line[len(cpp_emit.CORE_MARKER):] for line in wrapper.splitlines()
              if line.startswith(cpp_emit.CORE_MARKER)]
    assert os.path.basename(core).startswith("aotid_core_") and core.endswith(".o")
    assert "#define AOTI_DEBUG_LINKED_CORE 1\n" + cpp_emit.CORE_MARKER + core in wrapper
    so = tmp_path / "model.so"
    so.write_bytes(member(linked, ".wrapper.so"))
    symbols = subprocess.run(["nm", "-C", str(so)], capture_output=True, text=True, check=True).stdout
    defined = [line for line in symbols.splitlines()
               if "aoti_debug::v6::before_launch(" in line and "[clone" not in line]
    assert len(defined) == 1 and defined[0].split()[1] in ("t", "T"), defined  # defined here, hidden
    assert cpp_emit.CORE_MARKER not in member(header_only, ".wrapper.cpp").decode()


@pytest.mark.parametrize("level", ["1", "3", "5", "10"])
def test_linked_and_header_only_artifacts_write_the_same_records(tmp_path, linked, header_only, level):
    logs = []
    for name, pt2 in (("linked", linked), ("header-only", header_only)):
        log = tmp_path / f"{name}.log"
        proc = run_package(pt2, "mlp", AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=str(log),
                           AOTI_DEBUG_DUMP_DIR=str(tmp_path / f"{name}-dumps"))
        assert proc.stdout.startswith("OUTPUT"), proc.stderr
        logs.append((proc.stdout, mask(log.read_text())))
    assert logs[0] == logs[1]
    assert logs[0][1].count("] launch mlp:1.") == 6


def test_an_unbuildable_core_falls_back_to_header_only(tmp_path, aoti_cache):
    """No writable cache folder for the core object: the wrapper compiles the
    runtime itself, and the artifact logs as usual."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    out = str(tmp_path / "mlp.pt2")
    env = dict(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_CACHE_DIR=blocker)
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        torch._inductor.aoti_compile_and_package(models.export("mlp"), package_path={out!r})
    """, env=clean_env(**env), timeout=600)
    assert cpp_emit.CORE_MARKER not in member(out, ".wrapper.cpp").decode()
    log = tmp_path / "log.txt"
    proc = run_package(out, "mlp", AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_CACHE_DIR=blocker)
    assert proc.stdout.startswith("OUTPUT"), proc.stderr
    assert mask(log.read_text()).count("] launch mlp:1.") == 6


@needs_linked_core
def test_a_core_object_gone_before_the_link_is_built_again(tmp_path, aoti_cache):
    out = str(tmp_path / "mlp.pt2")
    cache = tmp_path / "cache"
    run_python(f"""
        import os, sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        from aoti_debug.codegen_patches import ir_queries
        found = ir_queries.linked_core
        def vanishing(*options):           # the cache is cleaned between codegen and link
            core = found(*options)
            os.unlink(core[0])
            return core
        ir_queries.linked_core = vanishing
        torch._inductor.aoti_compile_and_package(models.export("mlp"), package_path={out!r})
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_CACHE_DIR=cache),
        timeout=600)
    assert cpp_emit.CORE_MARKER in member(out, ".wrapper.cpp").decode()
    assert len(list(cache.glob("aotid_core_*.o"))) == 1       # built again for the link
    log = tmp_path / "log.txt"
    proc = run_package(out, "mlp", AOTI_DEBUG_LOGDEST=str(log))
    assert proc.stdout.startswith("OUTPUT"), proc.stderr
    assert mask(log.read_text()).count("] launch-end mlp:1.") == 6
