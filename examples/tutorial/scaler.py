"""The model with a memory bug: a custom op that writes out of bounds.

`membugs::overrun(x)` (examples/custom_op/memory_bugs.cpp) returns 2 * x and
writes one float more than it allocated.  On a CPU nothing faults: the stray
float lands in the allocator's slack, and every output is right.  The memory
check (AOTI_DEBUG_MEMCHECK) names the launch.

The op's library must be loaded before export and before the package runs,
as for lookup.py.
"""

import torch


class Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.score = torch.nn.Linear(8, 1)

    def forward(self, steps):                                   # steps: (candidates, length, 8)
        s = torch.sigmoid(self.score(steps)).reshape(-1)
        doubled = torch.ops.membugs.overrun(s)                  # the custom op: 2 * s, one float too many
        return doubled.reshape(steps.shape[0], -1).mean(1)


def model():
    torch.manual_seed(0)
    return Scaler().eval()


def example_inputs():
    return (torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(1)),)


DYNAMIC_SHAPES = None
