"""The patches on Inductor's wrapper codegen.

Codegen runs in two phases (see adapter.py, the hook points): kernels are scheduled first,
queueing wrapper lines, and those lines are turned into C++ (or Python)
later.  Provenance is only known in the first phase, so the codegen_comment
hooks queue a marker line right before each call; when the lines are
replayed the marker hands its provenance to the call that follows it.

Every patched method calls the original first or last and only adds lines;
when no instrumentation is active it does nothing else, so the generated
code is upstream's byte for byte.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Set

from aoti_debug import settings as settings_mod
from aoti_debug.plan import IN, INOUT, OUT, Arg, Dequant, Planned, Provenance, Site, dequant_spec, module_path, where

from . import cpp_emit, fx_ops, guards, ir_plan, ir_queries, python_emit, trace

# The compile-time settings in force (set by install.activate / instrument()).
_active = None


def active():
    return _active


def set_active(settings) -> None:
    global _active
    _active = settings


@dataclasses.dataclass
class WrapperState:
    """Per generated wrapper: the plan so far and the provenance in flight.
    `emitter` writes its launches (launch() below drives it)."""
    emitter = cpp_emit.EMITTER
    sites: List[Site] = dataclasses.field(default_factory=list)
    roles: Dict[str, List[Optional[str]]] = dataclasses.field(default_factory=dict)
    pending: Optional[Provenance] = None      # replay phase: set by the marker line
    last: Optional[Provenance] = None         # scheduling phase: last codegen_comment
    extern_out: Optional[str] = None
    pending_scales: Dict[str, str] = dataclasses.field(default_factory=dict)   # set by the marker line
    pending_dequants: Dict[str, Dequant] = dataclasses.field(default_factory=dict)   # likewise
    launches: int = 0
    in_call: bool = False
    header_written: bool = False
    # buffers allocated in this run that no launch has written yet (by_data_flow)
    fresh: Set[str] = dataclasses.field(default_factory=set)
    # the FX node whose value each buffer holds at this point of the run (fx_ops)
    holds: Dict[str, str] = dataclasses.field(default_factory=dict)
    # a buffer updated in place that holds another buffer's value in that buffer's
    # layout (Inductor reuses a conv output as a layer norm's NHWC result): the
    # layout the value is read with, until a launch writes the buffer (fx_ops)
    read_as: Dict[str, dict] = dataclasses.field(default_factory=dict)
    # the last launch that wrote each buffer, and that output as it records it (written_by)
    writers: Dict[str, tuple] = dataclasses.field(default_factory=dict)

    def input_names(self) -> Dict[str, str]:
        """The user's names of model inputs (x, batch["mask"], not arg4_1)."""
        return guards.label_map()


def _state_of(wrapper, instrumentable, kind):
    if _active is None or not instrumentable(wrapper):
        return None
    st = getattr(wrapper, "_aotid_state", None)
    if st is None:
        st = wrapper._aotid_state = kind()
    return st


def state(wrapper) -> Optional[WrapperState]:
    """A C++ wrapper's state (AOTI's, torch.compile's cpp_wrapper) when it is instrumented, else None."""
    return _state_of(wrapper, ir_queries.is_instrumentable, WrapperState)


def note_provenance(provenance: Provenance, scales: Optional[Dict[str, str]] = None,
                    dequants: Optional[Dict[str, Dequant]] = None) -> None:
    from torch._inductor.virtualized import V
    wrapper = V.graph.wrapper_code
    st = state(wrapper)
    if st is None:
        return
    st.last = provenance
    wrapper.writeline(ir_queries.marker_line_class()(wrapper, provenance, scales, dequants))


def take_provenance(st: WrapperState, kernel: str) -> Provenance:
    prov, st.pending = st.pending, None
    return prov or Provenance()


def selected(kernel: str, provenance: Provenance) -> bool:
    return settings_mod.kernels_match(_active.kernels, (kernel,) + provenance.filter_names())


def new_site(st: WrapperState, kernel: str, provenance: Provenance, args: List[Arg], kind: str) -> Site:
    st.launches += 1
    site = Site(st.launches, kernel, provenance, args, kind)
    st.sites.append(site)
    return site


