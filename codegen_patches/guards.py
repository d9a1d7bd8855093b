"""Input guards: what the compiled code assumes about every model input.

Built from the graph's inputs and its shape environment at codegen time,
emitted as straight-line C++ over checks.h's InputGuard.  Only what
the kernels rely on is checked: rank, static sizes, dynamic sizes against
their ranges and recorded relations, dtype, device, strides of dimensions
longer than 1, and 16-byte alignment for GPU inputs Inductor compiled as
aligned (CPU kernels use unaligned loads, so CPU views at any offset pass).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence

from . import ir_queries, sizeexpr
from .cpp_emit import c_string, scalar_type

DEVICE_TYPE = {"cpu": 0, "cuda": 1}


@dataclasses.dataclass
class CompileContext:
    """What the export knew and Inductor forgets: the user's names."""
    labels: List[str]                       # per tensor among the flattened user inputs: x, batch["mask"]
    dim_names: Dict[tuple, str]             # (index in labels, dim) -> Dim name
    # (index in labels, dim) -> (declared minimum, as declared: "min=1", "Dim.DYNAMIC")
    declared: Dict[tuple, tuple] = dataclasses.field(default_factory=dict)


_context: Optional[CompileContext] = None


def set_context(ctx: Optional[CompileContext]) -> None:
    global _context
    _context = ctx


def context() -> Optional[CompileContext]:
    return _context


def labels_for(names: Sequence[str]) -> List[str]:
    ctx = _context
    if ctx is not None and len(ctx.labels) == len(names):
        return list(ctx.labels)
    if not ir_queries.is_aot():       # torch.compile's C++ wrapper: Dynamo's names, as its Python wrapper's
        return ir_queries.python_input_labels(list(names))
    return list(names)


def label_map() -> Dict[str, str]:
    """Graph input name -> the user's label, for the tensor inputs of the graph being compiled."""
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if ir_queries.is_tensor_input(n)]
    return dict(zip(names, labels_for(names)))


def _symbol_cpp(sym) -> str:
    return f"aotid_{sym}"


