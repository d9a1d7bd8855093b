"""The patches on Inductor's wrapper codegen.

Codegen runs in two phases (see adapter.py): kernels are scheduled first,
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
from typing import Dict, List, Optional

from aoti_debug import filters

from . import adapter, cpp_emit, guards, plan
from .plan import IN, INOUT, OUT, Arg, Provenance, Site

# The compile-time settings in force (set by install.activate / instrument()).
_active = None


def active():
    return _active


def set_active(settings) -> None:
    global _active
    _active = settings


@dataclasses.dataclass
class WrapperState:
    """Per generated wrapper: the plan so far and the provenance in flight."""
    sites: List[Site] = dataclasses.field(default_factory=list)
    roles: Dict[str, List[Optional[str]]] = dataclasses.field(default_factory=dict)
    pending: Optional[Provenance] = None      # replay phase: set by the marker line
    last: Optional[Provenance] = None         # scheduling phase: last codegen_comment
    extern_out: Optional[str] = None
    launches: int = 0
    in_call: bool = False
    header_written: bool = False


def state(wrapper) -> Optional[WrapperState]:
    """The wrapper's state when it is instrumented, else None."""
    if _active is None or not adapter.is_instrumentable(wrapper):
        return None
    st = getattr(wrapper, "_aotid_state", None)
    if st is None:
        st = WrapperState()
        wrapper._aotid_state = st
    return st


class ProvenanceMarker(adapter.WrapperLine):
    """A wrapper line that writes nothing and passes provenance to the next call."""

    def __init__(self, wrapper, provenance: Provenance) -> None:
        self.wrapper = wrapper
        self.provenance = provenance

    def codegen(self, code) -> None:
        st = getattr(self.wrapper, "_aotid_state", None)
        if st is not None:
            st.pending = self.provenance


def note_provenance(provenance: Provenance) -> None:
    from torch._inductor.virtualized import V
    wrapper = V.graph.wrapper_code
    st = state(wrapper)
    if st is None:
        return
    st.last = provenance
    wrapper.writeline(ProvenanceMarker(wrapper, provenance))


def take_provenance(st: WrapperState, kernel: str) -> Provenance:
    prov, st.pending = st.pending, None
    return prov or Provenance()


def selected(kernel: str, provenance: Provenance) -> bool:
    return filters.matches(_active.kernels, (kernel,) + provenance.filter_names())


def new_site(st: WrapperState, kernel: str, provenance: Provenance, args: List[Arg], kind: str) -> Site:
    st.launches += 1
    site = Site(st.launches, kernel, provenance, args, kind)
    st.sites.append(site)
    return site


# -- phase 1: provenance and kernel signatures ----------------------------------

def on_scheduled_kernel_comment(node_schedule, kernel_name) -> None:
    if _active is not None:
        note_provenance(plan.provenance_of_schedule(node_schedule))


def on_extern_kernel_comment(ir_node) -> None:
    if _active is not None:
        note_provenance(plan.provenance_of_ir_node(ir_node))


def on_define_kernel(wrapper, kernel_name: str, kernel_body: str, cpp_definition: Optional[str]) -> None:
    st = state(wrapper)
    if st is None:
        return
    parsed = (plan.parameter_names_cpp(cpp_definition) if cpp_definition
              else plan.parameter_names_python(kernel_body))
    if parsed:
        st.roles[kernel_name] = plan.roles_from_parameter_names(parsed[1])


# -- phase 2: launches ----------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
# a view Inductor builds inline for an extern call: reinterpret_tensor_wrapper(NAME, ...)
_VIEW = re.compile(r"^(?:wrap_with_raii_handle_if_needed\()?reinterpret_tensor_wrapper\((\w+),")


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
            elif not adapter.is_tensor_name(arg):
                continue
            else:
                role = INOUT               # user-defined Triton: roles unknown
        args.append(Arg(arg, arg, role))
    return args