# -- phase 1: provenance and kernel signatures ----------------------------------

def on_scheduled_kernel_comment(node_schedule, kernel_name) -> None:
    if _active is not None:
        note_provenance(ir_plan.provenance_of_schedule(node_schedule, ir_queries.extern_launch_nodes()))


def on_extern_kernel_comment(ir_node) -> None:
    if _active is not None:
        note_provenance(ir_plan.provenance_of_ir_node(ir_node), ir_plan.scale_buffers(ir_node),
                        ir_plan.dequant_operands(ir_node))


def on_define_kernel(wrapper, kernel_name: str, kernel_body: str, cpp_definition: Optional[str]) -> None:
    st = state(wrapper)
    if st is None:
        return
    parsed = (ir_plan.parameter_names_cpp(cpp_definition) if cpp_definition
              else ir_plan.parameter_names_python(kernel_body))
    if parsed:
        st.roles[kernel_name] = ir_plan.roles_from_parameter_names(parsed[1])


# -- phase 2: launches ----------------------------------------------------------

def _any_state(wrapper):
    return state(wrapper) or py_state(wrapper)


def on_allocate(line) -> None:
    """An AllocateLine replayed: its buffer holds nothing yet."""
    st = _any_state(line.wrapper)
    if st is not None:
        st.fresh.add(line.node.get_name())


def on_reuse(line) -> None:
    """A ReuseLine replayed.  An in-place reuse (the kernel updates its input's
    buffer, Inductor's `reuses`) hands the old buffer's value on, written or
    not; memory planning's reuse of a dead buffer holds nothing meaningful."""
    st = _any_state(line.wrapper)
    if st is None:
        return
    old, new = line.node.get_name(), line.reused_as.get_name()
    in_place = getattr(line.wrapper, "reuses", {}).get(new) == old
    if in_place and old not in st.fresh:
        st.fresh.discard(new)
        st.holds[new] = st.holds.get(old) or ir_queries.buffer_value(old)
        if old in st.writers:
            st.writers[new] = st.writers[old]
        layout = st.read_as.get(old) or fx_ops.layout_of(old)
        if layout and layout != fx_ops.layout_of(new):
            st.read_as[new] = layout
        else:
            st.read_as.pop(new, None)
    else:
        st.fresh.add(new)
        st.holds.pop(new, None)
        st.read_as.pop(new, None)
        st.writers.pop(new, None)


def by_data_flow(st: WrapperState, args: List[Arg]) -> List[Arg]:
    """A launch's arguments with roles from data flow, its outputs then marked written.

    A buffer is an input of a launch only if a model input, a constant or an
    earlier launch wrote it.  Inductor's in_out_ptr also marks a buffer a
    kernel stores into and reads back (layer norm keeps its row statistics so),
    and reading that one before the launch would read uninitialised memory.
    Each output also gets the FX node whose value it holds (diff pairs by it).
    A written buffer holds a value, and so does the buffer whose storage it is
    a view of (a concatenation writes its slices, then the whole is read)."""
    out = []
    for a in args:
        role = OUT if a.name in st.fresh and a.role != OUT else a.role
        value = ir_queries.buffer_value(a.name) if role != IN else ""
        out.append(dataclasses.replace(a, role=role, value=value))
    for a in out:
        if a.role != IN:
            st.fresh.discard(a.name)
            st.fresh.discard(ir_queries.storage_owner(a.name))
    return out


def held_before(st: WrapperState, args: List[Arg]) -> Dict[str, str]:
    """The FX node whose value each argument the launch reads holds before it: what an
    earlier launch wrote there, else the buffer's own node (an inout buffer's own
    node is what the launch writes, so it is not guessed).  The buffer's own node
    also covers a launch generated before the one that writes its input (Inductor
    emits a custom op's call while scheduling, other calls after)."""
    return {a.name: st.holds.get(a.name) or (fx_ops.value_of(a.name) if a.role == IN else "")
            for a in args if a.role != OUT}


