"""Write the tutorial's input files, good and bad, for run.py and aoti-debug-run.

    python make_inputs.py

Each file is a list of tensors saved with aoti_debug.runner.save_inputs, the
format that both run.py and the C++ runner `aoti-debug-run --inputs` read.
"""

import torch

import encoder
import lookup
import ranker
from aoti_debug.runner import save_inputs

files = {
    "good.pt": ranker.example_inputs(),
    "too_many.pt": ranker.example_inputs(candidates=100),      # the package accepts 2 to 64
    "float64.pt": ranker.example_inputs(dtype=torch.float64),  # the package is float32
    "spike.pt": ranker.example_inputs(spike=True),             # one step a hundred times too large
    "rows.pt": lookup.example_inputs(),
    "bad_rows.pt": lookup.example_inputs(rows=(0, 1 << 44, 5)),  # a corrupted row id
    "features.pt": encoder.example_inputs(),
}
for name, inputs in files.items():
    save_inputs(name, inputs)
    print(f"{name:<12}", ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in inputs))
