"""Everything that depends on the Inductor version lives here.

Inductor builds a wrapper in two phases: scheduling queues WrapperLine
objects (kernel definitions, calls, allocations); replay turns them into
code.  The patches below wrap methods of both phases.

Which torch releases work is decided by the hook points themselves, not by
version numbers: every method the patches wrap, with the parameters they
read, is listed in HOOK_POINTS and checked before anything is patched.  A
release newer than the newest tested one is tried (one line says it is
untested); a release that lacks a hook point is refused with one line naming
what is missing, before anything is compiled.

Differences between the tested releases (2.11 to 2.15), all absorbed here:
- 2.15 adds parameters to _generate_extern_kernel_out_helper (profiling_args)
  and generate_c_shim_extern_kernel_call (profiling_args, output_handle):
  the wrappers pass every argument on untouched and read theirs by name
  (_bound), so added parameters, and keyword/positional spelling, do not matter.
- 2.13 links AOTI's wrapper object through codecache.CppBuilder, which
  linked_core() relies on; before 2.13 the runtime is compiled header-only.
- 2.13 keeps the message of an error the model raised for its caller
  (AOTInductorGetLastError); before, the caller reads only "run_func_(...)
  API call failed", so pass_caller_errors lets aoti-debug's own through.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import weakref
from typing import Callable, Iterable, List, Optional

# The releases scripts/test.sh's matrix runs against (TORCH=2.1x.y ./scripts/test.sh).
TESTED = ((2, 11), (2, 15))


class UnsupportedTorch(RuntimeError):
    """This torch lacks a hook point the instrumentation needs (str() is one line).

    Uncaught, it ends the program with that line alone, no traceback
    (see _one_line_excepthook)."""


def torch_version() -> tuple:
    import torch
    return _release(torch.__version__)


def _release(version: str) -> tuple:
    """(2, 15) for '2.15.0+cu132', '2.15.0a0+git1234', '2.16.0.dev20260101'."""
    import re
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _shown(release: tuple) -> str:
    return ".".join(map(str, release))


# Every method or class the patches wrap or rely on, as (module, attribute path,
# parameters the wrappers read by name).  A release missing one is refused.
HOOK_POINTS = (
    # phase 1: provenance and kernel signatures
    ("torch._inductor.codegen.cpp", "CppScheduling.codegen_comment", ("node_schedule", "kernel_name")),
    ("torch._inductor.codegen.simd", "SIMDScheduling.codegen_comment", ("node_schedule", "kernel_name")),
    # Triton's scheduling overrides SIMDScheduling's comment (GPU kernels, either wrapper)
    ("torch._inductor.codegen.triton", "TritonScheduling.codegen_comment", ("node_schedule", "kernel_name")),
    ("torch._inductor.ir", "ExternKernel.codegen_comment", ()),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen.define_kernel",
     ("kernel_name", "kernel_body", "cpp_definition")),
    ("torch._inductor.codegen.wrapper", "WrapperLine", ()),
    # phase 2: buffers, launches
    ("torch._inductor.codegen.wrapper", "AllocateLine.codegen", ("code",)),
    ("torch._inductor.codegen.wrapper", "ReuseLine.codegen", ("code",)),
    ("torch._inductor.codegen.wrapper", "ExternKernelOutLine.codegen", ("code",)),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu._generate_kernel_call_helper",
     ("kernel_name", "call_args", "arg_types")),
    ("torch._inductor.codegen.cpp_wrapper_gpu", "CppWrapperGpu._generate_kernel_call_helper",
     ("kernel_name", "call_args", "arg_types")),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu._generate_extern_kernel_out_helper",
     ("kernel", "out", "out_view", "args", "device")),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.generate_c_shim_extern_kernel_call",
     ("kernel", "args", "device")),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.get_c_shim_func_name", ("kernel", "device")),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup_aot",
     ("op_overload", "raw_args", "output_args", "raw_outputs")),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.create_tmp_raii_handle_var_if_needed",
     ("handle", "writer")),
    ("torch._inductor.codegen.cpp_wrapper_cpu_array_ref", "CppWrapperCpuArrayRef", ()),
    # model entry and exit
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.write_header", ()),
    ("torch._inductor.codegen.cpp_wrapper_gpu", "CppWrapperGpu.write_header", ()),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.write_wrapper_decl", ()),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.generate_input_output_runtime_checks", ()),
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.generate_return", ("output_refs",)),
    ("torch.export", "export", ("mod", "args", "kwargs", "dynamic_shapes")),
    ("torch._inductor", "aoti_compile_and_package", ("exported_program", "package_path")),
    # the Python wrapper (torch.compile)
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen._generate_kernel_call_helper",
     ("kernel_name", "call_args", "arg_types")),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen._generate_extern_kernel_out_helper",
     ("kernel", "out", "out_view", "args", "device")),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen._generate_extern_kernel_alloc_helper",
     ("extern_kernel", "args")),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen.write_header", ()),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen.codegen_inputs", ()),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen.generate_return", ("output_refs",)),
    ("torch._inductor.compile_fx", "compile_fx", ("model_", "config_patches")),
    ("torch._inductor.custom_graph_pass", "CustomGraphPass", ()),
    ("torch._inductor.config", "post_grad_custom_post_pass", ()),
    ("torch._inductor.config", "aot_inductor.model_name_for_generated_files", ()),
)


_ABSENT = object()


# what aoti_debug.eager_log takes from Inductor's AOT front end (lowered_graph)
EAGER_HOOK_POINTS = (
    ("torch._inductor.compile_fx", "compile_fx_aot", ("inner_compile", "config_patches")),
    ("torch._inductor.compile_fx", "_aoti_flatten_inputs", ("options",)),
    ("torch._inductor.compile_fx", "_recursive_post_grad_passes", ("is_inference",)),
    ("torch._inductor.compile_fx", "fake_tensor_prop", ()),
    ("torch._inductor.compile_fx", "view_to_reshape", ()),
    ("torch._export.utils", "_compiling_state_context", ()),
)


def missing_hook_points(points=HOOK_POINTS) -> List[str]:
    """The hook points (and parameters) this torch lacks, as 'Class.method(param)'."""
    import importlib
    missing = []
    for module_name, path, params in points:
        try:
            owner = importlib.import_module(module_name)
        except Exception:
            missing.append(f"{module_name}.{path}")
            continue
        target = owner
        for part in path.split("."):
            target = getattr(target, part, _ABSENT)
            if target is _ABSENT:
                break
        if target is _ABSENT:
            missing.append(path)
            continue
        if not params:
            continue
        try:
            have = inspect.signature(target).parameters
        except (TypeError, ValueError):
            missing.append(path)
            continue
        missing += [f"{path}({p})" for p in params if p not in have]
    return missing


def support() -> tuple:
    """(status, text) of this torch: ('tested', ''), ('untested', the note) or
    ('unsupported', the refusal), each text one line."""
    import torch
    version, release = torch.__version__, torch_version()
    newest = _shown(TESTED[1])
    if release < TESTED[0]:
        return ("unsupported", f"aoti-debug: torch {version} is not supported: aoti-debug needs torch "
                               f"{_shown(TESTED[0])} or newer (the newest tested release is torch {newest})")
    missing = missing_hook_points()
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return ("unsupported", f"aoti-debug: torch {version} is not supported: Inductor no longer has "
                               f"{missing[0]}{more}, which aoti-debug hooks into "
                               f"(the newest tested release is torch {newest})")
    if release > TESTED[1]:
        return ("untested", f"aoti-debug: torch {version} is newer than the newest tested release "
                            f"(torch {newest}); instrumenting anyway")
    return ("tested", "")


_noted = False


def check_version() -> None:
    """Raise UnsupportedTorch (one line) when a hook point is missing; say once,
    on stderr, that an untested release is being tried."""
    global _noted
    status, text = support()
    if status == "unsupported":
        _one_line_excepthook()
        raise UnsupportedTorch(text)
    if status == "untested" and not _noted:
        _noted = True
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _one_line_excepthook() -> None:
    """An uncaught UnsupportedTorch, alone or as the cause of another exception
    (torch.compile wraps what its backend raises), ends the program with its one
    line: there is nothing in the traceback for the user to act on."""
    previous = sys.excepthook
    if getattr(previous, "__aoti_debug_one_line__", False):
        return

    def hook(kind, value, tb):
        seen, exc = set(), value
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, UnsupportedTorch):
                sys.stderr.write(f"{exc}\n")
                return
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        previous(kind, value, tb)
    hook.__aoti_debug_one_line__ = True
    sys.excepthook = hook


def _bound(original: Callable, *args, **kwargs) -> dict:
    """The arguments of a call of `original` (self included), by parameter name,
    defaults applied: a wrapper reads what it needs whether the caller passed
    it by position or by keyword, and passes the call on untouched."""
    bound = _signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


@functools.lru_cache(maxsize=None)
def _signature(function: Callable) -> inspect.Signature:
    return inspect.signature(function)


@functools.lru_cache(maxsize=None)
def marker_line_class():
    """A WrapperLine (a plain base class in 2.11-2.15) that writes nothing and
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


