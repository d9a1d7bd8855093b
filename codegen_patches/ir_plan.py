"""What the instrumentation plan reads from Inductor: the FX nodes behind each
launch (the origins of its IR nodes) and the argument roles a generated
kernel's parameter names give.  The plan's own types and the provenance of FX
nodes live in aoti_debug/plan.py, the contract the runtimes read too."""

from __future__ import annotations

import re
from typing import Collection, List, Optional, Sequence, Tuple

from aoti_debug.plan import IN, INOUT, OUT, Dequant, Provenance, op_name, provenance_of_fx_nodes


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
    found = {}
    for name, _position, buffer in _tensor_inputs(ir_node)[1]:
        if name in SCALE_ARGUMENTS:
            found.setdefault(buffer, name)
    return found


def schema_arguments(fx_node, schema) -> dict:
    """An FX node's arguments by its op's schema names, positional and keyword alike."""
    given = dict(zip((a.name for a in schema.arguments), fx_node.args))
    given.update(fx_node.kwargs)
    return given


def _tensor_inputs(ir_node):
    """(the FX node's arguments by schema name, [(schema argument, position in its
    list or None, buffer)] of the IR node's inputs) of an op taking scales; ({}, [])
    when it takes none or its inputs cannot be told."""
    op = getattr(ir_node, "op_overload", None)
    schema = getattr(op, "_schema", None)
    fx_node = getattr(ir_node, "origin_node", None) or next(iter(own_fx_nodes(ir_node)), None)
    if schema is None or fx_node is None \
            or not any(a.name in SCALE_ARGUMENTS for a in schema.arguments):
        return {}, []
    given = schema_arguments(fx_node, schema)
    names: List[Tuple[str, Optional[int]]] = []
    for a in schema.arguments:
        value = given.get(a.name)
        if "Tensor" not in str(a.type) or a.is_out or value is None:
            continue
        if isinstance(value, (list, tuple)):
            names += [(a.name, k) for k in range(len(value))]
        else:
            names.append((a.name, None))
    inputs = list(getattr(ir_node, "inputs", ()) or ())
    if len(inputs) > len(names):
        return {}, []          # inputs the schema does not account for: no guess
    found = []
    for node, (name, position) in zip(inputs, names):
        try:
            found.append((name, position, node.get_name()))
        except Exception:
            continue
    return given, found


# -- how scales apply to operands (docs/log-format.md 3.3) -----------------------

# torch.nn.functional.ScalingType and SwizzleType, as _scaled_mm_v2's int lists spell them
TENSORWISE, ROWWISE, BLOCKWISE_1X16, BLOCKWISE_1X32 = 0, 1, 2, 3
SWIZZLE_32_4_4 = 1


def dequant_operands(ir_node) -> dict:
    """{operand buffer: plan.Dequant} of a _scaled_mm / _scaled_mm_v2 launch whose
    scales' layout can be told at compile time from the op's arguments (their fake
    tensors, _scaled_mm_v2's recipes and swizzles): tensorwise, rowwise, MXFP8/MXFP4
    (float8_e8m0fnu, one per 32 along K) and NVFP4 (float8_e4m3fn, one per 16, times a
    float32 tensor-wide scale in _scaled_mm_v2).  Empty otherwise (the 1x128 and
    128x128 block recipes, _scaled_grouped_mm, anything symbolic or unexpected): no
    dequantized statistics rather than a guess."""
    try:
        return _dequant_operands(ir_node)
    except Exception:
        return {}


def _fake(value):
    meta = getattr(value, "meta", None)
    return meta.get("val") if isinstance(meta, dict) else None


def _dims(t) -> Optional[Tuple[int, ...]]:
    try:
        return tuple(int(d) for d in t.shape)
    except Exception:          # symbolic
        return None


