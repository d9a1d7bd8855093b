"""Everything that depends on the Inductor version lives here (torch 2.11-2.13).

Inductor builds a wrapper in two phases: scheduling queues WrapperLine
objects (kernel definitions, calls, allocations); replay turns them into
code.  The patches below wrap methods of both phases; their signatures are
the same in 2.11 and 2.13 except where noted.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, List

SUPPORTED = ((2, 11), (2, 13))


class UnsupportedTorch(RuntimeError):
    pass


def torch_version() -> tuple:
    import torch
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def check_version() -> None:
    version = torch_version()
    if not SUPPORTED[0] <= version <= SUPPORTED[1]:
        import torch
        raise UnsupportedTorch(
            f"aoti-debug supports torch 2.11 to 2.13; this is torch {torch.__version__}")


# A plain base class in 2.11-2.13; this module is only imported when patching.
from torch._inductor.codegen.wrapper import WrapperLine  # noqa: E402


def is_instrumentable(wrapper) -> bool:
    """AOTI C++ wrappers of the main graph, not the constant-folding graph."""
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_cpu_array_ref import CppWrapperCpuArrayRef
    from torch._inductor.virtualized import V
    if not isinstance(wrapper, CppWrapperCpu) or isinstance(wrapper, CppWrapperCpuArrayRef):
        return False
    graph = V.graph
    return bool(getattr(graph, "aot_mode", False)) and not getattr(graph, "is_const_graph", False)


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


def tensor_names_in(values: Iterable) -> List[str]:
    """Buffer names of the IR tensors among a fallback kernel's raw arguments."""
    from torch._inductor import ir
    names: List[str] = []

    def visit(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, ir.IRNode):
            try:
                names.append(v.codegen_reference())
            except Exception:
                pass
    visit(values)
    return [n for n in names if n.isidentifier() and is_tensor_name(n)]


def buffer_source(name: str) -> str:
    """The user's source line of the FX nodes that produced one buffer, or '-'."""
    from torch._inductor.virtualized import V
    from .plan import provenance_of_ir_node
    try:
        buf = V.graph.get_buffer(name)
    except Exception:
        buf = None
    return provenance_of_ir_node(buf).source if buf is not None else "-"


def model_name() -> str:
    from torch._inductor.virtualized import V
    return getattr(V.graph, "name", None) or "model"


# -- patching -----------------------------------------------------------------------

_originals: List[tuple] = []


def patch(owner, name: str, make: Callable[[Callable], Callable]) -> None:
    original = owner.__dict__.get(name)
    if original is None:
        original = getattr(owner, name)
        inherited = True
    else:
        inherited = False
    replacement = make(original)
    functools.update_wrapper(replacement, original)
    replacement.__aoti_debug_patch__ = True
    _originals.append((owner, name, original, inherited))
    setattr(owner, name, replacement)


def unpatch_all() -> None:
    while _originals:
        owner, name, original, inherited = _originals.pop()
        if inherited:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def install_patches(hooks) -> None:
    """Wrap the wrapper-codegen methods with the hooks (idempotent)."""
    if _originals:
        return
    check_version()
    from torch._inductor import ir
    from torch._inductor.codegen import cpp, simd, wrapper
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu

    # phase 1: provenance and kernel signatures
    def comment(orig):
        def codegen_comment(self, node_schedule, kernel_name=None):
            hooks.on_scheduled_kernel_comment(node_schedule, kernel_name)
            return orig(self, node_schedule, kernel_name)
        return codegen_comment
    patch(cpp.CppScheduling, "codegen_comment", comment)
    patch(simd.SIMDScheduling, "codegen_comment", comment)

    def extern_comment(orig):
        def codegen_comment(self, wrapper_code, kernel_name=None):
            hooks.on_extern_kernel_comment(self)
            return orig(self, wrapper_code, kernel_name)
        return codegen_comment
    patch(ir.ExternKernel, "codegen_comment", extern_comment)

    def define_kernel(orig):
        def patched(self, kernel_name, kernel_body, *args, **kwargs):
            hooks.on_define_kernel(self, kernel_name, kernel_body, kwargs.get("cpp_definition"))
            return orig(self, kernel_name, kernel_body, *args, **kwargs)
        return patched
    patch(wrapper.PythonWrapperCodegen, "define_kernel", define_kernel)

    # phase 2: launches
    def kernel_call(orig):
        def patched(self, kernel_name, call_args, **kwargs):
            hooks.around_kernel_call(self, kernel_name, call_args, kwargs.get("arg_types"),
                                     lambda: orig(self, kernel_name, call_args, **kwargs))
        return patched
    patch(CppWrapperCpu, "_generate_kernel_call_helper", kernel_call)
    patch(CppWrapperGpu, "_generate_kernel_call_helper", kernel_call)

    def extern_out(orig):
        def patched(self, kernel, out, out_view, args, device, *rest, **kwargs):
            st = hooks.state(self)
            if st is not None:
                st.extern_out = f"{out}_as_strided" if out_view else out
            return orig(self, kernel, out, out_view, args, device, *rest, **kwargs)
        return patched
    patch(CppWrapperCpu, "_generate_extern_kernel_out_helper", extern_out)

    def extern_call(orig):
        def patched(self, kernel, args, device, **kwargs):
            # name the launch as the generated code calls it: aoti_torch_cpu_cumsum
            shown = self.get_c_shim_func_name(kernel, device)
            hooks.around_extern_call(self, shown, list(args),
                                     lambda: orig(self, kernel, args, device, **kwargs))
        return patched
    patch(CppWrapperCpu, "generate_c_shim_extern_kernel_call", extern_call)

    def proxy_call(orig):
        def patched(self, op_overload, raw_args, output_args, raw_outputs):
            hooks.around_proxy_call(self, op_overload, raw_args, raw_outputs,
                                    lambda: orig(self, op_overload, raw_args, output_args, raw_outputs))
        return patched
    patch(CppWrapperCpu, "generate_fallback_kernel_with_runtime_lookup_aot", proxy_call)

    # model entry and exit
    def after(hook):
        def make(orig):
            def patched(self, *args, **kwargs):
                result = orig(self, *args, **kwargs)
                hook(self)
                return result
            return patched
        return make
    patch(CppWrapperCpu, "write_header", after(hooks.on_header))
    patch(CppWrapperGpu, "write_header", after(hooks.on_header))
    patch(CppWrapperCpu, "write_wrapper_decl", after(hooks.on_wrapper_decl))

    def generate_return(orig):
        def patched(self, output_refs):
            hooks.on_return(self, output_refs)
            return orig(self, output_refs)
        return patched
    patch(CppWrapperCpu, "generate_return", generate_return)

    # the user's names for inputs and dimensions, which Inductor does not keep
    import torch
    import torch._inductor as inductor

    def export(orig):
        def patched(mod, args, kwargs=None, *rest, dynamic_shapes=None, **kw):
            ep = orig(mod, args, kwargs, *rest, dynamic_shapes=dynamic_shapes, **kw)
            try:
                ep._aoti_debug_dim_names = hooks.guards.dim_names_of(args, kwargs, dynamic_shapes)
            except Exception:
                pass
            return ep
        return patched
    patch(torch.export, "export", export)

    def compile_and_package(orig):
        def patched(exported_program, *args, **kwargs):
            ctx = hooks.guards.context_from_exported_program(exported_program) \
                if hooks.active() is not None else None
            hooks.guards.set_context(ctx)
            try:
                return orig(exported_program, *args, **kwargs)
            finally:
                hooks.guards.set_context(None)
        return patched
    patch(inductor, "aoti_compile_and_package", compile_and_package)