_IDENT = re.compile(r"^[A-Za-z_]\w*$")
# a view Inductor builds inline for an extern call: reinterpret_tensor_wrapper(NAME, ...)
_VIEW = re.compile(r"^(?:wrap_with_raii_handle_if_needed\()?reinterpret_tensor_wrapper\((\w+),")
# an optional tensor argument of an extern call (a convolution's bias): &temporary_reference(NAME.get())
_OPTIONAL = re.compile(r"^&temporary_reference\((\w+)\.get\(\)\)$")


def kernel_call_args(st: WrapperState, kernel_name: str, call_args, arg_types) -> List[Arg]:
    roles = st.roles.get(kernel_name)
    args: List[Arg] = []
    for i, (arg, typ) in enumerate(zip(call_args, arg_types or [None] * len(call_args))):
        if not isinstance(arg, str) or not _IDENT.match(arg):
            continue
        role = roles[i] if roles and i < len(roles) else None
        if role is None:
            if typ is not None and isinstance(typ, str):
                if "*" not in typ:
                    continue               # a scalar
                role = IN if typ.strip().startswith("const") else INOUT
            elif not ir_queries.is_tensor_name(arg):
                continue
            else:
                role = INOUT               # user-defined Triton: roles unknown
        args.append(Arg(arg, arg, role))
    return args


def around_kernel_call(wrapper, kernel_name, call_args, arg_types, emit_call) -> None:
    """A generated kernel's launch, in either wrapper."""
    st = _any_state(wrapper)
    if st is None or st.in_call:
        emit_call()
        return
    prov = take_provenance(st, kernel_name)
    args = kernel_call_args(st, kernel_name, list(call_args), arg_types)
    launch(wrapper, st, kernel_name, prov, args, "kernel", emit_call)


def on_extern_out(wrapper, out: str, out_view) -> None:
    """An extern kernel's out= buffer, which the extern call that follows writes."""
    st = state(wrapper)
    if st is not None:
        st.extern_out = f"{out}_as_strided" if out_view else out


def around_extern_call(wrapper, kernel: str, args: List[str], emit_call) -> None:
    st = state(wrapper)
    if st is None:
        emit_call()
        return
    prov = take_provenance(st, kernel)
    scales, st.pending_scales = st.pending_scales, {}
    dequants, st.pending_dequants = st.pending_dequants, {}
    out_name, st.extern_out = st.extern_out, None
    tensors: List[Arg] = []
    for a in args:
        a = a.strip()
        if a.startswith("&") and a.endswith("_handle"):
            name = a[1:-len("_handle")]
            tensors.append(Arg(name, a[1:], OUT))
        elif _IDENT.match(a) and (a == out_name or ir_queries.is_tensor_name(a)):
            tensors.append(Arg(a, a, OUT if a == out_name else IN))
        elif _VIEW.match(a) and ir_queries.is_tensor_name(_VIEW.match(a).group(1)):
            tensors.append(Arg(_VIEW.match(a).group(1), a, IN))
        elif _OPTIONAL.match(a) and ir_queries.is_tensor_name(_OPTIONAL.match(a).group(1)):
            name = _OPTIONAL.match(a).group(1)
            tensors.append(Arg(name, name, IN))
    launch(wrapper, st, kernel, prov, scaled(tensors, scales, dequants), "extern", emit_call)


def scaled(args: List[Arg], scales: Dict[str, str], dequants: Optional[Dict[str, Dequant]] = None) -> List[Arg]:
    """The arguments a launch reads as its op's scales (ir_plan.scale_buffers) marked so,
    and its operands with how their scales apply (ir_plan.dequant_operands), the scales
    named by their index among the launch's arguments; an operand whose scales are not
    among its inputs gets none."""
    args = [dataclasses.replace(a, scale=scales[a.name]) if a.role == IN and a.name in scales else a
            for a in args]
    where = {}
    for k, a in enumerate(args):
        if a.role == IN:
            where.setdefault(a.name, k)
    for name, d in (dequants or {}).items():
        k, s, g = where.get(name), where.get(d.scale), where.get(d.global_scale) if d.global_scale else -1
        if k is not None and s is not None and g is not None and not args[k].scale:
            args[k] = dataclasses.replace(args[k], dequant=dequant_spec(d, s, g))
    return args


