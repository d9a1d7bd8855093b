"""Write the eager reference log of a tutorial model, for `aoti-debug diff`.

    AOTI_DEBUG_LOGDEST=eager.log python reference.py encoder features.pt

Runs the model as it runs in Python (the module's `trained()` model where it
has one, else `model()`) in eager mode on an input file of make_inputs.py,
with aoti_debug.eager_log: one launch record per node of the graph that
Inductor compiles, with the same node names, source lines and module paths
as the package's records.
"""

import argparse
import importlib
import warnings

import torch

import aoti_debug

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", help="the module that defines the model")
parser.add_argument("inputs", help="a file written by make_inputs.py")
args = parser.parse_args()

warnings.filterwarnings("ignore", category=FutureWarning)   # torch's own deprecation notices
module = importlib.import_module(args.model)
model = module.trained() if hasattr(module, "trained") else module.model()
out = aoti_debug.eager_log(model, torch.load(args.inputs), dynamic_shapes=module.DYNAMIC_SHAPES)
print(f"output: shape={tuple(out.shape)} NaN={int(out.isnan().sum())} Inf={int(out.isinf().sum())}")
