"""Everything that depends on the Inductor version lives here (torch 2.11-2.13).

Inductor builds a wrapper in two phases: scheduling queues WrapperLine
objects (kernel definitions, calls, allocations); replay turns them into
code.  The patches below wrap methods of both phases; their signatures are
the same in 2.11 and 2.13 except where noted.
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Iterable, List, Optional

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


@functools.lru_cache(maxsize=None)
def marker_line_class():
    """A WrapperLine (a plain base class in 2.11-2.13) that writes nothing and
    hands provenance to the call after it.  Built on first use so that
    importing this module does not import Inductor (the start-up hook waits
    for the program to do that)."""
    from torch._inductor.codegen.wrapper import WrapperLine

    class ProvenanceMarker(WrapperLine):
        def __init__(self, wrapper, provenance) -> None:
            self.wrapper = wrapper
            self.provenance = provenance

        def codegen(self, code) -> None:
            st = getattr(self.wrapper, "_aotid_state", None)
            if st is not None:
                st.pending = self.provenance

    return ProvenanceMarker


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


def buffer_source(name: str, kernel_nodes=()) -> str:
    """The user's line where the values of one output buffer can turn non-finite, or '-'.

    A fused kernel stores a buffer whose own origin may be only its last op
    (the `+ 1` after a sum of a log).  Walking back through the FX nodes fused
    into the same kernel finds the ops feeding it, and plan's rule names one
    line among them (the log's)."""
    from torch._inductor.virtualized import V
    from .plan import provenance_of_fx_nodes, _sorted_origins
    try:
        buf = V.graph.get_buffer(name)
    except Exception:
        return "-"
    if buf is None:
        return "-"
    inside = set(kernel_nodes)
    seen, todo = {}, list(getattr(buf, "origins", ()) or ())
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen[node.name] = node
        todo += [n for n in node.all_input_nodes if n.name in inside]
    return provenance_of_fx_nodes(_sorted_origins(seen.values())).source


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


# -- the linked core ----------------------------------------------------------------

def linked_core(stats: bool, dumps: bool):
    """(path, compiler flags) of the core object (config.h: AOTI_DEBUG_LINKED_CORE)
    to link into the AOTI artifact being generated, or None to compile the
    runtime header-only.

    Only for AOTI builds that Inductor links here (not package_cpp_only, not
    cross-compiled) on torch 2.13, whose AotCodeCompiler links the wrapper
    object through CppBuilder (the hook below); elsewhere the header-only
    runtime costs compile time but needs nothing at link time."""
    import os
    import torch
    from torch._inductor import config
    from torch._inductor.virtualized import V
    from aoti_debug import _build
    aot = config.aot_inductor
    if (torch_version() < (2, 13) or not getattr(V.graph, "aot_mode", False)
            or getattr(aot, "package_cpp_only", False)
            or getattr(aot, "cross_target_platform", None) not in (None, "", "linux")):
        return None
    flags = _build.core_flags(stats, dumps, os.path.join(os.path.dirname(torch.__file__), "include"),
                              bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)), torch.__version__)
    try:
        return str(_build.core_object(flags)), flags
    except (_build.BuildError, OSError):
        return None


def _link_core_objects(hooks) -> None:
    """A link of an instrumented wrapper gets the core object it names."""
    from torch._inductor import codecache

    def builder(orig):
        class CppBuilderWithCore(orig):
            def __init__(self, name, sources, BuildOption, output_dir=""):
                links = not (BuildOption.get_compile_only() or BuildOption.get_precompiling()
                             or BuildOption.get_preprocessing())
                if links:
                    listed = [sources] if isinstance(sources, str) else list(sources)
                    extra = [o for o in hooks.cpp_emit.core_objects_for(listed) if o not in listed]
                    if extra:
                        sources = listed + extra
                super().__init__(name, sources, BuildOption, output_dir)
        return CppBuilderWithCore
    patch(codecache, "CppBuilder", builder)


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
    if not isinstance(replacement, type):  # a class (a subclass of the original) keeps its own
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


def _after(hook):
    """A method that calls `hook(self)` once the original has written its part."""
    def make(orig):
        def patched(self, *args, **kwargs):
            result = orig(self, *args, **kwargs)
            hook(self)
            return result
        return patched
    return make