def around_proxy_call(wrapper, op_overload, raw_args, raw_outputs, emit_call) -> None:
    st = state(wrapper)
    if st is None:
        emit_call()
        return
    prov, st.pending = st.last or Provenance(), None
    kernel = str(op_overload)
    tensors = [Arg(n, ref, IN) for n, ref in ir_queries.tensor_refs_in(raw_args)]
    tensors += [Arg(n, n, OUT) for n, ref in ir_queries.tensor_refs_in(raw_outputs) if n == ref]
    launch(wrapper, st, kernel, prov, tensors, "proxy", emit_call)


def around_jit_fallback(wrapper, op_overload, raw_args, outputs, emit_call) -> None:
    """An op without a C shim in torch.compile's C++ wrapper (a custom op, called
    through torch's dispatcher): a launch, as AOTI's proxy call is (AOTI's own is
    instrumented there, around_proxy_call)."""
    if ir_queries.is_aot():
        emit_call()
        return
    around_proxy_call(wrapper, op_overload, raw_args, outputs, emit_call)


def record_names(args: List[Arg], labels: Dict[str, str]) -> List[str]:
    """The name each argument is recorded under: the user's name of a model input,
    else the buffer's.  A launch handed several different views of one buffer
    (q, k and v sliced from one projection) records each under a name of its own
    (buf5, buf5_view2, ...): each is written and dumped, and a re-run never takes
    one view for another."""
    names: List[str] = []
    exprs: Dict[str, str] = {}
    for a in args:
        name = base = labels.get(a.name, a.name)
        k = 1
        while exprs.setdefault(name, a.expr) != a.expr:
            k += 1
            name = f"{base}_view{k}"
        names.append(name)
    return names


def launch(wrapper, st: WrapperState, kernel: str, prov: Provenance, args: List[Arg],
           kind: str, emit_call) -> None:
    """The one driver of both wrappers: number the launch (even when the filter
    leaves it out), give its arguments data-flow roles and the user's names, and
    put the wrapper's emitter's lines around the upstream call, which runs once."""
    if st.in_call:
        emit_call()
        return
    prov = dataclasses.replace(prov, modules=tuple(module_path(m) for m in prov.modules),
                               module=module_path(prov.module))
    labels = st.input_names()
    args = by_data_flow(st, args)
    names = record_names(args, labels)
    ops = []
    if _active.level >= 10 or _active.blackbox > 0:   # dump folders carry the ops (extract, check)
        held = held_before(st, args)
        after = {a.name: a.value or fx_ops.value_of(a.name) for a in args if a.role != IN}
        ops = fx_ops.program(prov.nodes, args, names, held, after, st.read_as, labels)
        st.holds.update((k, v) for k, v in after.items() if v)
    for a in args:               # written now: its value is in its own layout
        if a.role != IN:
            st.read_as.pop(a.name, None)
    planned = planned_outputs(args) if kind in ("extern", "proxy") and plan_checked() else []
    from torch._inductor.virtualized import V
    written = [a.name for a in args]
    args = [dataclasses.replace(a, name=name, constant=a.name in V.graph.constants,
                                **written_by(st, a, prov.nodes))
            for a, name in zip(args, names)]
    site = new_site(st, kernel, prov, args, kind)
    for buffer, a in zip(written, site.args):
        if a.role != IN:
            st.writers[buffer] = (site, a)
    site.ops = ops
    site.planned = planned
    # the filter narrows logging only: every launch is checked
    header, before, after = st.emitter.launch(site, selected(kernel, prov), _active.nan_check.enabled,
                                              _active.memcheck != "off", _active.blackbox > 0)
    for line in header:
        wrapper.header.writeline(line)
    for line in before:
        wrapper.writeline(line)
    st.in_call = True     # the GPU wrapper hands CPU launches to the CPU one: count once
    try:
        emit_call()
    finally:
        st.in_call = False
    for line in after:
        wrapper.writeline(line)