def emit(names: Sequence[str], labels: Sequence[str], nan_check) -> List[str]:
    """C++ lines of the guard block (placed after AOTI_DEBUG_BEGIN_RUN).

    Sizes come first: a relation export recorded is evaluated only once every size
    in it is within its compiled range (outside, the range says what is wrong, and
    Mod(1, width//16) may divide by zero); derived sizes and strides over the sizes
    given.  All of it with checked arithmetic (sizeexpr.py), so nothing traps.  A check that cannot be expressed is left out, said once at
    compile time and once at run time (left_out)."""
    import sympy
    from torch._inductor.virtualized import V

    graph = V.graph
    shape_env = graph.sizevars.shape_env
    ranges = shape_env.var_to_range
    unaligned = getattr(graph, "unaligned_buffers", set())
    ctx = _context
    symbol_names: Dict[object, str] = {}
    left_out: List[str] = []

    lines = ["if (AOTI_DEBUG_UNLIKELY(aotid_model.check_inputs())) {",
             "  aoti_debug::InputGuard aotid_guard(aotid_model);",
             "  namespace aotid_sx = aoti_debug::detail::sizeexpr;"]
    inputs = [graph.graph_inputs[n] for n in names]
    values = []
    for i, (name, node) in enumerate(zip(names, inputs)):
        lines.append(f"  auto aotid_g{i} = aoti_debug::tensor(aoti_debug_gen::handle({name}));")
        values.append(f"aotid_g{i}")

    # symbols first, so every relation can be evaluated whatever the input order
    free = set()
    for node in inputs:
        for e in list(node.get_size()) + list(node.get_stride()):
            free |= set(sympy.sympify(e).free_symbols)
    for sym in sorted(free, key=str):
        lines.append(f"  int64_t {_symbol_cpp(sym)} = 0; bool {_symbol_cpp(sym)}_bound = false, "
                     f"{_symbol_cpp(sym)}_in = false;")

    def bound(expr, within: bool = False) -> str:
        """Every symbol of expr read (and, `within`, inside its range)."""
        syms = sorted(sympy.sympify(expr).free_symbols, key=str)
        return " && ".join(f"{_symbol_cpp(s)}_{'in' if within else 'bound'}" for s in syms) or "true"

    def human(expr) -> str:
        expr = sympy.sympify(expr)
        try:
            return str(expr.subs({s: sympy.Symbol(symbol_names.get(s, str(s)), integer=True)
                                  for s in expr.free_symbols}))
        except Exception:        # substitution re-evaluates torch's functions, which may assert
            return str(expr)

    def checked(expr, what: str) -> Optional[str]:
        try:
            return sizeexpr.cpp(expr, _symbol_cpp)
        except Exception as e:
            left_out.append(f"{what} ({human(expr)}: {e.__class__.__name__} {e})")
            return None

    deferred: List[str] = []
    for i, (label, node) in enumerate(zip(labels, inputs)):
        sizes, strides = list(node.get_size()), list(node.get_stride())
        device = node.get_device()
        dtype = str(node.get_dtype()).replace("torch.", "")
        body = [f"aotid_guard.dtype({c_string(label)}, aotid_g{i}, {scalar_type(dtype)});"]
        if device is not None and device.type in DEVICE_TYPE:
            index = device.index if device.type != "cpu" and device.index is not None else -1
            body.append(f"aotid_guard.device({c_string(label)}, aotid_g{i}, "
                        f"{DEVICE_TYPE[device.type]}, {index});")
            if device.type == "cuda" and names[i] not in unaligned:
                body.append(f"aotid_guard.aligned({c_string(label)}, aotid_g{i}, 16);")
        for d, size in enumerate(sizes):
            size = sympy.sympify(size)
            if size.is_number:
                body.append(f"aotid_guard.static_dim({c_string(label)}, aotid_g{i}, {d}, {int(size)});")
            elif isinstance(size, sympy.Symbol) and size not in symbol_names:
                symbol_names[size] = (ctx.dim_names.get((i, d)) if ctx else None) or f"{label}.shape[{d}]"
                lo, hi = _range(ranges.get(size))
                below = _below(lo, symbol_names[size], ctx.declared.get((i, d)) if ctx else None)
                body.append(f"{_symbol_cpp(size)} = aotid_guard.size(aotid_g{i}, {d}); "
                            f"{_symbol_cpp(size)}_bound = true; {_symbol_cpp(size)}_in = "
                            f"aotid_guard.range({c_string(label)}, aotid_g{i}, {d}, {lo}, {hi}, "
                            f"{c_string(symbol_names[size])}" + (f", {c_string(below)}" if below else "") + ");")
            else:
                value = checked(size, f"{label}.shape[{d}]")
                if value is not None:
                    deferred.append(f"  if (aotid_ok{i} && {bound(size)}) aotid_guard.equals({c_string(label)}, "
                                    f"aotid_g{i}, {d}, {value}, {c_string(human(size))});")
        static_strides = []
        for d, stride in enumerate(strides):
            stride = sympy.sympify(stride)
            if stride.is_number:
                static_strides.append(f"aotid_guard.stride({c_string(label)}, aotid_g{i}, {d}, {int(stride)});")
                continue
            value = checked(stride, f"{label}.stride({d})")
            if value is not None:
                deferred.append(f"  if (aotid_ok{i} && aotid_guard.count() == aotid_n{i} && {bound(stride)}) "
                                f"aotid_guard.stride({c_string(label)}, aotid_g{i}, {d}, {value}, "
                                f"{c_string(human(stride))});")
        if static_strides:
            body.append(f"if (aotid_guard.count() == aotid_n{i}) {{ {' '.join(static_strides)} }}")
        if nan_check.enabled and node.get_dtype().is_floating_point:
            body.append(f"aotid_guard.finite({c_string(label)}, aotid_g{i}, "
                        f"{'true' if nan_check.count_inf else 'false'});")
        lines.append(f"  const size_t aotid_n{i} = aotid_guard.count();")
        lines.append(f"  const bool aotid_ok{i} = aotid_guard.rank({c_string(label)}, aotid_g{i}, {len(sizes)});")
        lines.append(f"  if (aotid_ok{i}) {{ " + " ".join(body) + " }")
    lines += deferred
    for relation in _relations(shape_env, free):
        value = checked(relation, "the relation")
        if value is None:
            continue
        values_text = " + \", \" + ".join(
            f"std::string({c_string(symbol_names.get(s, str(s)) + ' = ')}) + std::to_string({_symbol_cpp(s)})"
            for s in sorted(relation.free_symbols, key=str))
        lines.append(f"  if ({bound(relation, within=True)}) aotid_guard.relation({value}, "
                     f"{c_string(human(relation))}, {values_text or 'std::string()'});")
    for what in left_out:
        lines.append(f"  aotid_guard.left_out(aotid_run, {c_string(what)});")
    lines.append(f"  aotid_guard.finish(aotid_run, aotid_inputs, {{{', '.join(values)}}});")
    lines.append("}")
    if left_out:
        _say_left_out(left_out)
    return lines


