"""What the instrumentation plan reads from Inductor: the FX nodes behind each
launch (the origins of its IR nodes) and the argument roles a generated
kernel's parameter names give.  The plan's own types and the provenance of FX
nodes live in aoti_debug/plan.py, the contract the runtimes read too."""

from __future__ import annotations

import re
from typing import Collection, List, Optional, Sequence, Tuple

from aoti_debug.plan import IN, INOUT, OUT, Provenance, op_name, provenance_of_fx_nodes


# -- the FX nodes of a launch -------------------------------------------------

def provenance_of_schedule(node_schedule: Sequence, elsewhere: Collection = ()) -> Provenance:
    """The FX nodes a fused kernel computes, in schedule order: the origins of
    its IR nodes (the op of each buffer with the producers inlined into it),
    less `elsewhere`, the nodes an extern kernel or custom op launch computes.
    Inductor counts the node being lowered among the origins of everything its
    lowering creates, so the copy it makes of an input in the layout a custom
    op requires lists the op, which runs in a launch of its own."""
    fx_nodes: List = []
    for snode in node_schedule:
        for ir_node in _ir_nodes(snode):
            fx_nodes += [n for n in _sorted_origins(getattr(ir_node, "origins", ()) or ())
                         if n not in elsewhere]
    return provenance_of_fx_nodes(fx_nodes)


def own_fx_nodes(ir_node) -> List:
    """The FX nodes an extern kernel or custom op itself computes: the node whose
    value it is (origin_node), else, for a fallback kernel returning several
    tensors, the origins calling its op.  Empty when Inductor does not say."""
    origin = getattr(ir_node, "origin_node", None)
    if origin is not None:
        return [origin]
    op = getattr(ir_node, "op_overload", None)
    origins = _sorted_origins(getattr(ir_node, "origins", ()) or ())
    if getattr(ir_node, "kernel_idx", None) is not None:
        # a user-defined Triton kernel: the wrapper op it lowers (the copy of an
        # input made for it also lists that op, and is computed elsewhere)
        return [n for n in origins if op_name(n).startswith("triton_kernel_wrapper")]
    return [n for n in origins if op is not None and getattr(n, "target", None) == op]


def provenance_of_ir_node(ir_node) -> Provenance:
    """An extern kernel or custom op computes its own op only: its IR node's
    other origins are the ops that produced its inputs (other launches)."""
    return provenance_of_fx_nodes(own_fx_nodes(ir_node)
                                  or _unconsumed(_sorted_origins(getattr(ir_node, "origins", ()) or ())))


def _unconsumed(fx_nodes: List) -> List:
    """The nodes no other of `fx_nodes` reads.  An extern kernel's origins are
    the op being lowered and the producers it reads (all upstream of it), so
    when Inductor does not name its op, the op is the one nothing else reads."""
    fed = {p for n in fx_nodes for p in getattr(n, "all_input_nodes", ())}
    return [n for n in fx_nodes if n not in fed] or fx_nodes


def _ir_nodes(snode) -> List:
    inner = getattr(snode, "get_nodes", None)
    nodes = inner() if callable(inner) else [snode]
    return [getattr(n, "node", None) for n in nodes if getattr(n, "node", None) is not None]


def _sorted_origins(origins) -> List:
    def position(node):
        key = getattr(node, "_sort_key", None)
        return (0, key) if key is not None else (1, ())
    try:
        return sorted(origins, key=position)
    except TypeError:
        return list(origins)

# -- scale arguments ------------------------------------------------------------

# The schema arguments through which an op takes a scale of its operands or of its
# result: _scaled_mm, _scaled_mm_v2 (block-scaled; a list of scales each) and
# _scaled_grouped_mm name them so.
SCALE_ARGUMENTS = ("scale_a", "scale_b", "scale_result")


def scale_buffers(ir_node) -> dict:
    """{buffer name: schema argument} of the scales an extern kernel or custom op
    reads: its IR inputs are its op's tensor arguments in schema order, those the
    FX node passes as None left out (tuned _scaled_mm's inputs stop before
    scale_result).  Empty when the op or its FX node is not known, or not as
    expected: a launch whose scales cannot be told is instrumented as before."""
    try:
        return _scale_buffers(ir_node)
    except Exception:
        return {}


def _scale_buffers(ir_node) -> dict:
    op = getattr(ir_node, "op_overload", None)
    schema = getattr(op, "_schema", None)
    fx_node = getattr(ir_node, "origin_node", None) or next(iter(own_fx_nodes(ir_node)), None)
    if schema is None or fx_node is None \
            or not any(a.name in SCALE_ARGUMENTS for a in schema.arguments):
        return {}
    given = dict(zip((a.name for a in schema.arguments), fx_node.args))
    given.update(fx_node.kwargs)
    names: List[str] = []
    for a in schema.arguments:
        value = given.get(a.name)
        if "Tensor" not in str(a.type) or a.is_out or value is None:
            continue
        names += [a.name] * (len(value) if isinstance(value, (list, tuple)) else 1)
    inputs = list(getattr(ir_node, "inputs", ()) or ())
    if len(inputs) > len(names):
        return {}              # inputs the schema does not account for: no guess
    found = {}
    for node, name in zip(inputs, names):
        try:
            buffer = node.get_name()
        except Exception:
            continue
        if name in SCALE_ARGUMENTS:
            found.setdefault(buffer, name)
    return found


# -- argument roles from kernel signatures -------------------------------------


_CPP_SIGNATURE = re.compile(r'extern\s+"C"[^(]*?\b(\w+)\s*\(([^)]*)\)', re.S)
_PY_SIGNATURE = re.compile(r"def\s+(\w+)\s*\(([^)]*)\)", re.S)


def roles_from_parameter_names(params: Sequence[str]) -> List[Optional[str]]:
    """Inductor names kernel parameters in_ptrN / out_ptrN / in_out_ptrN."""
    roles: List[Optional[str]] = []
    for p in params:
        if p.startswith("in_out_ptr"):
            roles.append(INOUT)
        elif p.startswith("in_ptr"):
            roles.append(IN)
        elif p.startswith("out_ptr"):
            roles.append(OUT)
        else:
            roles.append(None)       # scalar, size, or a name we cannot read
    return roles


def parameter_names_cpp(definition: str) -> Optional[Tuple[str, List[str]]]:
    m = _CPP_SIGNATURE.search(definition)
    if not m:
        return None
    names = []
    for piece in m.group(2).split(","):
        piece = piece.strip()
        if piece:
            names.append(re.split(r"[\s*&]+", piece)[-1])
    return m.group(1), names


def parameter_names_python(source: str) -> Optional[Tuple[str, List[str]]]:
    m = _PY_SIGNATURE.search(source)
    if not m:
        return None
    names = [p.split(":")[0].split("=")[0].strip() for p in m.group(2).split(",")]
    return m.group(1), [n for n in names if n]
