"""torch.compile's Python wrapper (PythonWrapperCodegen): its patches, and the
settings in Inductor's cache key.
"""

from __future__ import annotations

from . import ir_queries
from .adapter import after, around, before_return, bound, patch


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


def install(hooks) -> None:
    """The torch.compile (PythonWrapperCodegen) patches; install.py calls it once,
    after adapter.check_version()."""
    from torch._inductor import compile_fx as compile_fx_mod
    from torch._inductor import config
    from torch._inductor.codegen import wrapper

    py = wrapper.PythonWrapperCodegen

    patch(py, "_generate_kernel_call_helper",
          around(hooks.around_kernel_call, "kernel_name", "call_args", "arg_types"))

    def out_line(orig):
        def patched(self, *args, **kwargs):
            hooks.py_on_extern_out_line(self.wrapper, self.node)
            return orig(self, *args, **kwargs)
        return patched
    patch(wrapper.ExternKernelOutLine, "codegen", out_line)

    patch(py, "_generate_extern_kernel_out_helper",
          around(hooks.py_around_extern_out, "kernel", "out", "out_view", "args", "device"))

    patch(py, "_generate_extern_kernel_alloc_helper",
          around(hooks.py_around_extern_alloc, "extern_kernel", "args"))

    patch(py, "write_header", after(hooks.py_on_header))
    patch(py, "codegen_inputs", after(hooks.py_on_inputs))
    patch(py, "generate_return", before_return(hooks.py_on_return))

    # torch.compile's entry: the user's input names, and the settings in the cache key
    depth = [0]

    def compile_fx(orig):
        def patched(model_, *args, **kwargs):
            settings = hooks.active()
            patches = bound(orig, model_, *args, **kwargs)["config_patches"]
            aoti = config.cpp_wrapper or (isinstance(patches, dict) and patches.get("cpp_wrapper"))
            if settings is None or depth[0] or aoti:   # compile_fx calls itself: act once
                return orig(model_, *args, **kwargs)
            ir_queries.remember_dynamo_labels(model_)
            depth[0] += 1
            try:
                with config.patch(post_grad_custom_post_pass=settings_pass(
                        settings, config.post_grad_custom_post_pass, graph_provenance(model_))):
                    return orig(model_, *args, **kwargs)
            finally:
                depth[0] -= 1
        return patched
    patch(compile_fx_mod, "compile_fx", compile_fx)