def around_kernel_call(wrapper, kernel_name, call_args, arg_types, emit_call) -> None:
    st = state(wrapper)
    if st is None or st.in_call:
        emit_call()
        return
    prov = take_provenance(st, kernel_name)
    args = kernel_call_args(st, kernel_name, call_args, arg_types)
    _around(wrapper, st, kernel_name, prov, args, "kernel", emit_call)


def around_extern_call(wrapper, kernel: str, args: List[str], emit_call) -> None:
    st = state(wrapper)
    if st is None:
        emit_call()
        return
    prov = take_provenance(st, kernel)
    out_name, st.extern_out = st.extern_out, None
    tensors: List[Arg] = []
    for a in args:
        a = a.strip()
        if a.startswith("&") and a.endswith("_handle"):
            name = a[1:-len("_handle")]
            tensors.append(Arg(name, a[1:], OUT))
        elif _IDENT.match(a) and (a == out_name or adapter.is_tensor_name(a)):
            tensors.append(Arg(a, a, OUT if a == out_name else IN))
        elif _VIEW.match(a) and adapter.is_tensor_name(_VIEW.match(a).group(1)):
            tensors.append(Arg(_VIEW.match(a).group(1), a, IN))
    _around(wrapper, st, kernel, prov, tensors, "extern", emit_call)


def around_proxy_call(wrapper, op_overload, raw_args, raw_outputs, emit_call) -> None:
    st = state(wrapper)
    if st is None:
        emit_call()
        return
    prov, st.pending = st.last or Provenance(), None
    kernel = str(op_overload)
    tensors = [Arg(n, n, IN) for n in adapter.tensor_names_in(raw_args)]
    tensors += [Arg(n, n, OUT) for n in adapter.tensor_names_in(raw_outputs)]
    _around(wrapper, st, kernel, prov, tensors, "proxy", emit_call)


def _display(args: List[Arg]) -> List[Arg]:
    """Model inputs appear under the user's names (x, batch["mask"]), not arg4_1."""
    labels = guards.label_map()
    return [dataclasses.replace(a, name=labels.get(a.name, a.name)) for a in args]


def _around(wrapper, st, kernel, prov, args, kind, emit_call) -> None:
    args = _display(args)
    if st.in_call:
        emit_call()
        return
    site = new_site(st, kernel, prov, args, kind)   # numbered even when filtered out
    nan = _active.nan_check.enabled
    if not selected(kernel, prov):
        for line in cpp_emit.skipped_launch(site, nan):
            wrapper.writeline(line)
        emit_call()
        for line in (cpp_emit.nan_after(site) if nan else []):
            wrapper.writeline(line)
        return
    st.in_call = True     # the GPU wrapper hands CPU launches to the CPU one: count once
    try:
        for line in cpp_emit.before_launch(site):
            wrapper.writeline(line)
        emit_call()
        for line in cpp_emit.after_launch(site, nan):
            wrapper.writeline(line)
    finally:
        st.in_call = False


# -- model entry and exit ---------------------------------------------------------

def on_header(wrapper) -> None:
    st = state(wrapper)
    if st is not None and not st.header_written:   # the GPU wrapper calls the CPU one's too
        st.header_written = True
        wrapper.header.splice(cpp_emit.runtime_source())


def on_wrapper_decl(wrapper) -> None:
    st = state(wrapper)
    if st is None:
        return
    from torch._inductor.virtualized import V
    names = [n for n in V.graph.graph_inputs if adapter.is_tensor_input(n)]
    labels = guards.labels_for(names)
    lines = cpp_emit.run_begin(_active, adapter.model_name(), names, labels)
    if _active.check_inputs:
        lines += guards.emit(names, labels, _active.nan_check)
    with wrapper.prefix.indent():
        for line in lines:
            wrapper.prefix.writeline(line)


def on_return(wrapper, output_refs) -> None:
    st = state(wrapper)
    if st is None:
        return
    refs = [r for r in output_refs if _IDENT.match(r or "")]
    for line in cpp_emit.run_end(_active, refs):
        wrapper.wrapper_call.writeline(line)
