"""The model tests/test_gpu.py runs on a real GPU: a linear layer, a softmax
and a log, which Inductor turns into an extern mm and Triton kernels.  With
`bias=-1.0` the log's argument is negative: a NaN planted at a known line."""

import inspect

import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 16)

    def forward(self, x, bias):
        p = torch.softmax(self.fc(x), dim=-1)  # LINE:gpu.softmax
        return torch.log(p + bias)  # LINE:gpu.log


def model():
    torch.manual_seed(0)
    return Scorer().eval()


def inputs(bias=1.0, device="cuda"):
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1))
    return x.to(device), torch.tensor(bias, device=device)


def line_of(tag):
    """`file:line` of the line this file marks `# LINE:<tag>`."""
    path = inspect.getsourcefile(Scorer)
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# LINE:{tag}"):
                return f"{path}:{number}"
    raise KeyError(tag)


# AOTI_DEBUG_SYNC's model: a user-defined Triton kernel whose store lands
# `shift` elements past its output, far outside any allocation: an
# asynchronous illegal memory access planted at a known line.  The shift is an
# input, read by the kernel at run time: AOTI runs (autotunes) Triton kernels
# while it compiles, with made-up inputs (an integer tensor is all zeros), so a
# bad offset fixed in the code would fault inside aoti_compile_and_package,
# before any instrumented run.
FAR = 1 << 36


def faulty():
    import triton
    import triton.language as tl

    @triton.jit
    def shifted_store(x_ptr, out_ptr, shift_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = i < n
        shift = tl.load(shift_ptr)
        tl.store(out_ptr + i + shift, tl.load(x_ptr + i, mask=keep), mask=keep)

    @torch.library.triton_op("aotid_gpu::shifted_copy", mutates_args=())
    def shifted_copy(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        torch.library.wrap_triton(shifted_store)[(triton.cdiv(n, 256),)](x, out, shift, n, BLOCK=256)
        return out

    class Faulty(torch.nn.Module):
        kernel = shifted_store      # for tests/test_gpu_scripts.py

        def forward(self, x, shift):
            y = torch.relu(x)
            z = shifted_copy(y, shift)  # LINE:gpu.oob
            return z * 2.0

    return Faulty()


def faulty_inputs(shift=0, device="cuda"):
    """(x, shift): shift 0 is harmless (what the model is exported with), FAR faults."""
    x = torch.randn(1024, generator=torch.Generator().manual_seed(2))
    return x.to(device), torch.tensor([shift], dtype=torch.int64, device=device)
