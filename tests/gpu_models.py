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
# `offset` elements past its output, far outside any allocation: an
# asynchronous illegal memory access planted at a known line.
def faulty(offset=1 << 36):
    import triton
    import triton.language as tl

    @triton.jit
    def shifted_store(x_ptr, out_ptr, n, offset, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = i < n
        tl.store(out_ptr + i + offset, tl.load(x_ptr + i, mask=keep), mask=keep)

    @torch.library.triton_op("aotid_gpu::shifted_copy", mutates_args=())
    def shifted_copy(x: torch.Tensor, offset: int) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        torch.library.wrap_triton(shifted_store)[(triton.cdiv(n, 256),)](x, out, n, offset, BLOCK=256)
        return out

    class Faulty(torch.nn.Module):
        def forward(self, x):
            y = torch.relu(x)
            z = shifted_copy(y, offset)  # LINE:gpu.oob
            return z * 2.0

    return Faulty()
