"""The AOTI C++ wrapper's patches (CppWrapperCpu, CppWrapperGpu and the
schedulings and IR both wrappers share), and the link step that adds the core
object to an instrumented artifact.
"""

from __future__ import annotations

import inspect

from . import cpp_emit, guards, hooks, ir_queries
from .adapter import after, around, before, before_return, bound, patch, through


def _link_core_objects() -> None:
    """A link of an instrumented wrapper gets the core object it names (the
    marker of this patch on codecache.CppBuilder is what ir_queries.linked_core
    asks before naming one)."""
    from torch._inductor import codecache
    from torch._inductor import cpp_builder
    try:
        params = list(inspect.signature(codecache.CppBuilder.__init__).parameters)
    except (AttributeError, TypeError, ValueError):
        return
    options = getattr(cpp_builder, "BuildOptionsBase", None)
    if (params[:5] != ["self", "name", "sources", "BuildOption", "output_dir"]
            or not all(hasattr(options, m) for m in ("get_compile_only", "get_precompiling",
                                                      "get_preprocessing"))):
        return              # not the builder this wrapper knows: header-only runtime

    def builder(orig):
        class CppBuilderWithCore(orig):
            def __init__(self, name, sources, BuildOption, output_dir=""):
                links = not (BuildOption.get_compile_only() or BuildOption.get_precompiling()
                             or BuildOption.get_preprocessing())
                if links:
                    listed = [sources] if isinstance(sources, str) else list(sources)
                    extra = [o for o in cpp_emit.core_objects_for(listed) if o not in listed]
                    if extra:
                        sources = listed + extra
                super().__init__(name, sources, BuildOption, output_dir)
        return CppBuilderWithCore
    patch(codecache, "CppBuilder", builder)


# The patches install() puts on Inductor, each named for the method it wraps and what it adds.

def _codegen_comment_notes_provenance(scheduling, node_schedule, kernel_name) -> None:
    """A scheduled kernel's comment: its provenance, for whichever wrapper is generated."""
    hooks.py_on_scheduled_kernel_comment(node_schedule)
    hooks.on_scheduled_kernel_comment(node_schedule, kernel_name)


def _extern_comment_notes_provenance(ir_node) -> None:
    """An extern kernel's comment: its provenance, for whichever wrapper is generated."""
    hooks.py_on_extern_kernel_comment(ir_node)
    hooks.on_extern_kernel_comment(ir_node)


def _define_kernel_reads_roles(wrapper, kernel_name, kernel_body, cpp_definition) -> None:
    """A kernel's definition: its parameter names give its arguments' roles."""
    hooks.py_on_define_kernel(wrapper, kernel_name, kernel_body)
    hooks.on_define_kernel(wrapper, kernel_name, kernel_body, cpp_definition)


def _shim_call_named_as_called(wrapper, kernel, args, device, emit_call) -> None:
    """An extern kernel's C shim call: a launch named as the code calls it (aoti_torch_cpu_cumsum)."""
    hooks.around_extern_call(wrapper, wrapper.get_c_shim_func_name(kernel, device), list(args), emit_call)


def _export_keeps_user_names(export, *args, **kwargs):
    """torch.export.export: the user's names of inputs and dimensions, which Inductor drops."""
    ep = export(*args, **kwargs)
    try:
        a = bound(export, *args, **kwargs)
        ep._aoti_debug_dim_names = guards.dim_names_of(a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
        ep._aoti_debug_declared = guards.declared_of(a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
    except Exception:
        pass
    return ep


def _compile_and_package_in_context(compile_and_package, *args, **kwargs):
    """aoti_compile_and_package: the program's guard context and the package's name, while it runs."""
    a = bound(compile_and_package, *args, **kwargs)
    ctx = guards.context_from_exported_program(a["exported_program"]) if hooks.active() is not None else None
    guards.set_context(ctx)
    ir_queries.set_package_stem(a["package_path"])
    try:
        return compile_and_package(*args, **kwargs)
    finally:
        guards.set_context(None)
        ir_queries.set_package_stem(None)


def install() -> None:
    """Wrap the C++ wrapper's codegen methods (and those both wrappers share) with
    the hooks; install.py calls it once, after adapter.check_version()."""
    import torch
    import torch._inductor as inductor
    from torch._inductor import ir
    from torch._inductor.codegen import cpp, simd, wrapper
    from torch._inductor.codegen import triton as triton_codegen
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu as Cpu
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu as Gpu

    comment = before(_codegen_comment_notes_provenance, "node_schedule", "kernel_name")
    launch = around(hooks.around_kernel_call, "kernel_name", "call_args", "arg_types")
    for owner, name, make in (
        # phase 1: provenance and kernel signatures, for either wrapper (Triton's
        # scheduling has a comment of its own: without it Triton launches had no provenance)
        (cpp.CppScheduling, "codegen_comment", comment),
        (simd.SIMDScheduling, "codegen_comment", comment),
        (triton_codegen.TritonScheduling, "codegen_comment", comment),
        (ir.ExternKernel, "codegen_comment", before(_extern_comment_notes_provenance)),
        (wrapper.PythonWrapperCodegen, "define_kernel",
         before(_define_kernel_reads_roles, "kernel_name", "kernel_body", "cpp_definition")),
        # phase 2: which buffers hold values (both wrappers replay the same line classes)
        (wrapper.AllocateLine, "codegen", after(hooks.on_allocate)),
        (wrapper.ReuseLine, "codegen", after(hooks.on_reuse)),
        # phase 2: launches
        (Cpu, "_generate_kernel_call_helper", launch),
        (Gpu, "_generate_kernel_call_helper", launch),
        (Cpu, "generate_input_output_runtime_checks", around(hooks.around_upstream_input_checks)),
        (Cpu, "_generate_extern_kernel_out_helper", before(hooks.on_extern_out, "out", "out_view")),
        (Cpu, "generate_c_shim_extern_kernel_call", around(_shim_call_named_as_called, "kernel", "args", "device")),
        (Cpu, "generate_fallback_kernel_with_runtime_lookup_aot",
         around(hooks.around_proxy_call, "op_overload", "raw_args", "raw_outputs")),
        (Cpu, "generate_fallback_kernel_with_runtime_lookup",
         around(hooks.around_jit_fallback, "op_overload", "raw_args", "outputs")),
        # model entry and exit
        (Cpu, "write_header", after(hooks.on_header)),
        (Gpu, "write_header", after(hooks.on_header)),
        (Cpu, "write_wrapper_decl", after(hooks.on_wrapper_decl)),
        (Cpu, "generate_return", before_return(hooks.on_return)),
        # the user's names and the package's, which Inductor does not keep
        (torch.export, "export", through(_export_keeps_user_names)),
        (inductor, "aoti_compile_and_package", through(_compile_and_package_in_context)),
    ):
        patch(owner, name, make)
    _link_core_objects()
