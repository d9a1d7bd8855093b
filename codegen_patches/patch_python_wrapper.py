"""torch.compile's Python wrapper (PythonWrapperCodegen): its patches, and the
settings in Inductor's cache key.
"""

from __future__ import annotations

from . import hooks, ir_queries
from .adapter import after, around, before, before_return, patch, through


def _hash_file(digest, path: str) -> None:
    try:
        with open(path, "rb") as f:
            digest.update(path.rsplit("/", 1)[-1].encode() + b"\0" + f.read())
    except OSError:
        pass


# The packages whose code the generated wrapper is written by or calls into.  A
# cached wrapper is only as good as the code that wrote it and the runtime API it
# calls: any of their files changing (an upgrade of aoti-debug) must miss the cache.
_WRAPPER_PACKAGES = (__package__, "aoti_debug.runtime", "aoti_debug.native")
_WRAPPER_MODULES = ("aoti_debug.plan", "aoti_debug.settings", "aoti_debug._version")


def wrapper_sources() -> list:
    """Every source file of the packages and modules above, found (not imported)
    wherever aoti-debug is installed, in a fixed order."""
    import importlib.util
    import os
    paths = []
    for package in _WRAPPER_PACKAGES:
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or ()) if spec else ():
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            paths += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    for module in _WRAPPER_MODULES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            paths.append(spec.origin)
    return paths


def settings_pass(settings, user_pass, provenance: str = ""):
    """A post-grad pass that changes nothing and whose uuid() hashes the compile-time
    settings and the graph's provenance, so Inductor's FX graph cache keeps
    instrumented and plain artifacts apart, and never hands back a wrapper
    that names the lines of another copy of the model's source."""
    import hashlib
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from aoti_debug._version import __version__

    digest = hashlib.sha256()
    # everything the wrapper is compiled with, by name (the emitters write the same)
    config = sorted(settings.artifact_config("", "").items())
    digest.update(repr(("aoti-debug", __version__, config, provenance)).encode())
    for path in wrapper_sources():
        _hash_file(digest, path)

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


# compile_fx calls itself: the outermost call acts, once
_compiling = 0


def _compile_fx_keyed_by_settings(compile_fx, model_, *args, **kwargs):
    """torch.compile's compile_fx: Dynamo's input names kept, the settings in the cache key."""
    global _compiling
    from torch._inductor import config
    from torch._inductor.virtualized import V
    settings = hooks.active()
    # AOTI's compiles are keyed and labelled apart (its export context); torch.compile's,
    # with either wrapper, here
    if settings is None or _compiling or V.aot_compilation:
        return compile_fx(model_, *args, **kwargs)
    ir_queries.remember_dynamo_labels(model_)
    _compiling += 1
    try:
        with config.patch(post_grad_custom_post_pass=settings_pass(
                settings, config.post_grad_custom_post_pass, graph_provenance(model_))):
            return compile_fx(model_, *args, **kwargs)
    finally:
        _compiling -= 1


def install() -> None:
    """The torch.compile (PythonWrapperCodegen) patches; install.py calls it once,
    after adapter.check_version()."""
    from torch._inductor import compile_fx as compile_fx_mod
    from torch._inductor.codegen import wrapper

    py = wrapper.PythonWrapperCodegen
    for owner, name, make in (
        # launches: generated kernels, and extern kernels (named by the line replayed before them)
        (py, "_generate_kernel_call_helper",
         around(hooks.around_kernel_call, "kernel_name", "call_args", "arg_types")),
        (wrapper.ExternKernelOutLine, "codegen", before(hooks.py_on_extern_out_line)),
        (py, "_generate_extern_kernel_out_helper",
         around(hooks.py_around_extern_out, "kernel", "out", "out_view", "args", "device")),
        (py, "_generate_extern_kernel_alloc_helper",
         around(hooks.py_around_extern_alloc, "extern_kernel", "args")),
        # the runtime's import, the run's entry with the inputs, its exit with the outputs
        (py, "write_header", after(hooks.py_on_header)),
        (py, "codegen_inputs", after(hooks.py_on_inputs)),
        (py, "generate_return", before_return(hooks.py_on_return)),
        (compile_fx_mod, "compile_fx", through(_compile_fx_keyed_by_settings)),
    ):
        patch(owner, name, make)
