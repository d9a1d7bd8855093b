"""torch.compile's C++ wrapper for CUDA (cpp_wrapper=True), instrumented at
AOTI_DEBUG_COMPILE=all, generated, compiled, linked against a stand-in libcuda
and loaded without a GPU (tests/cuda_harness.py fakes the device, as for
tests/test_cuda_codegen.py).  Nothing here runs on a GPU: what is checked is
that every kind of CUDA launch is instrumented, that the run is tied to the
stream the launches go to, and that the module builds and loads."""

import re

import pytest

import cuda_harness
from conftest import TESTS, run_python
from test_cuda_codegen import KERNELS, by_kind, code_count, harness_env, sites

pytestmark = [pytest.mark.torch_matrix, pytest.mark.slow]

SKIP = cuda_harness.skip_reason()

BUILD = r"""
import os, sys; sys.path.insert(0, {tests!r})
import cuda_harness; cuda_harness.install()
import torch, torch._inductor.compile_fx, cuda_models, aoti_debug
from torch._inductor import config
ep = cuda_models.export(cuda_harness.fake_cuda_inputs(cuda_models.inputs))
mode = torch._guards.detect_fake_mode([n.meta["val"] for n in ep.graph_module.graph.nodes
                                       if n.op == "placeholder" and "val" in n.meta])
mode.allow_non_fake_inputs = True
with mode:
    fake = cuda_models.inputs()
codes = []
with aoti_debug.instrument(compile="all"), cuda_harness.output_code(codes.append), \
        config.patch({{"cpp_wrapper": True}}), mode:
    torch._inductor.compile_fx.compile_fx(ep.module(), list(fake))   # builds and loads the module
with open({out!r}, "w") as f:
    f.write(codes[-1])
print("built and loaded")
"""


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory, aoti_cache):
    if SKIP:
        pytest.skip(SKIP)
    root = tmp_path_factory.mktemp("cuda-cpp-wrapper")
    lib = cuda_harness.build_libcuda_standin(str(root / "libcuda"))
    out = str(root / "wrapper.cpp")
    env = harness_env(lib, aoti_cache, "LD_LIBRARY_PATH")   # the module is loaded once built: the stand-in
    proc = run_python(BUILD.format(tests=TESTS, out=out), env=env, timeout=900)
    assert proc.stdout.strip().splitlines()[-1] == "built and loaded", proc.stdout
    with open(out) as f:
        return f.read()


def test_every_cuda_launch_is_instrumented_and_the_module_loads(wrapper):
    found = sites(wrapper)
    by_kind(found)                          # each kind of KERNELS exactly once, the custom op too
    assert len(found) == len(KERNELS)
    for site in found.values():
        i = site["index"]
        assert code_count(wrapper, f"AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_{i},") == 1
        assert code_count(wrapper, f"AOTI_DEBUG_LAUNCH_END(aotid_run, aotid_site_{i},") == 1
    # the entry has no `stream` parameter: the run is tied to the device's current stream
    assert code_count(wrapper, "AOTI_DEBUG_BEGIN_RUN_ON(aotid_run, aotid_model, &aoti_debug_gen::cuda_hooks, "
                               "aoti_debug_gen::cuda_current_stream(0), aotid_inputs") == 1
    assert not re.search(r"static_cast<void\*>\(stream\)", wrapper)
