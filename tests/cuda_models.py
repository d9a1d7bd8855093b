"""The model tests/test_cuda_codegen.py generates CUDA code for (tests/cuda_harness.py).

One model holds every kind of launch a CUDA wrapper makes, so that it is
compiled once per configuration: Inductor's Triton kernels (pointwise,
reduction, persistent reduction), a user-defined Triton kernel
(torch.library.triton_op), extern kernels (mm, scaled dot-product attention)
and a custom op, with a dynamic batch size.  Imported only in a process
where cuda_harness.install() has run (triton is imported here).
"""

import time

import torch
import triton
import triton.language as tl


@triton.jit
def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 0.5, mask=mask)


@torch.library.triton_op("aotid_gpu::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    torch.library.wrap_triton(shift_kernel)[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out


@torch.library.custom_op("aotid_gpu::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


class Everything(torch.nn.Module):
    # the weight is an input: fake tensors have no values to package as constants
    def forward(self, x, weight, long_rows, q=None):
        h = x @ weight.t()                                          # extern mm
        probs = torch.softmax(h, dim=-1)                            # persistent reduction
        totals = torch.log(long_rows.abs() + 1.0).sum(dim=-1)       # reduction (4096 per row)
        gate = torch.sigmoid(x) * 3.0                               # pointwise
        if q is None:       # the CPU build that CUDA launches are compared with: these lines alone
            return probs, totals, gate
        # F.scaled_dot_product_attention picks its backend by asking the device,
        # which needs a driver: the efficient-attention op is named directly
        attn = torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)[0]
        shifted = shift(gate)                                       # user-defined Triton
        scaled = scale(shifted, 2.0)                                # custom op
        return probs, totals, attn, scaled


def export(mode_and_inputs):
    """The exported program of Everything for fake "cuda" inputs, batch dynamic."""
    mode, inputs = mode_and_inputs
    batch = torch.export.Dim("batch", min=2, max=64)
    with mode:
        return torch.export.export(Everything(), inputs,
                                   dynamic_shapes=({0: batch}, None, {0: batch}, {0: batch}))


def inputs():
    return (torch.empty(8, 16, device="cuda"), torch.empty(32, 16, device="cuda"),
            torch.empty(8, 4096, device="cuda"),
            torch.empty(8, 2, 16, 32, device="cuda", dtype=torch.float16))


def build(root, configs, compare_settings):
    """In a process where cuda_harness.install() has run: Everything's AOTI
    package under root/<name>/everything.pt2 for each configuration
    {name: (instrument() arguments or None, linked?)} (not linked: the
    generated C++ is packaged, not compiled); with `compare_settings`, the
    C++ of its CPU launches (q=None) as root/cpu/ and torch.compile's CUDA
    Python wrapper as root/python_wrapper.py."""
    import contextlib
    import os

    import aoti_debug
    import cuda_harness
    from torch._inductor import config

    ep = export(cuda_harness.fake_cuda_inputs(inputs))
    for name, (settings, linked) in configs.items():
        started = time.monotonic()
        out = os.path.join(root, name, "everything.pt2")
        os.makedirs(os.path.dirname(out))
        block = aoti_debug.instrument(**settings) if settings is not None else contextlib.nullcontext()
        with block, config.patch({"aot_inductor.package_cpp_only": not linked}):
            torch._inductor.aoti_compile_and_package(ep, package_path=out)
        print(f"built {name} in {time.monotonic() - started:.1f} s", flush=True)

    cpu_inputs = (torch.ones(8, 16), torch.ones(32, 16), torch.ones(8, 4096))
    batch = torch.export.Dim("batch", min=2, max=64)
    cpu = torch.export.export(Everything(), cpu_inputs, dynamic_shapes=({0: batch}, None, {0: batch}))
    os.makedirs(os.path.join(root, "cpu"))
    with aoti_debug.instrument(**compare_settings), config.patch({"aot_inductor.package_cpp_only": True}):
        torch._inductor.aoti_compile_and_package(cpu, package_path=os.path.join(root, "cpu", "oncpu.pt2"))

    # torch.compile's wrapper for the same graph (compile_fx is what torch.compile
    # hands a Dynamo graph to): its code is captured as generated; loading it
    # would load its kernels, which needs a device
    codes = []
    with aoti_debug.instrument(**compare_settings), cuda_harness.output_code(codes.append):
        mode, fake = cuda_harness.fake_cuda_inputs(inputs)
        try:
            with mode:
                torch._inductor.compile_fx.compile_fx(ep.module(), list(fake))
        except Exception:
            if not codes:
                raise
    with open(os.path.join(root, "python_wrapper.py"), "w") as f:
        f.write(codes[-1])


class Small(torch.nn.Module):
    """What tests/test_interpreter.py runs through Triton's interpreter (CPU
    tensors, small shapes): the extern mm and Inductor's three kinds of Triton
    kernel, and a line that makes NaN from a finite input below -1."""

    def forward(self, x, weight, rows):
        scores = x @ weight.t()                                     # extern mm
        attention = torch.softmax(scores, dim=-1)                   # persistent reduction
        row_sums = torch.log(rows.abs() + 1.0).sum(dim=-1)          # reduction (4096 per row)
        root = torch.sqrt(x + 1.0) * 3.0                            # pointwise
        return attention, row_sums, root


SMALL_SHAPES = ((8, 16), (32, 16), (8, 4096))


def small_inputs(plant_nan=False):
    """Small's inputs on the CPU, seeded; with `plant_nan`, one element of x below -1."""
    g = torch.Generator().manual_seed(0)
    x, weight, rows = (torch.rand(s, generator=g) if i == 0 else torch.randn(s, generator=g)
                       for i, s in enumerate(SMALL_SHAPES))
    if plant_nan:
        x[3, 5] = -4.0
    return x, weight, rows


def small_cuda_inputs():
    """Small's inputs on "cuda" (under cuda_harness.fake_cuda_inputs: fake)."""
    return tuple(torch.empty(s, device="cuda") for s in SMALL_SHAPES)


def interpret(root, configs):
    """In a process where cuda_harness.install(interpret=True) has run: Small
    compiled by torch.compile's back end for "cuda" once per configuration
    {name: (instrument() arguments or None, plant a NaN?)} and called on CPU
    tensors through Triton's interpreter, its log at root/<name>.log
    (AOTI_DEBUG_LOGDEST), its wrapper at root/<name>.py, its outputs (or the
    exception it raised) in root/<name>.pt; Small run eagerly on the same
    inputs in root/eager.pt."""
    import contextlib
    import os

    import aoti_debug
    import cuda_harness
    import torch._inductor.codecache as codecache
    from aoti_debug.runtime import state as runtime
    from torch._inductor.compile_fx import compile_fx

    # compile_fx loads the wrapper's module (its kernels, which the interpreter
    # runs); keep it to call with CPU tensors
    loaded = []
    load = codecache.PyCodeCache.load_by_key_path

    def keep(*args, **kwargs):
        loaded.append(load(*args, **kwargs))
        return loaded[-1]

    codecache.PyCodeCache.load_by_key_path = keep
    ep = torch.export.export(Small(), small_inputs())     # Dynamo's trace: the nodes keep their lines
    torch.save([Small()(*small_inputs()), Small()(*small_inputs(plant_nan=True))], os.path.join(root, "eager.pt"))
    for name, (settings, plant_nan) in configs.items():
        os.environ["AOTI_DEBUG_LOGDEST"] = os.path.join(root, name + ".log")
        runtime.reset()
        before = len(loaded)
        block = aoti_debug.instrument(**settings) if settings is not None else contextlib.nullcontext()
        mode, fake = cuda_harness.fake_cuda_inputs(small_cuda_inputs)
        with block, mode:
            compile_fx(ep.module(), list(fake))
        module = loaded[-1]
        assert len(loaded) > before, name
        with open(module.__file__) as f, open(os.path.join(root, name + ".py"), "w") as out:
            out.write(f.read())
        try:
            result = module.call(list(small_inputs(plant_nan)))
        except Exception as exc:  # what the NaN check raises, kept for the test to read
            result = f"{type(exc).__name__}: {exc}"
        torch.save(result, os.path.join(root, name + ".pt"))
