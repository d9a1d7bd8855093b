"""The instrumentation plan as TORCH_TRACE artifacts, so tlparse shows it
beside the generated code: the settings in force, every launch with its
kernel, provenance and argument roles, and the input guards."""

from __future__ import annotations

import json
from typing import List


def emit_plan(settings, sites, inputs: List[dict]) -> None:
    from torch._logging._internal import trace_structured_artifact
    plan = {
        "settings": {"level": settings.level, "kernels": list(settings.kernels),
                     "check_inputs": settings.check_inputs, "nan_check": str(settings.nan_check),
                     "compile": settings.compile},
        "launches": [site.to_json() for site in sites],
        "inputs": inputs,
    }
    trace_structured_artifact("aoti_debug_plan", "json", payload_fn=lambda: json.dumps(plan, indent=1))


def input_plan(names, labels) -> List[dict]:
    """Each model input as the guards see it: label, dtype, device, sizes and symbol ranges."""
    import sympy
    from torch._inductor.virtualized import V
    ranges = V.graph.sizevars.shape_env.var_to_range
    out = []
    for name, label in zip(names, labels):
        node = V.graph.graph_inputs[name]
        symbols = {s for e in node.get_size() for s in sympy.sympify(e).free_symbols}
        out.append({"name": name, "label": label, "dtype": str(node.get_dtype()),
                    "device": str(node.get_device()),
                    "sizes": [str(s) for s in node.get_size()],
                    "strides": [str(s) for s in node.get_stride()],
                    "ranges": {str(s): [str(ranges[s].lower), str(ranges[s].upper)]
                               for s in sorted(symbols, key=str) if s in ranges}})
    return out
