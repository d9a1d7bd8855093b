"""The AOTI C++ wrapper's patches (CppWrapperCpu, CppWrapperGpu and the
schedulings and IR both wrappers share), and the link step that adds the core
object to an instrumented artifact.
"""

from __future__ import annotations

import inspect

from . import cpp_emit, guards, ir_queries
from .adapter import after, around, before_return, bound, patch


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


def install(hooks) -> None:
    """Wrap the C++ wrapper's codegen methods (and those both wrappers share) with
    the hooks; install.py calls it once, after adapter.check_version()."""
    from torch._inductor import ir
    from torch._inductor.codegen import cpp, simd, wrapper
    from torch._inductor.codegen import triton as triton_codegen
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu

    # phase 1: provenance and kernel signatures, for either wrapper (each
    # hook returns at once when its wrapper is not the one being generated)
    def comment(orig):
        def codegen_comment(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs)
            hooks.py_on_scheduled_kernel_comment(a["node_schedule"])
            hooks.on_scheduled_kernel_comment(a["node_schedule"], a["kernel_name"])
            return orig(self, *args, **kwargs)
        return codegen_comment
    patch(cpp.CppScheduling, "codegen_comment", comment)
    patch(simd.SIMDScheduling, "codegen_comment", comment)
    # its own method, not SIMDScheduling's: without this Triton launches had no provenance
    patch(triton_codegen.TritonScheduling, "codegen_comment", comment)

    def extern_comment(orig):
        def codegen_comment(self, *args, **kwargs):
            hooks.py_on_extern_kernel_comment(self)
            hooks.on_extern_kernel_comment(self)
            return orig(self, *args, **kwargs)
        return codegen_comment
    patch(ir.ExternKernel, "codegen_comment", extern_comment)

    def define_kernel(orig):
        def patched(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs)
            hooks.py_on_define_kernel(self, a["kernel_name"], a["kernel_body"])
            hooks.on_define_kernel(self, a["kernel_name"], a["kernel_body"], a["cpp_definition"])
            return orig(self, *args, **kwargs)
        return patched
    patch(wrapper.PythonWrapperCodegen, "define_kernel", define_kernel)

    # phase 2: which buffers hold values (both wrappers replay the same line classes)
    patch(wrapper.AllocateLine, "codegen", after(hooks.on_allocate))
    patch(wrapper.ReuseLine, "codegen", after(hooks.on_reuse))

    # phase 2: launches
    launch = around(hooks.around_kernel_call, "kernel_name", "call_args", "arg_types")
    patch(CppWrapperCpu, "_generate_kernel_call_helper", launch)
    patch(CppWrapperGpu, "_generate_kernel_call_helper", launch)

    def input_checks(orig):
        def patched(self, *args, **kwargs):
            before, after = hooks.around_upstream_input_checks(self)
            for line in before:
                self.prefix.writeline(line)
            result = orig(self, *args, **kwargs)
            self.prefix.splice("\n".join(after))
            return result
        return patched
    patch(CppWrapperCpu, "generate_input_output_runtime_checks", input_checks)

    def extern_out(orig):
        def patched(self, *args, **kwargs):
            st = hooks.state(self)
            if st is not None:
                a = bound(orig, self, *args, **kwargs)
                st.extern_out = f"{a['out']}_as_strided" if a["out_view"] else a["out"]
            return orig(self, *args, **kwargs)
        return patched
    patch(CppWrapperCpu, "_generate_extern_kernel_out_helper", extern_out)

    def extern_call(orig):
        def patched(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs)
            # name the launch as the generated code calls it: aoti_torch_cpu_cumsum
            shown = self.get_c_shim_func_name(a["kernel"], a["device"])
            hooks.around_extern_call(self, shown, list(a["args"]), lambda: orig(self, *args, **kwargs))
        return patched
    patch(CppWrapperCpu, "generate_c_shim_extern_kernel_call", extern_call)

    patch(CppWrapperCpu, "generate_fallback_kernel_with_runtime_lookup_aot",
          around(hooks.around_proxy_call, "op_overload", "raw_args", "raw_outputs"))

    # model entry and exit
    patch(CppWrapperCpu, "write_header", after(hooks.on_header))
    patch(CppWrapperGpu, "write_header", after(hooks.on_header))
    patch(CppWrapperCpu, "write_wrapper_decl", after(hooks.on_wrapper_decl))
    patch(CppWrapperCpu, "generate_return", before_return(hooks.on_return))

    # the user's names for inputs and dimensions, which Inductor does not keep
    import torch
    import torch._inductor as inductor

    def export(orig):
        def patched(*args, **kwargs):
            ep = orig(*args, **kwargs)
            try:
                a = bound(orig, *args, **kwargs)
                ep._aoti_debug_dim_names = guards.dim_names_of(
                    a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
                ep._aoti_debug_declared = guards.declared_of(
                    a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
            except Exception:
                pass
            return ep
        return patched
    patch(torch.export, "export", export)

    def compile_and_package(orig):
        def patched(*args, **kwargs):
            a = bound(orig, *args, **kwargs)
            ctx = guards.context_from_exported_program(a["exported_program"]) \
                if hooks.active() is not None else None
            guards.set_context(ctx)
            ir_queries.set_package_stem(a["package_path"])
            try:
                return orig(*args, **kwargs)
            finally:
                guards.set_context(None)
                ir_queries.set_package_stem(None)
        return patched
    patch(inductor, "aoti_compile_and_package", compile_and_package)

    _link_core_objects()
