"""The graph Inductor lowers, for the eager reference (aoti_debug/reference.py):
the steps of Inductor's AOT front end that precede code generation.
"""

from __future__ import annotations

from .adapter import EAGER_HOOK_POINTS, missing_hook_points


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
