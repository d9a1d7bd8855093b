"""aoti_debug.eager_log: the eager reference `aoti-debug diff` compares an
artifact with.

The eager run must execute the very graph whose node names the artifact's
records carry: the graph Inductor lowers, after export, AOT autograd's
decompositions, the joint-graph passes and the post-grad passes.  Inductor's
own AOT front end makes it (codegen_patches/lowered_graph.py: its
`inner_compile` replaced by one that keeps the graph and stops before code
generation); the eager runtime (runtime/eager.py) runs it and writes the
records.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .codegen_patches.lowered_graph import lowered_graph
from .runtime.eager import Reference


def eager_log(model: Any, args: Sequence[Any], kwargs: Optional[Dict[str, Any]] = None, *,
              dynamic_shapes: Any = None, inductor_configs: Optional[Dict[str, Any]] = None,
              name: str = "eager") -> Any:
    """Run `model` on `args`/`kwargs` in eager mode, writing the eager reference log.

    `model`: an nn.Module (exported here with `dynamic_shapes`) or the
    ExportedProgram given to aoti_compile_and_package; `inductor_configs`: the
    ones given to it (they change the graph, e.g. freezing).  Returns the
    model's outputs."""
    import torch
    if isinstance(model, torch.export.ExportedProgram):
        ep = model
    else:
        ep = torch.export.export(model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes)
    gm, flat, out_spec = lowered_graph(ep, tuple(args), kwargs or {}, inductor_configs)
    labels = [s.arg.name for s in ep.graph_signature.input_specs
              if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    with torch.no_grad():
        outputs = Reference(gm, name, labels).run(flat)
    if out_spec is None:
        return outputs
    return torch.utils._pytree.tree_unflatten(list(outputs), out_spec)
