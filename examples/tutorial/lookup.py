"""The custom-op model: a hand-written C++ op between Inductor kernels.

`mylib::gather_rows(x, idx)` (examples/custom_op/gather_rows.cpp) returns the
rows `idx` of `x`.  Like many hand-written kernels it trusts its indices: a
row id out of range makes it read memory it does not own, and the process
dies with SIGSEGV.  The op logs its calls through aoti-debug's C++ API, so
its inputs are in the log even when it crashes.

The op's library must be loaded before export and before the package runs:
`export.py --library` and `run.py --library` do that
(`aoti-debug-run --library` in C++).
"""

import torch

ROWS = 6


class Lookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, table, rows):                       # table: (6, 8) float32, rows: (n,) int64
        h = torch.relu(self.proj(table))
        picked = torch.ops.mylib.gather_rows(h, rows)     # the custom op: h[rows], unchecked
        return picked.sum(1) * 2


def model():
    torch.manual_seed(0)
    return Lookup().eval()


def example_inputs(rows=(0, 2, 5)):
    table = torch.randn(ROWS, 8, generator=torch.Generator().manual_seed(1))
    return table, torch.tensor(rows)


DYNAMIC_SHAPES = None