def _before_return(hook):
    """generate_return(output_refs), with `hook(self, output_refs)` before it;
    the hook may hand back the references the original is to use."""
    def make(orig):
        def patched(self, output_refs):
            refs = hook(self, output_refs)
            return orig(self, output_refs if refs is None else refs)
        return patched
    return make


def _kernel_call(hook):
    """_generate_kernel_call_helper handed to `hook(self, name, args, arg_types, emit_call)`."""
    def make(orig):
        def patched(self, kernel_name, call_args, **kwargs):
            hook(self, kernel_name, call_args, kwargs.get("arg_types"),
                 lambda: orig(self, kernel_name, call_args, **kwargs))
        return patched
    return make


def install_patches(hooks) -> None:
    """Wrap the wrapper-codegen methods with the hooks (idempotent)."""
    if _originals:
        return
    check_version()
    from torch._inductor import ir
    from torch._inductor.codegen import cpp, simd, wrapper
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu

    # phase 1: provenance and kernel signatures, for either wrapper (each
    # hook returns at once when its wrapper is not the one being generated)
    def comment(orig):
        def codegen_comment(self, node_schedule, kernel_name=None):
            hooks.py_on_scheduled_kernel_comment(node_schedule)
            hooks.on_scheduled_kernel_comment(node_schedule, kernel_name)
            return orig(self, node_schedule, kernel_name)
        return codegen_comment
    patch(cpp.CppScheduling, "codegen_comment", comment)
    patch(simd.SIMDScheduling, "codegen_comment", comment)

    def extern_comment(orig):
        def codegen_comment(self, wrapper_code, kernel_name=None):
            hooks.py_on_extern_kernel_comment(self)
            hooks.on_extern_kernel_comment(self)
            return orig(self, wrapper_code, kernel_name)
        return codegen_comment
    patch(ir.ExternKernel, "codegen_comment", extern_comment)

    def define_kernel(orig):
        def patched(self, kernel_name, kernel_body, *args, **kwargs):
            hooks.py_on_define_kernel(self, kernel_name, kernel_body)
            hooks.on_define_kernel(self, kernel_name, kernel_body, kwargs.get("cpp_definition"))
            return orig(self, kernel_name, kernel_body, *args, **kwargs)
        return patched
    patch(wrapper.PythonWrapperCodegen, "define_kernel", define_kernel)

    # phase 2: which buffers hold values (both wrappers replay the same line classes)
    patch(wrapper.AllocateLine, "codegen", _after(hooks.on_allocate))
    patch(wrapper.ReuseLine, "codegen", _after(hooks.on_reuse))

    # phase 2: launches
    patch(CppWrapperCpu, "_generate_kernel_call_helper", _kernel_call(hooks.around_kernel_call))
    patch(CppWrapperGpu, "_generate_kernel_call_helper", _kernel_call(hooks.around_kernel_call))

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
    patch(CppWrapperCpu, "write_header", _after(hooks.on_header))
    patch(CppWrapperGpu, "write_header", _after(hooks.on_header))
    patch(CppWrapperCpu, "write_wrapper_decl", _after(hooks.on_wrapper_decl))
    patch(CppWrapperCpu, "generate_return", _before_return(hooks.on_return))

    # the user's names for inputs and dimensions, which Inductor does not keep
    import torch
    import torch._inductor as inductor

    def export(orig):
        def patched(mod, args, kwargs=None, *rest, dynamic_shapes=None, **kw):
            ep = orig(mod, args, kwargs, *rest, dynamic_shapes=dynamic_shapes, **kw)
            try:
                ep._aoti_debug_dim_names = hooks.guards.dim_names_of(mod, args, kwargs, dynamic_shapes)
            except Exception:
                pass
            return ep
        return patched
    patch(torch.export, "export", export)

    def compile_and_package(orig):
        def patched(exported_program, *args, **kwargs):
            global _package_stem
            ctx = hooks.guards.context_from_exported_program(exported_program) \
                if hooks.active() is not None else None
            hooks.guards.set_context(ctx)
            _package_stem = package_stem(kwargs.get("package_path"))
            try:
                return orig(exported_program, *args, **kwargs)
            finally:
                hooks.guards.set_context(None)
                _package_stem = None
        return patched
    patch(inductor, "aoti_compile_and_package", compile_and_package)

    _link_core_objects(hooks)
    install_python_wrapper_patches(hooks)