def written_by(st: WrapperState, a: Arg, reader=()) -> dict:
    """For a scale the launch reads that an earlier launch of this call wrote (a scale
    computed in the model, amax / 448): that launch, for the NaN check's finding.  The
    wrapper runs its launches in order, so the last one emitted before is the last to run."""
    if not a.scale or a.role != IN or a.name not in st.writers:
        return {}
    site, out = st.writers[a.name]
    # the line that made the scale's value (amax / 448), not the most telling op feeding it
    # (a fused norm's rsqrt): that is the line a reader of the finding looks for; where the
    # buffer names no node of its own, the one the reading op takes as that scale says it
    made = ir_queries.value_source(a.name, reader) or fx_ops.scale_value_source(reader, a.scale)
    text = where(made.source, module_path(made.module)) if made is not None else \
        cpp_emit.output_where(site, out).split("\n")[0]
    return dict(writer=site.index, writer_words=f"{site.kernel} (source {text})")


def plan_checked() -> bool:
    """The plan check comes with the input guard and with the memory check."""
    return _active.check_inputs or _active.memcheck != "off"


def planned_outputs(args: List[Arg]) -> List[Planned]:
    """What the graph planned for each output of an extern kernel or custom op (by
    buffer name): a size or stride over symbols the wrapper does not hold where
    the launch returns (an unbacked size the op's output defines) is not compared."""
    import sympy
    symbols = ir_queries.wrapper_symbols()

    def known(e):
        try:
            e = sympy.sympify(e)
            return e if e.free_symbols <= symbols else None
        except Exception:      # a form sympy cannot take: not compared, never a failed compile
            return None

    out = []
    for k, a in enumerate(args):
        layout = ir_queries.planned_layout(a.name) if a.role != IN else None
        if layout is not None:
            dtype, sizes, strides = layout
            out.append(Planned(k, str(dtype).replace("torch.", ""), tuple(map(known, sizes)),
                               tuple(map(known, strides))))
    return out


# -- model entry and exit ---------------------------------------------------------

def on_header(wrapper) -> None:
    st = state(wrapper)
    if st is not None and not st.header_written:   # the GPU wrapper calls the CPU one's too
        st.header_written = True
        core = ir_queries.linked_core(*cpp_emit.runtime_options(_active))
        pass_caller_errors(wrapper, cpp_emit.caller_error_source(_active, core))
        wrapper.header.splice(cpp_emit.runtime_source(_active, core) + cpp_emit.device_glue(ir_queries.wrapper_device(wrapper)))
        wrapper.header.writeline(cpp_emit.model_decl(_active, ir_queries.model_name()))


_CONVERT = "#define CONVERT_EXCEPTION_TO_ERROR_CODE"


_CATCH = "} catch (const std::exception& e) {"


def pass_caller_errors(wrapper, declaration: str) -> bool:
    """Where torch's AOTI interface (spliced into the wrapper's header) keeps no
    last error for its caller, its catch-all lets aoti-debug's CallerError
    (cpp_runtime/include/aoti_debug/detail/caller_error.h, `declaration`) go on to
    the caller, which then raises it with aoti-debug's message instead of "API call
    failed".  Every other error is handled as upstream handles it.  True if done."""
    lines = getattr(wrapper.header, "_lines", None)
    if not isinstance(lines, list):
        return False
    text = [line if isinstance(line, str) else "" for line in lines]
    if any("AOTInductorGetLastError" in line for line in text):
        return False            # 2.13 on: upstream hands the message over itself
    start = next((i for i, line in enumerate(text) if line.lstrip().startswith(_CONVERT)), None)
    if start is None:
        return False
    catch = next((i for i in range(start + 1, min(start + 12, len(text))) if _CATCH in text[i]), None)
    if catch is None:
        return False
    lines[catch] = text[catch].replace(
        _CATCH, "} catch (const ::aoti_debug::CallerError&) { throw; " + _CATCH, 1)
    lines[start:start] = declaration.splitlines()
    return True