def emit_or_leave_out(names: Sequence[str], labels: Sequence[str], nan_check) -> List[str]:
    """emit(), or, where building the guard fails on something unforeseen, a guard
    that only says it was left out: instrumentation never fails a compile."""
    try:
        return emit(names, labels, nan_check)
    except Exception as e:
        what = f"the whole input guard ({e.__class__.__name__}: {e})"
        _say_left_out([what])
        return ["if (AOTI_DEBUG_UNLIKELY(aotid_model.check_inputs())) {",
                f"  aoti_debug::InputGuard(aotid_model).left_out(aotid_run, {c_string(what)});",
                "}"]


def _say_left_out(what: List[str]) -> None:
    """The compile-time half of left_out: one line per check on stderr."""
    import sys
    for w in what:
        sys.stderr.write(f"aoti-debug: the input guard of model '{ir_queries.model_name()}' leaves out "
                         f"a check it cannot express: {w}\n")
    sys.stderr.flush()


def _below(lo, name: str, declared: Optional[tuple]) -> str:
    """Why a size below the compiled lower bound was declared acceptable and is not: the
    compile specialises sizes 0 and 1 (ShapeEnv's specialize_zero_one), so a dynamic
    size declared from 0 or 1 is compiled for 2 and up.  "" when the bound is the
    user's own (declared min=2 or more) or the declaration is unknown."""
    if lo != 2 or declared is None or declared[0] >= 2:
        return ""
    return (f" ({name} was declared {declared[1]}, but torch.export and Inductor specialise sizes 0 "
            "and 1, so a dynamic size is compiled for 2 and up; to accept smaller sizes, export and "
            "compile under torch.fx.experimental._config.patch(backed_size_oblivious=True))")


def _range(vr) -> tuple:
    """(lowest, highest) size a symbol's value range allows; an unbounded end is 0
    below and INT64_MAX above (a Dim without max, Dim.AUTO, Dim.DYNAMIC)."""
    if vr is None:
        return 0, "INT64_MAX"
    lo, hi = _finite(vr.lower), _finite(vr.upper)
    return max(lo or 0, 0), hi if hi is not None and hi < 2**62 else "INT64_MAX"


def _finite(bound) -> Optional[int]:
    """The bound as an int, None if infinite: torch's int_oo says is_finite but has no
    value int() can take."""
    try:
        return int(bound) if bound.is_finite else None
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None


def _relations(shape_env, symbols) -> list:
    """Relations export recorded between the input symbols, not already implied by sizes."""
    import sympy
    found = []
    candidates = [g.expr for g in getattr(shape_env, "guards", [])]
    for asserts in getattr(shape_env, "deferred_runtime_asserts", {}).values():
        candidates += [ra.expr for ra in asserts]
    for expr in candidates:
        expr = _simplified(shape_env, expr)
        if expr in (sympy.true, sympy.false) or not expr.free_symbols <= set(symbols):
            continue
        if _is_range_only(expr) or _outside_range(expr, shape_env.var_to_range):
            continue
        if expr not in found:
            found.append(expr)
    return found


def _simplified(shape_env, expr):
    """The expression under the shape environment's replacements and its own
    (deterministic) simplification; as it is where either fails.  Never
    sympy.simplify: it evaluates at random points, where torch's Mod asserts."""
    for step in ("replace", "simplify"):
        try:
            expr = getattr(shape_env, step)(expr)
        except Exception:
            pass
    return expr


def _outside_range(expr, ranges) -> bool:
    """Ne(batch, 1) where 1 is outside batch's range: range() says it, with why (0/1
    specialisation records both)."""
    import sympy
    if not (isinstance(expr, sympy.Ne) and len(expr.free_symbols) == 1):
        return False
    sym, value = (expr.args if expr.args[0].is_Symbol else expr.args[::-1])
    if not (sym.is_Symbol and value.is_number and sym in ranges):
        return False
    lo, hi = _range(ranges[sym])
    return int(value) < lo or (hi != "INT64_MAX" and int(value) > hi)


