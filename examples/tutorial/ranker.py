"""The tutorial's model: scores candidate sequences, with a numerical bug.

Each candidate is a sequence of steps with 8 features.  The model scores
every step, turns the scores into probabilities, and ranks the candidates by
their running log-probability:

    launch  kernel                what it computes
    1.3     log(sigmoid(...))     per-step log-probability    <- the bug
    1.4     cumsum                running total over the steps
    1.5     sort                  candidates, best first
    1.6     mean, sub             scores relative to the average

The bug: `torch.log(torch.sigmoid(s))` is exact in mathematics but not in
float32.  For a very negative score, sigmoid underflows to 0 and the log is
-inf (`F.logsigmoid(s)` would be finite).  Nothing is NaN yet: the cumsum and
the sort carry the -inf along, and only the last kernel, which subtracts the
average (-inf - -inf), turns it into NaN: three kernels after the cause.
"""

import torch
from torch.export import Dim

FEATURES = 8


class Ranker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.score = torch.nn.Linear(FEATURES, 1)

    def forward(self, steps):                                   # steps: (candidates, length, 8)
        p = torch.sigmoid(self.score(steps)).squeeze(-1)
        logp = torch.log(p)                                     # BUG: -inf once sigmoid underflows to 0
        total = torch.cumsum(logp, dim=1)                       # running log-probability
        ranked = torch.sort(total, dim=0, descending=True).values
        return ranked - ranked.mean(0, keepdim=True)            # NaN: -inf - -inf


def model():
    torch.manual_seed(0)
    return Ranker().eval()


def example_inputs(candidates=4, length=6, dtype=torch.float32, spike=False):
    """Seeded inputs; `spike` makes one step's features a hundred times too large."""
    steps = torch.randn(candidates, length, FEATURES, generator=torch.Generator().manual_seed(1)).to(dtype)
    if spike:
        steps[2, 3] = -100 * torch.sign(model().score.weight.detach()[0])   # score about -130
    return (steps,)


# The number of candidates is dynamic: one artifact serves 2 to 64 of them.
DYNAMIC_SHAPES = ({0: Dim("candidates", min=2, max=64)},)
