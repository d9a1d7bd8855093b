"""The Inductor boundary's gate: which torch releases work, the hook points the
patches wrap, and the patching itself (each wrapper's patches are installed by
patch_cpp_wrapper.py and patch_python_wrapper.py; the questions they ask of
Inductor's IR are ir_queries.py; Inductor's AOT front end for the eager
reference is lowered_graph.py).

Inductor builds a wrapper in two phases: scheduling queues WrapperLine
objects (kernel definitions, calls, allocations); replay turns them into
code.  The patches wrap methods of both phases.

Which torch releases work is decided by the hook points themselves, not by
version numbers: every method the patches wrap, with the parameters they
read, is listed in HOOK_POINTS and checked before anything is patched.  A
release newer than the newest tested one is tried (one line says it is
untested); a release that lacks a hook point is refused with one line naming
what is missing, before anything is compiled.

Differences between the tested releases (2.11 to 2.15), absorbed by the patches:
- 2.15 adds parameters to _generate_extern_kernel_out_helper (profiling_args)
  and generate_c_shim_extern_kernel_call (profiling_args, output_handle):
  the wrappers pass every argument on untouched and read theirs by name
  (bound), so added parameters, and keyword/positional spelling, do not matter.
- 2.13 links AOTI's wrapper object through codecache.CppBuilder, which
  patch_cpp_wrapper.py's link step and ir_queries.linked_core() rely on; before
  2.13 the runtime is compiled header-only.
- 2.13 keeps the message of an error the model raised for its caller
  (AOTInductorGetLastError); before, the caller reads only "run_func_(...)
  API call failed", so hooks.pass_caller_errors lets aoti-debug's own through.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Callable, List

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
    ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup",
     ("op_overload", "raw_args", "outputs")),
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


def bound(original: Callable, *args, **kwargs) -> dict:
    """The arguments of a call of `original` (self included), by parameter name,
    defaults applied: a wrapper reads what it needs whether the caller passed
    it by position or by keyword, and passes the call on untouched."""
    bound = _signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


@functools.lru_cache(maxsize=None)
def _signature(function: Callable) -> inspect.Signature:
    return inspect.signature(function)


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


def installed() -> bool:
    """Whether the patches are in (installing them twice is a no-op)."""
    return bool(_originals)


def unpatch_all() -> None:
    while _originals:
        owner, name, original, inherited = _originals.pop()
        if inherited:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def before(hook, *params):
    """A method that calls `hook(self, <its arguments named params>)`, then the
    original, untouched."""
    def make(orig):
        def patched(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs) if params else {}
            hook(self, *(a[p] for p in params))
            return orig(self, *args, **kwargs)
        return patched
    return make


def after(hook):
    """A method that calls `hook(self)` once the original has written its part."""
    def make(orig):
        def patched(self, *args, **kwargs):
            result = orig(self, *args, **kwargs)
            hook(self)
            return result
        return patched
    return make


def before_return(hook):
    """generate_return(output_refs), with `hook(self, output_refs)` before it;
    the hook may hand back the references the original is to use."""
    def make(orig):
        def patched(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs)
            refs = hook(self, a["output_refs"])
            if refs is None:
                return orig(self, *args, **kwargs)
            a["output_refs"] = refs
            return orig(**a)
        return patched
    return make


def around(hook, *params):
    """A method whose call is handed to `hook(self, <its arguments named params>,
    emit)`; `emit()` makes the original call, untouched, where the hook wants it."""
    def make(orig):
        def patched(self, *args, **kwargs):
            a = bound(orig, self, *args, **kwargs)
            hook(self, *(a[p] for p in params), lambda: orig(self, *args, **kwargs))
        return patched
    return make


def through(hook):
    """A function (a method: self first) whose calls go through `hook(original,
    *args, **kwargs)`, which makes the original call itself and returns what the
    caller gets."""
    def make(orig):
        def patched(*args, **kwargs):
            return hook(orig, *args, **kwargs)
        return patched
    return make
