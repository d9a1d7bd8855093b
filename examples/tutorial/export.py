"""Export one of the tutorial's models and compile it into a .pt2 package.

    python export.py ranker ranker.pt2
    python export.py lookup lookup.pt2 --library mylib.so   # a model with a custom op
    python export.py encoder encoder.pt2 --weights encoder.ckpt   # trained weights from a checkpoint

Nothing here mentions aoti-debug: the AOTI_DEBUG_* variables set when this
runs decide what instrumentation is compiled into the package.
"""

import argparse
import importlib
import warnings

import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", choices=["ranker", "lookup", "scaler", "encoder"], help="the module that defines the model")
parser.add_argument("package", help="the .pt2 file to write")
parser.add_argument("--library", action="append", default=[], help="a custom-op library to load first")
parser.add_argument("--weights", help="a checkpoint (state dict) to load into the model; extra keys are ignored")
args = parser.parse_args()

warnings.filterwarnings("ignore", category=FutureWarning)   # torch's own deprecation notices
for library in args.library:
    torch.ops.load_library(library)
module = importlib.import_module(args.model)

model = module.model()
if args.weights:
    model.load_state_dict(torch.load(args.weights), strict=False)
ep = torch.export.export(model, module.example_inputs(), dynamic_shapes=module.DYNAMIC_SHAPES)
path = torch._inductor.aoti_compile_and_package(ep, package_path=args.package)
print("wrote", path)