# -- the Python wrapper (torch.compile) ---------------------------------------------

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


def settings_pass(settings, user_pass):
    """A post-grad pass that changes nothing and whose uuid() hashes the compile-time
    settings, so Inductor's FX graph cache keeps instrumented and plain artifacts apart."""
    import hashlib
    import os
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from aoti_debug._version import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    digest.update(repr(("aoti-debug", __version__, settings.level, tuple(settings.kernels),
                        str(settings.nan_check), bool(settings.check_inputs))).encode())
    for part in ("python_emit.py", "hooks.py", "adapter.py", "plan.py"):
        try:
            with open(os.path.join(here, part), "rb") as f:
                digest.update(f.read())
        except OSError:
            pass
    for part in ("launches.py",):
        try:
            with open(os.path.join(os.path.dirname(here), "aoti_debug", part), "rb") as f:
                digest.update(f.read())
        except OSError:
            pass

    class AotiDebugSettingsPass(CustomGraphPass):
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, graph):
            if self.inner is not None:
                return self.inner(graph)
            return None

        def uuid(self):
            inner = self.inner.uuid() if self.inner is not None else None
            if isinstance(inner, bytes):
                inner = inner.hex()
            return digest.hexdigest() + ("" if inner is None else f"+{inner}")

    if isinstance(user_pass, (list, tuple)):
        return list(user_pass) + [AotiDebugSettingsPass(None)]
    return AotiDebugSettingsPass(user_pass)


def install_python_wrapper_patches(hooks) -> None:
    """The torch.compile (PythonWrapperCodegen) patches; called from install_patches."""
    from torch._inductor import compile_fx as compile_fx_mod
    from torch._inductor import config
    from torch._inductor.codegen import wrapper

    py = wrapper.PythonWrapperCodegen

    patch(py, "_generate_kernel_call_helper", _kernel_call(hooks.py_around_kernel_call))

    def out_line(orig):
        def patched(self, code):
            hooks.py_on_extern_out_line(self.wrapper, self.node)
            return orig(self, code)
        return patched
    patch(wrapper.ExternKernelOutLine, "codegen", out_line)

    def extern_out(orig):
        def patched(self, kernel, out, out_view, args, device, *rest, **kwargs):
            hooks.py_around_extern_out(self, kernel, out, out_view, list(args), device,
                                       lambda: orig(self, kernel, out, out_view, args, device,
                                                    *rest, **kwargs))
        return patched
    patch(py, "_generate_extern_kernel_out_helper", extern_out)

    def extern_alloc(orig):
        def patched(self, extern_kernel, args):
            hooks.py_around_extern_alloc(self, extern_kernel, list(args),
                                         lambda: orig(self, extern_kernel, args))
        return patched
    patch(py, "_generate_extern_kernel_alloc_helper", extern_alloc)

    patch(py, "write_header", _after(hooks.py_on_header))
    patch(py, "codegen_inputs", _after(hooks.py_on_inputs))
    patch(py, "generate_return", _before_return(hooks.py_on_return))

    # torch.compile's entry: the user's input names, and the settings in the cache key
    depth = [0]

    def compile_fx(orig):
        def patched(model_, *args, **kwargs):
            settings = hooks.active()
            patches = kwargs.get("config_patches")
            aoti = config.cpp_wrapper or (isinstance(patches, dict) and patches.get("cpp_wrapper"))
            if settings is None or depth[0] or aoti:   # compile_fx calls itself: act once
                return orig(model_, *args, **kwargs)
            remember_dynamo_labels(model_)
            depth[0] += 1
            try:
                with config.patch(post_grad_custom_post_pass=settings_pass(
                        settings, config.post_grad_custom_post_pass)):
                    return orig(model_, *args, **kwargs)
            finally:
                depth[0] -= 1
        return patched
    patch(compile_fx_mod, "compile_fx", compile_fx)
