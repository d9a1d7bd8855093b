"""Each launch's FX ops as data, so that `aoti-debug check`, `extract` and
nan-origin can re-run them in eager on the launch's recorded inputs
(docs/dumps.md, "The ops of a launch").

A launch's program is the list of the FX ops it computes, in execution order,
each an op overload and its arguments.  An argument that is another FX node is
one of: an earlier op of the program (`{"node": n}`), a tensor the launch reads
(`{"input": name}`, named as the records name it), a symbolic size
(`{"sym": expr}`, bound from the recorded inputs' shapes), or what could not
be resolved (`{"missing": n, "why": ...}`: the launch is then not checkable).
View ops that only reshape what the launch reads (a permuted weight, a
flattened activation) are not launches of their own; they are put in front of
the program with `"own": false`, and a view an extern kernel is handed already
made (`same_as`) is taken from the recorded input when the shapes agree.

Built at codegen from Inductor's post-grad FX graph; nothing here changes
what is generated besides the site's description string.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional, Sequence

from aoti_debug.plan import IN, INOUT, OUT, Arg

from . import ir_plan, ir_queries

# ops that only look at their input's storage differently: never a launch of their own
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "expand_as", "unsqueeze",
    "squeeze", "slice", "select", "as_strided", "alias", "diagonal", "narrow", "unfold", "view_as",
    "_reshape_alias", "unbind", "split", "split_with_sizes", "chunk", "movedim", "flatten", "unflatten",
})
_MAX_DEPTH = 32            # view chains are short; a longer walk means a graph we do not understand
# the storage offset a view is handed with: the last argument of reinterpret_tensor(_wrapper)(...)
# when it is a literal (a symbolic one is not placed)
_VIEW_OFFSET = re.compile(r"reinterpret_tensor(?:_wrapper)?\(.*,\s*(\d+)L?\s*\)+$")


def _nodes_by_name() -> Dict[str, Any]:
    from torch._inductor.virtualized import V
    graph = V.graph
    cached = getattr(graph, "_aoti_debug_nodes", None)
    if cached is None:
        cached = {n.name: n for n in graph.module.graph.nodes}
        graph._aoti_debug_nodes = cached
    return cached


def target_name(target) -> Optional[str]:
    """`aten.log.default` for an OpOverload, `getitem` for operator.getitem, else None."""
    import operator

    import torch
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):
        ns = target.namespace
        return f"{ns}.{target._schema.name.split('::', 1)[1]}.{target._overloadname}"
    return None


def _short(target) -> str:
    name = target_name(target) or getattr(target, "__name__", None) or str(target)
    return name.split(".")[1] if name.count(".") == 2 else name


def _is_view(node) -> bool:
    """A view op, or the pick of one result of an op that returns several."""
    import operator
    return node.op == "call_function" and (node.target is operator.getitem or _short(node.target) in VIEW_OPS)


def _shape(node) -> Optional[List[str]]:
    val = (getattr(node, "meta", None) or {}).get("val")
    shape = getattr(val, "shape", None)
    return None if shape is None else [str(s) for s in shape]


def _dtype(node) -> Optional[str]:
    val = (getattr(node, "meta", None) or {}).get("val")
    dtype = getattr(val, "dtype", None)
    return None if dtype is None else str(dtype).replace("torch.", "")


def scale_value_source(reader: Sequence[str], scale: str):
    """The line and module (a Provenance) of the FX node that computed the value one of
    `reader`'s nodes (the FX node names of a launch) takes as its schema argument `scale`
    (`scale_a`, or `scale_a[0]` of a list), passing over the views and layout copies between
    (a per-tensor scale expanded to one per row and made contiguous for _scaled_mm): where
    the scale was made (amax / 448), even where its kernel fused it after a norm whose line
    would name the kernel.  None when the op, its argument or the line is not known."""
    from aoti_debug.plan import op_name, provenance_of_fx_nodes
    name, _, index = scale.partition("[")
    try:
        nodes = _nodes_by_name()
        for node in (nodes.get(n) for n in reader):
            schema = getattr(getattr(node, "target", None), "_schema", None)
            if schema is None:
                continue
            value = ir_plan.schema_arguments(node, schema).get(name)
            if index and isinstance(value, (list, tuple)):
                value = value[int(index.rstrip("]"))]
            for _ in range(_MAX_DEPTH):
                if getattr(value, "op", None) != "call_function" or op_name(value) not in VALUE_KEEPING_OPS:
                    break
                value = value.args[0]
            if getattr(value, "op", None) != "call_function":
                return None         # a weight or an input: no launch made it
            prov = provenance_of_fx_nodes([value])
            return prov if prov.source != "-" else None
    except Exception:                   # a graph shaped otherwise: the kernel's own line stands
        return None
    return None


# a view, or a copy into another layout: the values are those of the op's first argument
VALUE_KEEPING_OPS = VIEW_OPS | {"clone", "contiguous"}


def value_of(buffer: str) -> str:
    """The FX node whose value `buffer` holds: Inductor's origin node, else, for a
    plain pointwise buffer, the one origin that none of its other origins reads
    (the end of the computation the kernel stores there; where several, the one
    that is no view), leaving out what extern kernels and custom ops compute.  '' when that is not one node.  A reduction's
    buffer is never guessed: `mean` stores its sum there and divides later."""
    value = ir_queries.buffer_value(buffer)
    if value:
        return value
    buf = _pointwise(buffer)
    if buf is None:
        return ""
    try:
        copied = _copy_of(buf)
        if copied:
            return copied
        origins = set(buf.origins) - ir_queries.extern_launch_nodes()
    except Exception:
        return ""
    sinks = [n for n in origins if n.op == "call_function" and not (set(n.users) & origins)]
    if len(sinks) > 1:
        # a view among the origins that computes nothing stored here (a weight's transpose
        # handed on to a custom op next to the tokens it gathers) is not the value
        sinks = [n for n in sinks if not getattr(n.target, "is_view", False)]
    return sinks[0].name if len(sinks) == 1 else ""


def _model_input_labels(labels: Dict[str, str]) -> Dict[str, str]:
    """Placeholder node name -> the user's label of that model input (`labels`: graph
    input name -> label)."""
    from torch._inductor.virtualized import V
    return {n.name: labels[n.target] for n in _nodes_by_name().values()
            if n.op == "placeholder" and n.target in labels and n.target in V.graph.graph_inputs}


def _copy_of_buffer(buffer: str) -> str:
    buf = _pointwise(buffer)
    try:
        return _copy_of(buf) if buf is not None else ""
    except Exception:
        return ""


def _target(node) -> str:
    return str(node.target)     # aten.empty.memory_format


def _uninitialised(node) -> bool:
    """An allocation that leaves its memory as it was (aten.empty, empty_strided, empty_like)."""
    parts = _target(node).split(".")
    return (node.op == "call_function" and len(parts) == 3 and parts[0] == "aten"
            and parts[1] in ("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"))


def _pointwise(buffer: str):
    """`buffer`'s IR buffer when it is a plain pointwise computation (not a Scatter,
    a Reduction, ...); None otherwise, or when the graph has no such buffer."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    try:
        buf = V.graph.get_buffer(buffer)
    except Exception:
        return None
    return buf if type(getattr(buf, "data", None)) is ir.Pointwise else None