def _numel(dims: Tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _dequant_operands(ir_node) -> dict:
    import torch
    given, inputs = _tensor_inputs(ir_node)
    op = ir_node.op_overload._schema.name       # _tensor_inputs found a schema
    buffers = {(name, position): buffer for name, position, buffer in inputs}
    if not given or "self" not in given or "mat2" not in given:
        return {}
    a, b = _fake(given["self"]), _fake(given["mat2"])
    if a is None or b is None:
        return {}
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    a_dims, b_dims = _dims(a), _dims(b)
    if a_dims is None or b_dims is None or len(a_dims) != 2 or len(b_dims) != 2:
        return {}
    packed = 2 if a.dtype == fp4 else 1
    m, k, n = a_dims[0], a_dims[1] * packed, b_dims[1]
    found = {}
    if op == "aten::_scaled_mm":
        sa, sb = _fake(given.get("scale_a")), _fake(given.get("scale_b"))
        if sa is None or sb is None or ("self", None) not in buffers or ("mat2", None) not in buffers:
            return {}
        for operand, scale, name, outer, kdim in (("self", sa, "scale_a", m, 1), ("mat2", sb, "scale_b", n, 0)):
            layout = _v1_layout(scale, sa, sb, outer, k, torch)
            if layout is None:
                return {}
            kind, block, swizzled, words = layout
            found[buffers[(operand, None)]] = Dequant(buffers[(name, None)], kind, f"{name} ({words})", kdim,
                                                      block, swizzled)
        return found
    if op == "aten::_scaled_mm_v2":
        if given.get("contraction_dim") not in (None, [], (), [1, 0], (1, 0)):
            return {}
        for operand, name, outer, kdim in (("self", "scale_a", m, 1), ("mat2", "scale_b", n, 0)):
            recipe = [int(r) for r in given.get(name.replace("scale", "recipe"), ())]
            swizzle = [int(r) for r in given.get(name.replace("scale", "swizzle"), ()) or ()]
            scales = [_fake(t) for t in given.get(name, ())]
            got = _v2_layout(recipe, swizzle, scales, outer, k, torch)
            if got is None or (operand, None) not in buffers or any((name, q) not in buffers for q in range(len(scales))):
                return {}
            kind, block, swizzled, words = got
            label = f"{name}[0] ({words})" + (f" * {name}[1] (tensorwise)" if len(scales) == 2 else "")
            found[buffers[(operand, None)]] = Dequant(buffers[(name, 0)], kind, label, kdim, block, swizzled,
                                                      buffers[(name, 1)] if len(scales) == 2 else "")
        return found
    return {}


def _block_words(block: int, swizzled: bool) -> str:
    return f"block 1x{block}" + (", swizzled" if swizzled else "")


def _v1_layout(scale, sa, sb, outer: int, k: int, torch):
    """_scaled_mm's rules (torch/_meta_registrations.py, _check_scaled_mm_sizes): both
    scales one element: tensorwise; both float8_e8m0fnu or both float8_e4m3fn: blocks of
    32 / 16 along K in cuBLAS's tiles; float32 (M, 1) and (1, N): rowwise."""
    dims, a_dims, b_dims = _dims(scale), _dims(sa), _dims(sb)
    if dims is None or a_dims is None or b_dims is None:
        return None
    if _numel(a_dims) == 1 and _numel(b_dims) == 1 and sa.dtype == sb.dtype == torch.float32:
        return "tensorwise", 0, False, "tensorwise"
    for dtype, block in ((torch.float8_e8m0fnu, 32), (torch.float8_e4m3fn, 16)):
        if sa.dtype == sb.dtype == dtype:
            kblocks = -(-k // block)
            if _numel(dims) != -(-outer // 128) * 128 * -(-kblocks // 4) * 4:
                return None
            return "block", block, True, _block_words(block, True)
    if sa.dtype == sb.dtype == torch.float32 and len(a_dims) == len(b_dims) == 2 \
            and a_dims[1] == 1 and b_dims[0] == 1 and _numel(dims) == outer:
        return "rowwise", 0, False, "rowwise"
    return None                 # the 1x128 / 128x128 recipes, or not as torch checks


def _v2_layout(recipe, swizzle, scales, outer: int, k: int, torch):
    """_scaled_mm_v2's recipe list for one operand: [TensorWise], [RowWise],
    [BlockWise1x32] (float8_e8m0fnu), [BlockWise1x16] or [BlockWise1x16, TensorWise]
    (float8_e4m3fn, then a float32 tensor-wide scale); its swizzle list says whether the
    block scales are in cuBLAS's tiles."""
    if any(s is None for s in scales) or len(scales) != len(recipe) or not scales:
        return None
    dims = [_dims(s) for s in scales]
    if any(d is None for d in dims):
        return None
    swizzled = bool(swizzle) and swizzle[0] == SWIZZLE_32_4_4
    if recipe == [TENSORWISE] and _numel(dims[0]) == 1:
        return "tensorwise", 0, False, "tensorwise"
    if recipe == [ROWWISE] and _numel(dims[0]) == outer:
        return "rowwise", 0, False, "rowwise"
    blocks = {BLOCKWISE_1X32: (32, torch.float8_e8m0fnu), BLOCKWISE_1X16: (16, torch.float8_e4m3fn)}
    if recipe and recipe[0] in blocks and (len(recipe) == 1 or (recipe[1:] == [TENSORWISE] and recipe[0] ==
                                                                BLOCKWISE_1X16 and _numel(dims[1]) == 1)):
        block, dtype = blocks[recipe[0]]
        if scales[0].dtype != dtype:
            return None
        kblocks = -(-k // block)
        want = -(-outer // 128) * 128 * -(-kblocks // 4) * 4 if swizzled else outer * kblocks
        if _numel(dims[0]) != want:
            return None
        return "block", block, swizzled, _block_words(block, swizzled)
    return None


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
