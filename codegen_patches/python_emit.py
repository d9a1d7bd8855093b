"""Python text for torch.compile's wrapper (PythonWrapperCodegen): the calls
into aoti_debug/runtime/launches.py, the Python twin of cpp_emit.py.

Site descriptions and the model object live at module level (written into
the wrapper's header); the calls go into `call(args)`.  At level 0 a launch
costs one branch per side and one increment.
"""

from __future__ import annotations

from typing import List, Sequence

from aoti_debug.plan import IN, INOUT, OUT, Arg, Site

RUN = "_aotid_run"
MODEL = "_aotid_model"
# launches.launch / launch_end or their compiled twins (Model.calls), bound once a call
LAUNCH, LAUNCH_END = "_aotid_launch", "_aotid_launch_end"


def header(settings, model: str) -> List[str]:
    import torch
    config = settings.artifact_config(model, str(torch.__version__))
    return ["from aoti_debug.runtime.launches import Model as _aotid_Model, Site as _aotid_Site",
            f"{MODEL} = _aotid_Model({', '.join(f'{k}={v!r}' for k, v in config.items())})"]


def _tuple(items: Sequence[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


def site_name(site: Site) -> str:
    return f"_aotid_site_{site.index}"


def site_definition(site: Site) -> str:
    from . import fx_ops
    from .cpp_emit import output_sources
    prov = site.provenance
    args = _tuple([f"({a.name!r}, {a.role!r})" for a in site.args])
    constants = [k for k, a in enumerate(site.args) if a.constant]
    scales = any(a.scale for a in site.args)
    # the scales an earlier launch of the call wrote: {arg index: (its launch, its kernel and origin)}
    writers = {k: (a.writer, a.writer_words) for k, a in enumerate(site.args) if a.writer}
    dequants = {k: a.dequant for k, a in enumerate(site.args) if a.dequant}
    return (f"{site_name(site)} = _aotid_Site({site.kernel!r}, {','.join(prov.nodes)!r}, "
            f"{'' if prov.source == '-' else prov.source!r}, {','.join(prov.modules)!r}, {args}, "
            f"{site.record_lines(output_sources(site))!r}"
            f"{', ops=' + repr(fx_ops.to_text(site.ops)) if site.ops else ''}"
            f"{', constants=' + _tuple([str(k) for k in constants]) if constants else ''}"
            f"{', scales=' + repr({k: a.scale for k, a in enumerate(site.args) if a.scale}) if scales else ''}"
            f"{', writers=' + repr(writers) if writers else ''}"
            f"{', dequants=' + repr(dequants) if dequants else ''})")


def _values(site: Site, out_side: bool) -> str:
    wanted = (OUT, INOUT) if out_side else (IN, INOUT)
    return _tuple([a.expr if a.role in wanted else "None" for a in site.args])


def _arguments(site: Site, out_side: bool) -> str:
    """The call's arguments: the run, the site, then its values (_values), one argument each."""
    wanted = (OUT, INOUT) if out_side else (IN, INOUT)
    return ", ".join([RUN, site_name(site)] + [a.expr if a.role in wanted else "None" for a in site.args])


def before_launch(site: Site) -> List[str]:
    """launch() counts the launch and writes its record (at level >= 1); at
    level 0 the count alone, without a call."""
    return [f"if {RUN}.level: {LAUNCH}({_arguments(site, False)})",
            f"else: {RUN}.launch += 1"]


def after_launch(site: Site) -> List[str]:
    return [f"if {RUN}.level: {LAUNCH_END}({_arguments(site, True)})"]


def skipped_launch(site: Site) -> List[str]:
    """A launch the compile-time filter leaves out still takes its number."""
    return [f"{RUN}.launch += 1"]


def checks_before(site: Site) -> List[str]:
    """The checks before a launch (the memory check, the black box), in the
    order Run.checks_before keeps: one branch when off at run time."""
    return [f"if {RUN}.checks: {RUN}.checks_before({site_name(site)}, {_values(site, False)})"]


def checks_after(site: Site, nan: bool) -> List[str]:
    """The checks after a launch (the black box, the plan, memory and NaN
    checks), in the order Run.checks_after keeps: one branch when off at run
    time.  Each output carries its own source line for the NaN check: a fused
    kernel writes buffers that come from different lines of the model."""
    from .cpp_emit import output_where
    args = [_tuple([a.expr for a in site.args])]
    if nan:
        args.append(_tuple([repr(output_where(site, a) if a.role != IN else "") for a in site.args]))
    if site.planned:
        args.append(f"planned={_planned(site)}")
    return [f"if {RUN}.checks: {RUN}.checks_after({site_name(site)}, {', '.join(args)})"]


def _planned(site: Site) -> str:
    """Each output of an extern kernel or custom op against the layout the graph
    planned from the op's fake (plan.Planned), as cpp_emit's plan check: a
    function, so the sizes are evaluated by the check, which survives a
    division by zero."""
    from .ir_queries import python_size

    def size(e) -> str:
        return "None" if e is None else f"({python_size(e)})"
    plans = _tuple([f"({p.arg}, {p.dtype!r}, {_tuple([size(e) for e in p.sizes])}, "
                    f"{_tuple([size(e) for e in p.strides])})" for p in site.planned])
    return f"lambda: {plans}"


class Emitter:
    """Python lines for hooks.launch: a site's description is a module-level
    object in the wrapper's header, written only when the launch is logged or
    checked."""

    @staticmethod
    def launch(site: Site, shown: bool, nan_check: bool, memcheck: bool = False, blackbox: bool = False):
        """(header, before, after) lines around the launch."""
        nan = nan_check and bool(site.args)
        checked = blackbox or memcheck or nan or bool(site.planned)
        header = [site_definition(site)] if shown or checked else []
        before = ((before_launch(site) if shown else skipped_launch(site))
                  + (checks_before(site) if memcheck or blackbox else []))
        after = (after_launch(site) if shown else []) + (checks_after(site, nan) if checked else [])
        return header, before, after


EMITTER = Emitter()


def run_begin(inputs: Sequence[str], labels: Sequence[str]) -> List[str]:
    return [f"{RUN} = {MODEL}.begin_run({_tuple([repr(l) for l in labels])}, {_tuple(list(inputs))})",
            f"{LAUNCH}, {LAUNCH_END} = {MODEL}.calls"]


def run_end(outputs: Sequence[Arg], memcheck: bool = False) -> List[str]:
    names, values = _tuple([repr(a.name) for a in outputs]), _tuple([a.expr for a in outputs])
    return ([f"if {RUN}.level >= 3: {RUN}.end({names}, {values})"]
            + ([f"if {RUN}.mem: {RUN}.mem_finish({names}, {values})"] if memcheck else [])
            + [f"if {RUN}.nan: {RUN}.nan_finish()"])