def _is_range_only(expr) -> bool:
    """Bounds of one symbol are checked by range() already."""
    import sympy
    return isinstance(expr, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)) and len(expr.free_symbols) == 1 \
        and all(a.is_Symbol or a.is_number for a in expr.args)


# -- the user's names, taken from the exported program -------------------------

def _tensor_leaves(args, kwargs) -> list:
    """(path, tensor) of every tensor among the user's inputs, in the order
    export makes them graph inputs (other leaves, such as ints, are constants)."""
    import torch
    import torch.utils._pytree as pytree
    leaves = pytree.tree_flatten_with_path((tuple(args), dict(kwargs or {})))[0]
    return [(path, leaf) for path, leaf in leaves if isinstance(leaf, torch.Tensor)]


def context_from_exported_program(ep) -> Optional[CompileContext]:
    """Labels (`x`, `batch["mask"]`) for the tensor inputs, and Dim names."""
    import torch.utils._pytree as pytree
    try:
        args, kwargs = ep.example_inputs
        params = list(ep.module().graph._codegen.pytree_info.orig_args)
    except Exception:
        return None
    leaves = _tensor_leaves(args, kwargs)
    labels: List[str] = []
    for path, _ in leaves:
        head, rest = path[0], path[1:]
        if getattr(head, "idx", None) == 0 and rest:          # positional
            index = rest[0].idx
            base = params[index] if index < len(params) else f"args[{index}]"
            tail = rest[1:]
        elif rest:                                           # keyword
            base, tail = str(getattr(rest[0], "key", rest[0])), rest[1:]
        else:
            base, tail = "input", rest
        labels.append(base + pytree.keystr(tail).replace("'", '"'))
    def by_index(found):
        return {(i, d): value for i, (path, _) in enumerate(leaves)
                for (p, d), value in found.items() if p == pytree.keystr(path)}
    return CompileContext(labels, by_index(getattr(ep, "_aoti_debug_dim_names", {})),
                          by_index(getattr(ep, "_aoti_debug_declared", {})))


def _declared_dims(mod, args, kwargs, dynamic_shapes):
    """(input path, dim, what dynamic_shapes gave it) for every form of dynamic_shapes
    torch.export accepts: paired with the inputs exactly as export pairs them
    (ir_queries.tensor_shape_specs); the path is the tensor's keystr in (args, kwargs)."""
    import torch.utils._pytree as pytree
    where: Dict[int, str] = {}
    for path, tensor in reversed(_tensor_leaves(args, kwargs)):   # a tensor given twice: its first place
        where[id(tensor)] = pytree.keystr(path)
    for tensor, spec in ir_queries.tensor_shape_specs(mod, args, kwargs, dynamic_shapes):
        if isinstance(spec, dict):
            items = spec.items()
        elif isinstance(spec, (list, tuple)):
            items = enumerate(spec)
        else:
            continue
        for d, dim in items:
            if id(tensor) in where and dim is not None:
                yield where[id(tensor)], d, dim


def dim_names_of(mod, args, kwargs, dynamic_shapes) -> Dict[tuple, str]:
    """(input path, dim) -> the user's Dim name."""
    found: Dict[tuple, str] = {}
    for path, d, dim in _declared_dims(mod, args, kwargs, dynamic_shapes):
        name = getattr(dim, "__name__", None)   # Dim("seq"); not a derived 2*seq, not Dim.AUTO
        if isinstance(name, str) and name.isidentifier():
            found[(path, d)] = name
    return found


def declared_of(mod, args, kwargs, dynamic_shapes) -> Dict[tuple, tuple]:
    """(input path, dim) -> (the declared minimum, as declared: "min=1", "Dim.DYNAMIC"), for
    each dimension given a Dim of its own or a hint (a derived 2*seq follows its root)."""
    from torch.export import dynamic_shapes as ds
    found: Dict[tuple, tuple] = {}
    for path, d, dim in _declared_dims(mod, args, kwargs, dynamic_shapes):
        if isinstance(dim, ds._DerivedDim):
            continue
        if isinstance(dim, ds.Dim) and isinstance(dim.min, int):
            found[(path, d)] = (dim.min, f"with min={dim.min}")
        elif isinstance(dim, ds._DimHint) and dim.type.name in ("DYNAMIC", "AUTO"):
            low = dim.min if isinstance(dim.min, int) else 0
            found[(path, d)] = (low, f"Dim.{dim.type.name}" + (f" with min={dim.min}" if dim.min is not None else ""))
    return found