def on_wrapper_decl(wrapper) -> None:
    st = state(wrapper)
    if st is None:
        return
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if ir_queries.is_tensor_input(n)]
    labels = guards.labels_for(names)
    lines = cpp_emit.run_begin(_active, names, labels, ir_queries.wrapper_device(wrapper),
                               None if ir_queries.is_aot() else ir_queries.device_index())
    if _active.check_inputs and ir_queries.is_aot():   # torch.compile's own guards recompile instead
        lines += guards.emit_or_leave_out(names, labels, _active.nan_check)
    with wrapper.prefix.indent():
        for line in lines:
            wrapper.prefix.writeline(line)


def around_upstream_input_checks(wrapper, emit_checks) -> None:
    """Upstream's input checks (AOTI_RUNTIME_CHECK_INPUTS), emitted by `emit_checks`:
    with the input guard compiled in, they run only while the guard is off at run
    time, so one problem gets one message, the guard's, in the user's terms."""
    st = state(wrapper)
    if st is None or not _active.check_inputs:
        emit_checks()
        return
    wrapper.prefix.writeline("#define __check_inputs_outputs aotid_upstream_input_checks")
    emit_checks()
    wrapper.prefix.splice("\n".join([
        "#undef __check_inputs_outputs",
        "static void __check_inputs_outputs(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {",
        "  if (!aotid_model.guards_inputs()) aotid_upstream_input_checks(inputs, outputs);",
        "}"]))


def model_outputs(refs: List[str], labels: Dict[str, str]) -> List[Arg]:
    """The model's tensor outputs, views included, under the user's names when
    they are inputs; `refs` are the expressions that hold them."""
    return [Arg(labels.get(name, name), ref, OUT) for name, ref in ir_queries.model_outputs(refs)]


def on_return(wrapper, output_refs) -> Optional[List[str]]:
    st = state(wrapper)
    if st is None:
        return None
    # a view output is an rvalue that run-end can only read once bound to a
    # variable; the NaN check's finish, which may throw, stays before any
    # output is released
    refs = ir_queries.bound_output_refs(wrapper, output_refs)
    for line in cpp_emit.run_end(_active, model_outputs(refs, guards.label_map())):
        wrapper.wrapper_call.writeline(line)
    # every launch has been generated by now: publish the plan for tlparse
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if ir_queries.is_tensor_input(n)]
    trace.emit_plan(_active, st.sites, trace.input_plan(names, guards.labels_for(names)))
    return refs


# -- the Python wrapper (torch.compile) ----------------------------------------
#
# The same plan and the same launch driver as the AOTI path, emitted as Python
# calls into aoti_debug/runtime/launches.py (python_emit.py).  Everything below
# acts only on a PythonWrapperCodegen that is not a C++ wrapper
# (ir_queries.is_python_instrumentable), and only while instrumentation is active.

@dataclasses.dataclass
class PyWrapperState(WrapperState):
    emitter = python_emit.EMITTER
    extern_node: object = None        # the ExternKernelOutLine being replayed
    entry_written: bool = False
    labels: Dict[str, str] = dataclasses.field(default_factory=dict)

    def input_names(self) -> Dict[str, str]:
        return self.labels


def py_state(wrapper) -> Optional[PyWrapperState]:
    """A Python wrapper's state when it is instrumented, else None."""
    return _state_of(wrapper, ir_queries.is_python_instrumentable, PyWrapperState)


def _py_note_provenance(make) -> None:
    from torch._inductor.virtualized import V
    wrapper = getattr(V.graph, "wrapper_code", None)
    st = py_state(wrapper) if wrapper is not None else None
    if st is None:
        return
    provenance = make()
    st.last = provenance
    wrapper.writeline(ir_queries.marker_line_class()(wrapper, provenance))


def py_on_scheduled_kernel_comment(node_schedule) -> None:
    if _active is not None:
        _py_note_provenance(lambda: ir_plan.provenance_of_schedule(node_schedule, ir_queries.extern_launch_nodes()))


def py_on_extern_kernel_comment(ir_node) -> None:
    if _active is not None:
        _py_note_provenance(lambda: ir_plan.provenance_of_ir_node(ir_node))


