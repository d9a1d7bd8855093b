"""Questions the codegen asks of the graph Inductor is lowering (V.graph) and
of the wrapper it generates: which names are tensors, what a buffer holds and
where its values come from, the layout the graph planned, the model's outputs
and name, the user's names Dynamo knew, and which core object the wrapper links.
Each reads Inductor's IR as the tested releases (adapter.TESTED) shape it; none
changes anything (linked_core may build the core object into aoti-debug's cache).
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import Iterable, List, Optional

from .adapter import TESTED, torch_version


@functools.lru_cache(maxsize=None)
def marker_line_class():
    """A WrapperLine (a plain base class in 2.11-2.15) that writes nothing and
    hands provenance to the call after it.  Built on first use so that
    importing this module does not import Inductor (the start-up hook waits
    for the program to do that)."""
    from torch._inductor.codegen.wrapper import WrapperLine

    class ProvenanceMarker(WrapperLine):
        def __init__(self, wrapper, provenance, scales=None, dequants=None) -> None:
            self.wrapper = wrapper
            self.provenance = provenance
            self.scales = scales or {}     # ir_plan.scale_buffers of an extern kernel
            self.dequants = dequants or {}   # ir_plan.dequant_operands of it

        def codegen(self, code) -> None:
            st = getattr(self.wrapper, "_aotid_state", None)
            if st is not None:
                st.pending = self.provenance
                st.pending_scales = self.scales
                st.pending_dequants = self.dequants

    return ProvenanceMarker


def is_instrumentable(wrapper) -> bool:
    """C++ wrappers of the main graph, not the constant-folding graph: AOTI's, and
    torch.compile's with cpp_wrapper=True (the same code, built into a module the
    Python process loads)."""
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_cpu_array_ref import CppWrapperCpuArrayRef
    from torch._inductor.virtualized import V
    if not isinstance(wrapper, CppWrapperCpu) or isinstance(wrapper, CppWrapperCpuArrayRef):
        return False
    return not getattr(V.graph, "is_const_graph", False)


def is_aot() -> bool:
    """Whether the graph being compiled is AOTI's (an artifact with its own input
    guards and constants), not torch.compile's."""
    from torch._inductor.virtualized import V
    return bool(getattr(V.graph, "aot_mode", False))


def device_index() -> int:
    """The device index the graph being compiled runs on (its first, if several)."""
    from torch._inductor.virtualized import V
    indices = sorted(i for i in (getattr(V.graph, "device_idxs", None) or ()) if isinstance(i, int))
    return indices[0] if indices else 0


def wrapper_device(wrapper) -> str:
    """The device type a C++ wrapper launches on ("cpu", "cuda")."""
    return getattr(wrapper, "device", None) or "cpu"


def is_tensor_name(name: str) -> bool:
    from torch._inductor.virtualized import V
    graph = V.graph
    if name in graph.graph_inputs:
        return is_tensor_input(name)
    if name in graph.constants:
        return True
    try:
        return graph.get_buffer(name) is not None
    except Exception:
        return False


def is_tensor_input(name: str) -> bool:
    import sympy
    from torch._inductor.virtualized import V
    value = V.graph.graph_inputs.get(name)
    return value is not None and not isinstance(value, sympy.Expr)


def tensor_refs_in(values: Iterable) -> List[tuple]:
    """(buffer name, reference) of the IR tensors among a fallback kernel's raw
    arguments, as the generated call passes them: a buffer by its name, a view
    (a transposed, sliced or reshaped intermediate) by the expression that makes
    it (reinterpret_tensor_wrapper(buf22, ...)), named by the buffer it views."""
    from torch._inductor import ir
    refs: List[tuple] = []

    def visit(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, ir.IRNode):
            try:
                ref = v.codegen_reference()
                name = ref if ref.isidentifier() else v.get_name() if isinstance(v, ir.ReinterpretView) else ""
            except Exception:
                return
            if name and name.isidentifier() and is_tensor_name(name):
                refs.append((name, ref))
    visit(values)
    return refs


# graph -> (operation count, the FX nodes its extern launches compute)
_extern_nodes: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def extern_launch_nodes() -> frozenset:
    """The FX nodes computed by the extern kernels and custom ops of the graph
    being generated (plan.own_fx_nodes of each), which no fused kernel computes.
    Lowering is over when kernels are generated: worked out once per graph."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from .ir_plan import own_fx_nodes
    graph = V.graph
    operations = getattr(graph, "operations", None) or ()
    known = _extern_nodes.get(graph)
    if known is None or known[0] != len(operations):
        known = (len(operations), frozenset(n for op in operations if isinstance(op, ir.ExternKernel)
                                            for n in own_fx_nodes(op)))
        _extern_nodes[graph] = known
    return known[1]


def _fused_origins(buf, kernel_nodes):
    """The FX nodes a buffer's values come from inside one kernel: its origins, and
    the nodes fused into the same kernel that feed them, in the graph's order."""
    from .ir_plan import _sorted_origins
    inside = set(kernel_nodes)
    # the buffer's origins may name the op that made it (a custom op's input copy), not computed here
    seen, todo = {}, [n for n in getattr(buf, "origins", ()) or () if not inside or n.name in inside]
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen[node.name] = node
        todo += [n for n in node.all_input_nodes if n.name in inside]
    return _sorted_origins(seen.values())