def buffer_source(name: str, kernel_nodes=()):
    """The user's line where the values of one output buffer can turn non-finite,
    and its module: a Provenance (source and module '-' when unknown).

    A fused kernel stores a buffer whose own origin may be only its last op
    (the `+ 1` after a sum of a log).  Walking back through the FX nodes fused
    into the same kernel finds the ops feeding it, and plan's rule names one
    line among them (the log's)."""
    from torch._inductor.virtualized import V
    from aoti_debug.plan import Provenance, provenance_of_fx_nodes
    from .ir_plan import _sorted_origins
    try:
        buf = V.graph.get_buffer(name)
    except Exception:
        return Provenance()
    if buf is None:
        return Provenance()
    inside = set(kernel_nodes)
    # the buffer's origins may name the op that made it (a custom op's input copy), not computed here
    seen, todo = {}, [n for n in getattr(buf, "origins", ()) or () if not inside or n.name in inside]
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen[node.name] = node
        todo += [n for n in node.all_input_nodes if n.name in inside]
    return provenance_of_fx_nodes(_sorted_origins(seen.values()))


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


# -- errors for the model's caller --------------------------------------------------

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


# -- the linked core ----------------------------------------------------------------

def linked_core(stats: bool, dumps: bool, memcheck: bool = False):
    """(path, compiler flags) of the core object (config.h: AOTI_DEBUG_LINKED_CORE)
    to link into the AOTI artifact being generated, or None to compile the
    runtime header-only.

    Only for AOTI builds that Inductor links here (not package_cpp_only, not
    cross-compiled) on the tested releases from 2.13 on, whose AotCodeCompiler
    links the wrapper object through codecache.CppBuilder (the hook below);
    elsewhere, an untested release included (a link that left the core out
    would fail), the header-only runtime costs compile time but needs
    nothing at link time."""
    from torch._inductor import config
    from torch._inductor.virtualized import V
    from aoti_debug.native import build as _build
    aot = config.aot_inductor
    if (not _core_linkable or not (2, 13) <= torch_version() <= TESTED[1]
            or not getattr(V.graph, "aot_mode", False)
            or getattr(aot, "package_cpp_only", False)
            or getattr(aot, "cross_target_platform", None) not in (None, "", "linux")):
        return None
    flags = _build.core_flags(stats, dumps, memcheck)
    try:
        return str(_build.core_object(flags)), flags
    except (_build.BuildError, OSError):
        return None


