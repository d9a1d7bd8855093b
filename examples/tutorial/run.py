"""Load a .pt2 package in Python, run it on an input file, summarise the output.

    python run.py PACKAGE INPUTS [--library mylib.so] [--calls N --last OTHER_INPUTS]

This stands for your application: it knows nothing about aoti-debug; the
AOTI_DEBUG_* variables in its environment choose what the package does.
With --calls it stands for a server: N requests, the last one on OTHER_INPUTS.
"""

import argparse

import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("package")
parser.add_argument("inputs", help="a file written by make_inputs.py")
parser.add_argument("--library", action="append", default=[], help="a custom-op library the package calls")
parser.add_argument("--calls", type=int, default=1, help="run the package this many times")
parser.add_argument("--last", help="the inputs of the last call (default: INPUTS)")
args = parser.parse_args()

for library in args.library:
    torch.ops.load_library(library)
model = torch._inductor.aoti_load_package(args.package)
inputs = torch.load(args.inputs)
for call in range(1, args.calls):
    model(*inputs)
out = model(*(torch.load(args.last) if args.last else inputs))
print(f"output: shape={tuple(out.shape)} NaN={int(out.isnan().sum())} Inf={int(out.isinf().sum())}")