def buffer_source(name: str, kernel_nodes=()):
    """The user's line where the values of one output buffer can turn non-finite,
    and its module: a Provenance (source and module '-' when unknown).

    A fused kernel stores a buffer whose own origin may be only its last op
    (the `+ 1` after a sum of a log).  Walking back through the FX nodes fused
    into the same kernel finds the ops feeding it, and plan's rule names one
    line among them (the log's)."""
    from torch._inductor.virtualized import V
    from aoti_debug.plan import Provenance, provenance_of_fx_nodes
    try:
        buf = V.graph.get_buffer(name)
    except Exception:
        return Provenance()
    if buf is None:
        return Provenance()
    return provenance_of_fx_nodes(_fused_origins(buf, kernel_nodes))


def cast_source(name: str, kernel_nodes=()):
    """For a float8 buffer a fused kernel writes: the line and module of the cast into
    float8 that made its values (a Provenance), where a value saturates; None otherwise.
    The most telling op feeding it (buffer_source) is where a NaN comes from, but a
    float8_e4m3fn cast turns no finite value into NaN: it clamps, there."""
    from torch._inductor.virtualized import V
    from aoti_debug.plan import op_name, provenance_of_fx_nodes
    try:
        buf = V.graph.get_buffer(name)
        if buf is None or "float8" not in str(buf.get_dtype()):
            return None
    except Exception:
        return None
    casts = [n for n in _fused_origins(buf, kernel_nodes) if op_name(n) in ("convert_element_type", "_to_copy")
             and "float8" in str(getattr((getattr(n, "meta", None) or {}).get("val"), "dtype", ""))]
    return provenance_of_fx_nodes(casts[-1:]) if casts else None


