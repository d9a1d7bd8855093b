"""What tests/test_gpu.py's scripts do that a CPU can show (docs/gpu.md).

The GPU tests run only on a GPU; two of their choices are about what AOTI does
there, and are checked here on every release CI runs:

- graph capture loads the package single-threaded (the default container
  queries a CUDA event during a run, which a capturing stream forbids): the
  load it uses runs an instrumented CPU package with the same records and
  outputs as the default load;
- AOTI_DEBUG_SYNC's faulty kernel gets its bad offset from an input at run
  time: AOTI runs (autotunes) Triton kernels while compiling, with made-up
  inputs, so an offset fixed in the code would fault inside the compile.
"""

import importlib.util
import re

import pytest
import torch

import gpu_models
import test_gpu
from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, run_python

pytestmark = pytest.mark.torch_matrix


def test_graph_capture_loads_the_package_single_threaded(packages, tmp_path):
    assert "run_single_threaded=True" in test_gpu.LOAD
    assert test_gpu.LOAD in test_gpu.CAPTURE
    pt2 = packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10")
    seen = {}
    for name, load in (("default", "torch._inductor.aoti_load_package({pt2!r})"), ("capture", test_gpu.LOAD)):
        log = tmp_path / f"{name}.log"
        proc = run_python(f"""
            import sys; sys.path.insert(0, {TESTS!r})
            import torch, models
            m = {load.format(pt2=pt2)}
            out = m(*models.example("mlp")[1])
            print("OUTPUT", repr(out[0].double().sum().item()))
        """, env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=str(log)))
        seen[name] = (proc.stdout, mask(log.read_text()))
    assert seen["capture"] == seen["default"]
    assert re.search(r"\] launch mlp:1\.1 ", seen["capture"][1]), seen["capture"][1]


needs_triton = pytest.mark.skipif(torch.version.cuda is None,
                                  reason=f"torch {torch.__version__} is a CPU-only build: the faulty model is a "
                                         "Triton kernel (torch's CUDA build has Triton)")


@needs_triton
def test_the_sync_test_plants_its_fault_through_an_input_read_at_run_time():
    # exported with a harmless shift; the bad one comes with the run's inputs
    assert gpu_models.faulty_inputs(device="cpu")[1].tolist() == [0]
    assert gpu_models.faulty_inputs(gpu_models.FAR, device="cpu")[1].tolist() == [1 << 36]
    assert "faulty_inputs(gpu_models.FAR" in test_gpu.FAULTY and "export(gpu_models.faulty(), " \
        "gpu_models.faulty_inputs())" in test_gpu.FAULTY
    # the shift is a graph input that the kernel's op reads, not a constant in the code
    ep = torch.export.export(gpu_models.faulty(), gpu_models.faulty_inputs(device="cpu"))
    assert list(ep.graph_signature.user_inputs) == ["x", "shift"]
    op = next(n for n in ep.graph.nodes if "shifted_copy" in str(n.target))
    assert [a.name for a in op.args] == ["relu", "shift"]
    # what AOTI's compile-time autotuning hands an integer tensor: zeros, a harmless shift
    from torch._dynamo.testing import rand_strided
    assert rand_strided((1,), (1,), dtype=torch.int64).tolist() == [0]


@needs_triton
@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="Triton's interpreter needs numpy")
def test_the_faulty_kernel_is_right_apart_from_its_shift(tmp_path):
    """Run through Triton's interpreter on the CPU with shift 0: the kernel copies its input
    (so on a GPU only the shift can make it fault)."""
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, gpu_models
        x, shift = gpu_models.faulty_inputs(device="cpu")
        out = torch.full_like(x, float("nan"))
        gpu_models.faulty().kernel[(4,)](x, out, shift, x.numel(), BLOCK=256)
        print("EQUAL", bool(torch.equal(out, x)))
    """, env=clean_env(TRITON_INTERPRET="1"), timeout=120)
    assert proc.stdout.strip().endswith("EQUAL True"), proc.stdout + proc.stderr
