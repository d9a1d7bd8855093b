"""The model of section 10: three identical residual layers and a head.

All three layers run the same line of `Layer.forward`, so a source line alone
cannot say which layer a finding is about; the module path (`layers.1.fc`)
can.

    python encoder.py encoder.ckpt    # the trained weights, as the fine-tuning job saved them

The bug is in how the package gets its weights, not in the model: the
fine-tuning job wrapped layer 1's projection in an adapter, so the checkpoint
holds that layer's weights under `layers.1.fc.base.*`.  export.py loads
checkpoints with `strict=False` (checkpoints often carry extra keys), which
skips those two keys without a word: layer 1 keeps its initial weights.
"""

import sys

import torch

WIDTH = 8


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))                       # every layer runs this line


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(3)])
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x):                                       # x: (rows, 8)
        for layer in self.layers:
            x = layer(x)
        return self.head(x).squeeze(-1)


def model():
    """The model before training: what export.py starts from."""
    torch.manual_seed(0)
    return Encoder().eval()


def trained():
    """The model as trained (here: other random weights), as it runs in Python."""
    torch.manual_seed(1)
    return Encoder().eval()


def example_inputs():
    return (torch.randn(4, WIDTH, generator=torch.Generator().manual_seed(2)),)


DYNAMIC_SHAPES = None


def checkpoint():
    """The trained weights under the names the fine-tuning job gave them."""
    return {name.replace("layers.1.fc.", "layers.1.fc.base."): value
            for name, value in trained().state_dict().items()}


if __name__ == "__main__":
    torch.save(checkpoint(), sys.argv[1])