def storage_owner(name: str) -> str:
    """The buffer whose storage `name` lives in: itself, or for a NonOwningLayout
    buffer (a concatenation's slices are views into the result) the one it views."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    for _ in range(8):
        try:
            layout = V.graph.get_buffer(name).get_layout()
            if not isinstance(layout, ir.NonOwningLayout):
                return name
            name = layout.view.get_name()
        except Exception:
            return name
    return name


def buffer_value(name: str) -> str:
    """The FX node whose result buffer `name` holds, or '' when Inductor does not
    say (a kernel's scratch output, a tuple of a fallback kernel)."""
    from torch._inductor.virtualized import V
    try:
        node = V.graph.get_buffer(name).get_origin_node()
    except Exception:
        return ""
    return getattr(node, "name", "") or ""


def value_source(name: str, reader=()):
    """The line and module of the FX node whose result buffer `name` holds (a Provenance),
    None when Inductor does not say, the node has no line, or it is one of `reader`'s (the
    FX node names of the launch reading it: the copy of an input in the layout _scaled_mm
    requires has _scaled_mm as its origin): where the value was made, not where a NaN in it
    could come from (buffer_source)."""
    from torch._inductor.virtualized import V
    from aoti_debug.plan import provenance_of_fx_nodes
    try:
        node = V.graph.get_buffer(name).get_origin_node()
    except Exception:
        return None
    if node is None or getattr(node, "name", None) in reader or node in extern_launch_nodes():
        return None
    prov = provenance_of_fx_nodes([node])
    return prov if prov.source != "-" else None


def planned_layout(name: str) -> Optional[tuple]:
    """(dtype, sizes, strides) the graph planned for buffer `name`, an extern
    kernel's or custom op's output, from the op's fake; None where it planned no
    one layout (a tuple of outputs, none) or in the constant-folding graph."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    if getattr(V.graph, "is_const_graph", False):
        return None
    try:
        layout = getattr(V.graph.get_buffer(name), "layout", None)   # get_layout() raises on a tuple
    except Exception:
        return None
    if isinstance(layout, ir.MultiOutputLayout):
        # the Python wrapper binds a fallback kernel's one tensor result itself
        # (buf1), then as a MultiOutput of no index (buf2 = buf1), which has the plan
        try:
            whole = [b for b in V.graph.buffers if isinstance(b, ir.MultiOutput) and not b.indices
                     and b.inputs and getattr(b.inputs[0], "get_name", lambda: None)() == name]
            layout = whole[0].get_layout() if len(whole) == 1 else None
        except Exception:      # an IR this release shapes otherwise: that output is not planned here
            return None
    if not isinstance(layout, ir.Layout):
        return None
    return layout.dtype, list(layout.size), list(layout.stride)


def python_size(expr) -> str:
    """A size expression as the Python wrapper writes its own (Python's // and %
    are sympy's FloorDiv and PythonMod)."""
    from torch._inductor.codegen.wrapper import pexpr
    return pexpr(expr)


def wrapper_symbols() -> frozenset:
    """The size symbols the wrapper holds in variables of their own name when its
    launches run: symbolic inputs, and the sizes and strides of tensor inputs that
    are a symbol (upstream's codegen_input_symbol_assignment).  A subgraph's code
    (cond, while_loop) binds its own; none is relied on there."""
    import sympy
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    if getattr(V.graph, "parent", None) is not None:
        return frozenset()
    bound = set()
    for value in V.graph.graph_inputs.values():
        if isinstance(value, sympy.Symbol):
            bound.add(value)
        elif isinstance(value, ir.TensorBox):
            bound.update(e for e in list(value.get_size()) + list(value.get_stride())
                         if isinstance(e, sympy.Symbol))
    return frozenset(bound)


def model_outputs(refs: List[str]) -> List[tuple]:
    """(buffer name, reference) of each tensor among the graph's outputs, whose
    generated references are `refs`.  A view is named by the buffer it views
    (ReinterpretView.get_name); None and symbolic-size outputs are left out."""
    from torch._inductor.virtualized import V
    found = []
    for ref, node in zip(refs, V.graph.graph_outputs):
        try:
            if not node.has_tensor_output():
                continue
            name = node.get_name()
        except Exception:
            continue
        found.append((name, ref))
    return found


def bound_output_refs(wrapper, refs: List[str]) -> List[str]:
    """The C++ wrapper's output references with each rvalue (a view:
    wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(...))) bound to
    a variable, exactly as generate_return binds it first thing; given back to
    generate_return, which then finds nothing left to bind."""
    return [wrapper.create_tmp_raii_handle_var_if_needed(r, wrapper.wrapper_call) for r in refs]


def tensor_shape_specs(mod, args, kwargs, dynamic_shapes) -> List[tuple]:
    """(input tensor, its own dynamic-shapes spec) pairs, matched up by
    torch.export's own helpers: a tuple/list spec follows the inputs in the
    order of forward's parameters, a dict spec is keyed by parameter name
    (whether the value was given by position or by keyword), and pytree
    classes are matched through their flattened form; a ShapesCollection
    is first turned into that structure."""
    import torch
    from torch.export import dynamic_shapes as ds
    if isinstance(dynamic_shapes, torch.export.ShapesCollection):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    if not isinstance(dynamic_shapes, (dict, list, tuple)) or not dynamic_shapes:
        return []
    combined = ds._combine_args(mod, args, kwargs)
    if isinstance(dynamic_shapes, (list, tuple)):
        combined = type(dynamic_shapes)(combined.values())
    pairs: List[tuple] = []

    def visit(path, value, spec):
        if isinstance(value, torch.Tensor):
            pairs.append((value, spec))
    ds._tree_map_with_path(visit, combined, dynamic_shapes)
    return pairs


# The stem of the package aoti_compile_and_package is writing (None outside it,
# or when it writes to a file object).
_package_stem: Optional[str] = None


def model_name() -> str:
    """The name records give the model being compiled (docs/log-format.md): the
    AOTI model name when the user set one, else the package's file stem, else
    `model`.  Only [A-Za-z0-9_.+-]: it is a record token and a folder name, and
    `#` is left for the runtime's instance numbers."""
    import re
    from torch._inductor import config
    from torch._inductor.virtualized import V
    name = None
    if getattr(V.graph, "aot_mode", False):
        name = config.aot_inductor.model_name_for_generated_files or _package_stem
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name or getattr(V.graph, "name", None) or "")
    return name.lstrip(".")[:64] or "model"


def package_stem(package_path) -> Optional[str]:
    """`ranker` for package_path="out/ranker.pt2"; None for a file object."""
    try:
        path = os.fspath(package_path)
    except TypeError:
        return None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return os.path.splitext(os.path.basename(path))[0] or None


def set_package_stem(package_path) -> None:
    """While aoti_compile_and_package writes `package_path` (None: it is done)."""
    global _package_stem
    _package_stem = None if package_path is None else package_stem(package_path)


def is_python_instrumentable(wrapper) -> bool:
    """torch.compile's Python wrapper of a main graph: not a C++ (AOTI or cpp_wrapper)
    wrapper, not a subgraph's, not the FX wrapper."""
    from torch._inductor.codegen import wrapper as wrapper_mod
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.virtualized import V
    if type(wrapper) is not wrapper_mod.PythonWrapperCodegen or isinstance(wrapper, CppWrapperCpu):
        return False
    graph = V.graph
    return not (getattr(graph, "cpp_wrapper", False) or getattr(graph, "aot_mode", False)
                or getattr(graph, "fx_wrapper", False) or getattr(graph, "is_const_graph", False))


def extern_launch_name(node, device) -> str:
    """An extern launch named as the AOTI wrapper calls it (aoti_torch_cpu_addmm_out),
    a custom op by its overload (mylib.scale.default), else its Python name."""
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    device = getattr(device, "type", device) or "cpu"
    op = getattr(node, "op_overload", None)
    if op is not None and getattr(op, "namespace", "aten") != "aten":
        return str(op)
    cpp = getattr(node, "cpp_kernel_name", None)
    if cpp and (cpp.startswith("aoti_torch_") or "::" in cpp):
        return CppWrapperCpu.get_c_shim_func_name(cpp, device)
    return getattr(node, "python_kernel_name", None) or str(op or "extern")


def returns_value(node) -> bool:
    from torch._inductor import ir
    return not isinstance(getattr(node, "layout", None), ir.NoneLayout)


# The user's names of the graph being compiled by torch.compile, per Dynamo placeholder.
_dynamo_labels: List[str] = []


def _label_of_source(name: str) -> str:
    """L['x'] -> x; L['self']._modules['fc1']._parameters['weight'] -> fc1_weight
    (AOTI's constant name); L['batch']['mask'] -> batch["mask"]."""
    import re
    body = re.sub(r"^[LG]\[", "[", name)
    tokens = [a or b for a, b in re.findall(r"\['([^']*)'\]|\.(\w+)", body)]
    if not tokens:
        return name
    if "_parameters" in tokens or "_buffers" in tokens:
        kept = [t for t in tokens if t not in ("_modules", "_parameters", "_buffers")]
        if kept and kept[0] == "self":
            kept = kept[1:]
        return "_".join(kept) or name
    return tokens[0] + "".join(f'["{t}"]' for t in tokens[1:])


def remember_dynamo_labels(gm) -> None:
    """The user's names of the inputs of `gm`, the graph Dynamo hands torch.compile's
    Inductor (read by python_input_labels while its wrapper is generated)."""
    labels: List[str] = []
    try:
        for node in gm.graph.find_nodes(op="placeholder"):
            arg = node.meta.get("grapharg")
            source = getattr(arg, "source", None)
            text = getattr(source, "name", None)
            text = text() if callable(text) else text
            labels.append(_label_of_source(text) if isinstance(text, str) else node.name)
    except Exception:
        labels = []
    _dynamo_labels[:] = labels


def python_input_labels(names: List[str]) -> List[str]:
    """Graph input names (arg0_1) -> the user's names, through AOTAutograd's input descriptors."""
    from torch._inductor.virtualized import V
    placeholders = {}
    try:
        for node in V.graph.orig_gm.graph.find_nodes(op="placeholder"):
            placeholders[node.name] = node
    except Exception:
        pass
    out = []
    for n in names:
        desc = getattr(placeholders.get(n), "meta", {}).get("desc")
        idx = getattr(desc, "idx", None) if type(desc).__name__ == "PlainAOTInput" else None
        out.append(_dynamo_labels[idx] if isinstance(idx, int) and idx < len(_dynamo_labels) else n)
    return out


def linked_core(stats: bool, dumps: bool, memcheck: bool = False):
    """(path, compiler flags) of the core object (config.h: AOTI_DEBUG_LINKED_CORE)
    to link into the AOTI artifact being generated, or None to compile the
    runtime header-only.

    Only for AOTI builds that Inductor links here (not package_cpp_only, not
    cross-compiled) on the tested releases from 2.13 on, whose AotCodeCompiler
    links the wrapper object through codecache.CppBuilder, once the link step
    (patch_cpp_wrapper.py) has made that class add the core; elsewhere, an
    untested release included (a link that left the core out would fail), the
    header-only runtime costs compile time but needs nothing at link time."""
    from torch._inductor import codecache, config
    from torch._inductor.virtualized import V
    from aoti_debug.native import build as _build
    aot = config.aot_inductor
    if (not getattr(codecache.CppBuilder, "__aoti_debug_patch__", False)
            or not (2, 13) <= torch_version() <= TESTED[1]
            or not getattr(V.graph, "aot_mode", False)
            or getattr(aot, "package_cpp_only", False)
            or getattr(aot, "cross_target_platform", None) not in (None, "", "linux")):
        return None
    flags = _build.core_flags(stats, dumps, memcheck)
    try:
        return str(_build.core_object(flags)), flags
    except (_build.BuildError, OSError):
        return None