# Whether codecache.CppBuilder is the class _link_core_objects can wrap.
_core_linkable = False


def _link_core_objects(hooks) -> None:
    """A link of an instrumented wrapper gets the core object it names."""
    global _core_linkable
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
    _core_linkable = True

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
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            refs = hook(self, a["output_refs"])
            if refs is None:
                return orig(self, *args, **kwargs)
            a["output_refs"] = refs
            return orig(**a)
        return patched
    return make


def _kernel_call(hook):
    """_generate_kernel_call_helper handed to `hook(self, name, args, arg_types, emit_call)`."""
    def make(orig):
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            hook(self, a["kernel_name"], a["call_args"], a["arg_types"],
                 lambda: orig(self, *args, **kwargs))
        return patched
    return make


def install_patches(hooks) -> None:
    """Wrap the wrapper-codegen methods with the hooks (idempotent)."""
    if _originals:
        return
    check_version()
    from torch._inductor import ir
    from torch._inductor.codegen import cpp, simd, wrapper
    from torch._inductor.codegen import triton as triton_codegen
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu

    # phase 1: provenance and kernel signatures, for either wrapper (each
    # hook returns at once when its wrapper is not the one being generated)
    def comment(orig):
        def codegen_comment(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
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
            a = _bound(orig, self, *args, **kwargs)
            hooks.py_on_define_kernel(self, a["kernel_name"], a["kernel_body"])
            hooks.on_define_kernel(self, a["kernel_name"], a["kernel_body"], a["cpp_definition"])
            return orig(self, *args, **kwargs)
        return patched
    patch(wrapper.PythonWrapperCodegen, "define_kernel", define_kernel)

    # phase 2: which buffers hold values (both wrappers replay the same line classes)
    patch(wrapper.AllocateLine, "codegen", _after(hooks.on_allocate))
    patch(wrapper.ReuseLine, "codegen", _after(hooks.on_reuse))

    # phase 2: launches
    patch(CppWrapperCpu, "_generate_kernel_call_helper", _kernel_call(hooks.around_kernel_call))
    patch(CppWrapperGpu, "_generate_kernel_call_helper", _kernel_call(hooks.around_kernel_call))

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
                a = _bound(orig, self, *args, **kwargs)
                st.extern_out = f"{a['out']}_as_strided" if a["out_view"] else a["out"]
            return orig(self, *args, **kwargs)
        return patched
    patch(CppWrapperCpu, "_generate_extern_kernel_out_helper", extern_out)

    def extern_call(orig):
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            # name the launch as the generated code calls it: aoti_torch_cpu_cumsum
            shown = self.get_c_shim_func_name(a["kernel"], a["device"])
            hooks.around_extern_call(self, shown, list(a["args"]), lambda: orig(self, *args, **kwargs))
        return patched
    patch(CppWrapperCpu, "generate_c_shim_extern_kernel_call", extern_call)

    def proxy_call(orig):
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            hooks.around_proxy_call(self, a["op_overload"], a["raw_args"], a["raw_outputs"],
                                    lambda: orig(self, *args, **kwargs))
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
        def patched(*args, **kwargs):
            ep = orig(*args, **kwargs)
            try:
                a = _bound(orig, *args, **kwargs)
                ep._aoti_debug_dim_names = hooks.guards.dim_names_of(
                    a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
                ep._aoti_debug_declared = hooks.guards.declared_of(
                    a["mod"], a["args"], a["kwargs"], a["dynamic_shapes"])
            except Exception:
                pass
            return ep
        return patched
    patch(torch.export, "export", export)

    def compile_and_package(orig):
        def patched(*args, **kwargs):
            global _package_stem
            a = _bound(orig, *args, **kwargs)
            ctx = hooks.guards.context_from_exported_program(a["exported_program"]) \
                if hooks.active() is not None else None
            hooks.guards.set_context(ctx)
            _package_stem = package_stem(a["package_path"])
            try:
                return orig(*args, **kwargs)
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


def _hash_file(digest, path: str) -> None:
    try:
        with open(path, "rb") as f:
            digest.update(f.read())
    except OSError:
        pass


def settings_pass(settings, user_pass, provenance: str = ""):
    """A post-grad pass that changes nothing and whose uuid() hashes the compile-time
    settings and the graph's provenance, so Inductor's FX graph cache keeps
    instrumented and plain artifacts apart, and never hands back a wrapper
    that names the lines of another copy of the model's source."""
    import hashlib
    import importlib.util
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from aoti_debug._version import __version__

    digest = hashlib.sha256()
    digest.update(repr(("aoti-debug", __version__, settings.level, tuple(settings.kernels),
                        str(settings.nan_check), bool(settings.check_inputs), settings.memcheck,
                        repr(settings.run_defaults), provenance)).encode())
    # what writes the Python wrapper's calls and the Python runtime they reach, found
    # (not imported) wherever the package is installed
    for module in ("python_emit", "hooks", "adapter", "ir_plan"):
        _hash_file(digest, importlib.util.find_spec(f"{__package__}.{module}").origin)
    for module in ("aoti_debug.plan", "aoti_debug.runtime.launches"):
        _hash_file(digest, importlib.util.find_spec(module).origin)

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


def graph_provenance(gm) -> str:
    """A digest of where each node of a graph comes from (its stack trace and
    module path): Inductor's cache key leaves these out, the generated
    wrapper names them."""
    import hashlib
    digest = hashlib.sha256()
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        meta = getattr(node, "meta", {}) or {}
        digest.update(repr((node.name, meta.get("stack_trace"),
                            list((meta.get("nn_module_stack") or {}).values()))).encode())
    return digest.hexdigest()


def install_python_wrapper_patches(hooks) -> None:
    """The torch.compile (PythonWrapperCodegen) patches; called from install_patches."""
    from torch._inductor import compile_fx as compile_fx_mod
    from torch._inductor import config
    from torch._inductor.codegen import wrapper

    py = wrapper.PythonWrapperCodegen

    patch(py, "_generate_kernel_call_helper", _kernel_call(hooks.around_kernel_call))

    def out_line(orig):
        def patched(self, *args, **kwargs):
            hooks.py_on_extern_out_line(self.wrapper, self.node)
            return orig(self, *args, **kwargs)
        return patched
    patch(wrapper.ExternKernelOutLine, "codegen", out_line)

    def extern_out(orig):
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            hooks.py_around_extern_out(self, a["kernel"], a["out"], a["out_view"], list(a["args"]),
                                       a["device"], lambda: orig(self, *args, **kwargs))
        return patched
    patch(py, "_generate_extern_kernel_out_helper", extern_out)

    def extern_alloc(orig):
        def patched(self, *args, **kwargs):
            a = _bound(orig, self, *args, **kwargs)
            hooks.py_around_extern_alloc(self, a["extern_kernel"], list(a["args"]),
                                         lambda: orig(self, *args, **kwargs))
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
            patches = _bound(orig, model_, *args, **kwargs)["config_patches"]
            aoti = config.cpp_wrapper or (isinstance(patches, dict) and patches.get("cpp_wrapper"))
            if settings is None or depth[0] or aoti:   # compile_fx calls itself: act once
                return orig(model_, *args, **kwargs)
            remember_dynamo_labels(model_)
            depth[0] += 1
            try:
                with config.patch(post_grad_custom_post_pass=settings_pass(
                        settings, config.post_grad_custom_post_pass, graph_provenance(model_))):
                    return orig(model_, *args, **kwargs)
            finally:
                depth[0] -= 1
        return patched
    patch(compile_fx_mod, "compile_fx", compile_fx)


# -- the graph Inductor lowers, for the eager reference (aoti_debug/reference.py)

class _Captured(Exception):
    """Carries the graph out of Inductor's front end, before any code is generated."""

    def __init__(self, gm) -> None:
        super().__init__("graph captured")
        self.gm = gm


def lowered_graph(ep, args, kwargs, inductor_configs):
    """(graph module, flat inputs, output spec): the graph AOTI would lower for `ep`, as
    aoti_compile_and_package -> aot_compile -> compile_fx_aot make it (torch/_inductor/
    __init__.py), with the steps of codegen_and_compile that precede GraphLowering."""
    import torch
    missing = missing_hook_points(EAGER_HOOK_POINTS)
    if missing:
        raise RuntimeError(f"aoti_debug.eager_log: torch {torch.__version__} lacks what it takes from "
                           f"Inductor's AOT front end: {', '.join(missing)}")
    from torch._export.utils import _compiling_state_context
    from torch._inductor.compile_fx import (_aoti_flatten_inputs, _recursive_post_grad_passes,
                                            compile_fx_aot, fake_tensor_prop, view_to_reshape)
    from torch._inductor.virtualized import V

    def capture(gm, example_inputs, **kw):
        view_to_reshape(gm)
        with torch.no_grad():
            fake_mode = fake_tensor_prop(gm, example_inputs)
        with V.set_fake_mode(fake_mode):
            _recursive_post_grad_passes(gm, is_inference=kw.get("is_inference", False))
        raise _Captured(gm)

    gm = ep.module(check_guards=False)
    if hasattr(gm, "_guards_fn"):           # as aot_compile: the guards are not compiled
        node = next(iter(gm.graph.find_nodes(op="call_module", target="_guards_fn")))
        gm.graph.erase_node(node)
        delattr(gm, "_guards_fn")
        gm.recompile()
    codegen = gm.graph._codegen
    out_spec = getattr(getattr(codegen, "pytree_info", None), "out_spec", None)
    options = dict(inductor_configs or {}, **{"aot_inductor.package": True})
    flat, options = _aoti_flatten_inputs(gm, args, kwargs, options=options)
    try:
        with _compiling_state_context():
            compile_fx_aot(gm, flat, inner_compile=capture, config_patches=options)
    except _Captured as captured:
        return captured.gm, flat, out_spec
    raise RuntimeError("aoti_debug.eager_log: Inductor's front end finished without lowering a graph")