def _copy_of(buf) -> str:
    """A buffer that is a copy of a model input or a constant in another layout (what
    an extern kernel requires, e.g. channels-last for a convolution): that input's or
    constant's FX node.  The copy's inner function is one load and nothing else."""
    from torch._inductor.virtualized import V
    reads = list(buf.get_read_names())
    if len(reads) != 1:
        return ""
    body = buf.data.inner_fn_str()
    if body.count("ops.") != 1 or "ops.load(" not in body:
        return ""
    source = reads[0]
    for n in _nodes_by_name().values():
        if n.op == "placeholder" and n.target == source and source in V.graph.graph_inputs:
            return n.name
        if n.op == "get_attr" and source in V.graph.constants and n.target.replace(".", "_") == source:
            return n.name
    return ""


class _Builder:
    def __init__(self, own: Sequence[str], args: Sequence[Arg], names: Sequence[str],
                 holds: Dict[str, str]):
        self.nodes = _nodes_by_name()
        self.ops: List[dict] = []
        self.done: Dict[str, bool] = {}
        # what each tensor the launch reads holds: FX node name -> (record name, handed in as a view)
        self.held: Dict[str, tuple] = {}
        views: Dict[str, set] = {}
        read = [(a, name, self._values_of(a.name, holds)) for a, name in zip(args, names)
                if a.role in (IN, INOUT)]
        for a, name, values in read:
            for node_name in values:
                self.held.setdefault(node_name, (name, a.expr != a.name))
                if a.expr != a.name:
                    views.setdefault(node_name, set()).add(name)
        # a node handed as several views: which view op each one is cannot be told from the
        # names; only from where each view starts in the buffer (its storage offset)
        self.ambiguous = {self.held[n][0] for n, v in views.items() if len(v) > 1}
        self.offsets: Dict[str, List[tuple]] = {}      # base record name -> [(view's record name, offset)]
        for a, name, values in read:
            base = next((self.held[n][0] for n in values), "")
            m = _VIEW_OFFSET.search(a.expr) if base in self.ambiguous else None
            if m:
                self.offsets.setdefault(base, []).append((name, int(m.group(1))))
        self._base: Dict[str, str] = {}     # a view op's node -> the ambiguous record it views
        # a node whose value the launch reads whole is an input, even where Inductor counts it
        # among the launch's origins; a placeholder or constant is never an op
        self.own = [n for n in own if n in self.nodes and self.nodes[n].op == "call_function"
                    and not (n in self.held and not self.held[n][1])]
        self.own_set = set(self.own)
        self._same_as: Dict[str, str] = {}
        self.read_as: Dict[str, dict] = {}     # record name -> the layout its value is read with
        self.model_inputs: Dict[str, str] = {}     # placeholder node -> the user's label
        self.copies: List[str] = []

    def _values_of(self, buffer: str, holds: Dict[str, str]) -> List[str]:
        from torch._inductor.virtualized import V
        graph = V.graph
        if buffer in graph.graph_inputs:
            return [n.name for n in self.nodes.values() if n.op == "placeholder" and n.target == buffer]
        if buffer in graph.constants:
            from torch.fx.graph_module import _get_attr
            const = graph.constants[buffer]
            found = []
            for n in self.nodes.values():
                if n.op == "get_attr":
                    try:
                        value = _get_attr(graph.module, n.target)
                    except AttributeError:
                        value = None
                    if value is const or n.target.replace(".", "_") == buffer:
                        found.append(n.name)
            return found
        return [holds[buffer]] if holds.get(buffer) else []

    def build(self, outputs: Dict[str, str], said: Sequence[str]) -> List[dict]:
        """`outputs`: output buffer -> the node it holds; `said`: the buffers whose
        `holds:` record line says so already (the others are marked on their op)."""
        for name in self.own:
            self._op(self.nodes[name], True, 0)
        for name in self.copies:
            self._copy(name)
        for name in outputs.values():        # an output that views what the launch computed
            if name in self.nodes and name not in self.done:
                self._ref(self.nodes[name], 0)
        by_node = {op["node"]: op for op in self.ops}
        for buffer, name in outputs.items():
            if buffer not in said and name in by_node:
                by_node[name].setdefault("holds", []).append(buffer)
        return self.ops

    def _copy(self, name: str) -> None:
        """The copy of a model input or constant the launch made, as aten.clone of it."""
        if name in self.done or name not in self.nodes:
            return
        node = self.nodes[name]
        source = self._ref(node, 0)
        self.done[name] = True
        op = {"node": name, "op": "aten.clone.default", "args": [source], "kwargs": {}, "own": True}
        shape, dtype = _shape(node), _dtype(node)
        if shape is not None:
            op["shape"] = shape
        if dtype is not None:
            op["dtype"] = dtype
        self.ops.append(op)

    def _op(self, node, own: bool, depth: int) -> None:
        if node.name in self.done:
            return
        self.done[node.name] = True
        op = {"node": node.name, "op": target_name(node.target) or f"unsupported:{_short(node.target)}",
              "args": [self._value(a, depth) for a in node.args],
              "kwargs": {k: self._value(v, depth) for k, v in node.kwargs.items()},
              "own": own}
        shape, dtype = _shape(node), _dtype(node)
        if shape is not None:
            op["shape"] = shape
        if dtype is not None:
            op["dtype"] = dtype
        from aoti_debug.plan import user_frame
        line = user_frame((node.meta or {}).get("stack_trace"))
        if line:
            op["line"] = line
        if not own:
            # a view whose base the launch was handed as a view: that view may be this one
            handed = [a["input"] for a in op["args"] if isinstance(a, dict) and a.get("view")
                      and a["input"] not in self.ambiguous]
            handed += [self._same_as[a["node"]] for a in op["args"]
                       if isinstance(a, dict) and a.get("node") in self._same_as]
            if handed:
                op["same_as"] = self._same_as[node.name] = handed[0]
            else:
                self._place(node, op)
        self.ops.append(op)

    def _place(self, node, op: dict) -> None:
        """A view of a buffer the launch was handed several views of (q, k and v sliced from
        one projection): `same_as` the one handed view that starts where this node's value
        starts, if exactly one does.  Its `stride` goes along: the re-run takes the handed
        view only when the dumped tensor has this node's shape and strides too, so a view is
        never taken for another."""
        bases = {a["input"] for a in op["args"] if isinstance(a, dict) and a.get("input") in self.ambiguous}
        bases |= {self._base[a["node"]] for a in op["args"] if isinstance(a, dict) and a.get("node") in self._base}
        if len(bases) != 1:
            return
        base = bases.pop()
        self._base[node.name] = base
        val = (node.meta or {}).get("val")
        try:
            offset, stride = int(val.storage_offset()), [int(s) for s in val.stride()]
        except Exception:              # a symbolic offset or stride, or not one tensor: not placed
            return
        found = [name for name, at in self.offsets.get(base, ()) if at == offset]
        if len(found) == 1 and op.get("shape") is not None:
            op["same_as"] = found[0]
            op["stride"] = [str(s) for s in stride]

    def _ref(self, node, depth: int) -> dict:
        """An FX node an op reads."""
        val = (node.meta or {}).get("val")
        import torch
        if isinstance(val, torch.SymInt):
            return {"sym": str(val.node.expr)}
        if node.name in self.done:
            return {"node": node.name}
        if node.name in self.held:
            name, viewed = self.held[node.name]
            entry = {"input": name}
            shape = _shape(node)
            if shape is not None:
                entry["shape"] = shape
            if viewed:          # the recorded tensor is a view of this node's value
                entry["view"] = True
            elif name in self.read_as:
                entry["read_as"] = self.read_as[name]
            if node.name in self.model_inputs and shape is not None:   # (a copy of) a model input
                entry["model_input"] = self.model_inputs[node.name]
            return entry
        if node.name in self.own_set and depth < _MAX_DEPTH:
            self._op(node, True, depth + 1)
            return {"node": node.name}
        if _is_view(node) and depth < _MAX_DEPTH:
            self._op(node, False, depth + 1)
            return {"node": node.name}
        why = ("a model input this launch is not handed" if node.op == "placeholder"
               else "a constant the kernel reads without being handed it" if node.op == "get_attr"
               else (f"memory that {_target(node)} allocated and nobody wrote before this launch updates "
                     "it in place: what it leaves unwritten has no value to re-run") if _uninitialised(node)
               else "computed by another launch, and not among this launch's inputs")
        entry = {"missing": node.name, "why": why}
        label = self.model_inputs.get(node.name) if node.op == "placeholder" else None
        if label and _shape(node) is not None:
            # its sizes bind symbols from the run's recorded inputs (check's run-wide symbols)
            entry.update(model_input=label, shape=_shape(node))
        return entry

    def _value(self, v: Any, depth: int) -> Any:
        import torch
        if isinstance(v, torch.fx.Node):
            return self._ref(v, depth)
        if isinstance(v, (list, tuple)):
            return [self._value(x, depth) for x in v]
        if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).replace("torch.", "")}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.layout):
            return {"layout": str(v).replace("torch.", "")}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).replace("torch.", "")}
        if isinstance(v, torch.SymInt):
            return {"sym": str(v.node.expr)}
        return {"unsupported": type(v).__name__}