def py_on_define_kernel(wrapper, kernel_name: str, kernel_body: str) -> None:
    st = py_state(wrapper)
    if st is None or not isinstance(kernel_body, str):
        return
    # CPU kernels are C++ text inside async_compile.cpp_pybinding(...); Triton ones are Python
    parsed = ir_plan.parameter_names_cpp(kernel_body) or ir_plan.parameter_names_python(kernel_body)
    if parsed:
        st.roles[kernel_name] = ir_plan.roles_from_parameter_names(parsed[1])


# a view Inductor builds inline for an extern call: reinterpret_tensor(NAME, ...)
_PY_VIEW = re.compile(r"^reinterpret_tensor\((\w+),")


def _py_tensor_args(args) -> List[Arg]:
    out: List[Arg] = []
    for a in args:
        a = str(a).strip()
        if _IDENT.match(a) and ir_queries.is_tensor_name(a):
            out.append(Arg(a, a, IN))
        elif _PY_VIEW.match(a) and ir_queries.is_tensor_name(_PY_VIEW.match(a).group(1)):
            out.append(Arg(_PY_VIEW.match(a).group(1), a, IN))
    return out


def py_on_extern_out_line(line) -> None:
    """An ExternKernelOutLine replayed: its node names the extern launch it makes."""
    st = py_state(line.wrapper)
    if st is not None:
        st.extern_node = line.node


def py_around_extern_out(wrapper, kernel: str, out: str, out_view, args, device, emit_call) -> None:
    st = py_state(wrapper)
    if st is None:
        emit_call()
        return
    node, st.extern_node = st.extern_node, None
    name = ir_queries.extern_launch_name(node, device) if node is not None else kernel
    prov = take_provenance(st, name)
    outs = [Arg(f"{out}_as_strided", out_view, OUT) if out_view else Arg(out, out, OUT)]
    scales = ir_plan.scale_buffers(node) if node is not None else {}
    dequants = ir_plan.dequant_operands(node) if node is not None else {}
    launch(wrapper, st, name, prov, scaled(outs + _py_tensor_args(args), scales, dequants), "extern", emit_call)


def py_around_extern_alloc(wrapper, node, args, emit_call) -> None:
    st = py_state(wrapper)
    if st is None:
        emit_call()
        return
    device = d.type if (d := node.get_device()) is not None else "cpu"
    name = ir_queries.extern_launch_name(node, device)
    prov = take_provenance(st, name)
    tensors = _py_tensor_args(args)
    if ir_queries.returns_value(node):
        tensors.append(Arg(node.get_name(), node.get_name(), OUT))
    launch(wrapper, st, name, prov, scaled(tensors, ir_plan.scale_buffers(node), ir_plan.dequant_operands(node)),
           "extern", emit_call)


def py_on_header(wrapper) -> None:
    st = py_state(wrapper)
    if st is None or st.header_written:
        return
    st.header_written = True
    for line in python_emit.header(_active, ir_queries.model_name()):
        wrapper.header.writeline(line)


def py_on_inputs(wrapper) -> None:
    """Right after `args.clear()` in `call(args)`: the run record with the model inputs."""
    st = py_state(wrapper)
    if st is None or st.entry_written:
        return
    st.entry_written = True
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if ir_queries.is_tensor_input(n)]
    labels = ir_queries.python_input_labels(names)
    st.labels = dict(zip(names, labels))
    for line in python_emit.run_begin(names, labels):
        wrapper.prefix.writeline(line)


def py_on_return(wrapper, output_refs) -> None:
    st = py_state(wrapper)
    if st is None or not st.entry_written:
        return
    # a view output is an expression (reinterpret_tensor(buf2, ...)): run-end evaluates it too
    for line in python_emit.run_end(model_outputs(list(output_refs), st.labels), _active.memcheck != "off"):
        wrapper.wrapper_call.writeline(line)
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if ir_queries.is_tensor_input(n)]
    try:
        trace.emit_plan(_active, st.sites, trace.input_plan(names, [st.labels.get(n, n) for n in names]))
    except Exception:
        pass
