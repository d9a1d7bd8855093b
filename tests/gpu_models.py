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