def layout_of(buffer: str) -> Optional[dict]:
    """A buffer's shape, strides and storage offset as size expressions, None where
    Inductor gives no fixed layout."""
    from torch._inductor.virtualized import V
    try:
        layout = V.graph.get_buffer(buffer).get_layout()
        return {"shape": [str(s) for s in layout.size], "stride": [str(s) for s in layout.stride],
                "offset": str(layout.offset)}
    except Exception:
        return None


def program(own_nodes: Sequence[str], args: Sequence[Arg], names: Sequence[str],
            before: Dict[str, str], after: Dict[str, str],
            read_as: Optional[Dict[str, dict]] = None, labels: Optional[Dict[str, str]] = None) -> List[dict]:
    """The launch's ops (see the module docstring); [] when Inductor names none.
    `names`: each argument's record name (hooks.record_names).
    `before`/`after`: the FX node whose value each buffer holds before and after the
    launch (an inout buffer holds one node's value before and another's after).
    `read_as`: buffer -> the layout its value is read with, where it holds another
    buffer's value in place (the recorded tensor is the buffer's own view of those bytes).
    `labels`: graph input name -> the user's label (a model input's sizes bind symbols)."""
    outputs = {name: a.value or after.get(a.name, "") for a, name in zip(args, names) if a.role != IN}
    said = [name for a, name in zip(args, names) if a.role != IN and a.value]
    try:
        # a layout copy of a model input or constant (no FX op of its own): checked as a clone
        copies = [outputs[name] for a, name in zip(args, names)
                  if a.role != IN and outputs.get(name) and _copy_of_buffer(a.name) == outputs[name]]
        if not own_nodes and not copies:
            return []
        builder = _Builder(own_nodes, args, names, before)
        builder.copies = copies
        builder.model_inputs = _model_input_labels(labels or {})
        for a, name in zip(args, names):
            own = layout_of(a.name)
            if a.role != OUT and (read_as or {}).get(a.name) and own:
                layout = dict(read_as[a.name])
                layout["offset"] = f"({layout['offset']}) - ({own['offset']})"   # from the recorded view's start
                builder.read_as[name] = layout
        return builder.build({k: v for k, v in outputs.items() if v}, said)
    except Exception as exc:       # never fail a compile over a description; say why instead
        return [{"error": f"the ops could not be described ({type(exc).__name__}: {exc})"}]


def to_text(ops: List[dict]) -> str:
    """The program as one line of JSON (the manifest's `ops` field)."""
    return json.dumps(ops, separators=(",", ":")) if ops else ""
