"""C++ text for the AOTI wrapper: the inlined runtime and the calls into it.

The generated code uses the API of cpp_runtime/include/aoti_debug/launch.h
(the records) and launch_checks.h (the checks around a launch, in their
order): a launch costs one counter increment and one predictable branch on
the run's level, cached when the run begins, and one branch on whether any
check compiled in is on.
"""

from __future__ import annotations

import dataclasses

import functools
import json
import os
import re
from typing import Iterable, List, Optional, Sequence, Tuple

from aoti_debug.plan import IN, INOUT, OUT, Arg, Site, module_path, where

from . import fx_ops, sizeexpr

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.M)


def c_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.extend("\\%03o" % b for b in ch.encode())
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def runtime_options(settings) -> Tuple[bool, bool, bool]:
    """(statistics, flight recorder, memory check): the costly parts to
    compile, left out unless something can use them (level 5, a NaN check or
    the memory check; level 10 or the black box, which writes dump folders;
    the memory check, which needs c10's headers)."""
    memcheck = settings.memcheck != "off"
    return (settings.level >= 5 or settings.nan_check.enabled or memcheck,
            settings.level >= 10 or settings.blackbox > 0, memcheck)


# The wrapper names the core object it needs and how it is built; the link
# step (adapter.py) reads both, and rebuilds an object that has gone missing.
CORE_MARKER = "// aoti-debug: link with "
CORE_FLAGS_MARKER = "// aoti-debug: core built with "


def runtime_source(settings, core: Optional[Tuple[str, Sequence[str]]] = None) -> str:
    """The runtime, inlined; with `core` (the path of a core object built with
    the same options, and its compiler flags) only the declarations of its
    out-of-line functions are compiled here, and the core is linked in."""
    return _options(settings, core) + _runtime_text()


def caller_error_source(settings, core: Optional[Tuple[str, Sequence[str]]] = None) -> str:
    """The type of the errors aoti-debug raises to the model's caller, inlined
    after the same options as the runtime (hooks.pass_caller_errors puts it
    before torch's AOTI interface; the runtime's own inlining of it is then empty)."""
    return _options(settings, core) + _inliner()("detail", "caller_error.h")


def _options(settings, core) -> str:
    stats, dumps, memcheck = runtime_options(settings)
    options = ("" if stats else "#define AOTI_DEBUG_ENABLE_STATS 0\n") + \
        ("" if dumps else "#define AOTI_DEBUG_ENABLE_DUMPS 0\n") + \
        ("#define AOTI_DEBUG_ENABLE_MEMCHECK 1\n" if memcheck else "")
    if core:
        path, flags = core
        options += (f"#define AOTI_DEBUG_LINKED_CORE 1\n{CORE_MARKER}{path}\n"
                    f"{CORE_FLAGS_MARKER}{json.dumps(list(flags))}\n")
    return options


def core_objects_for(sources: Iterable[str]) -> List[str]:
    """The core objects named by the instrumented wrappers among a build's
    sources (a wrapper's .cpp, or its .o beside the .cpp), rebuilt if missing."""
    found: List[str] = []
    for src in sources:
        src = str(src)
        if not src.endswith((".wrapper.o", ".wrapper.cpp")):
            continue
        cpp = src[:-2] + ".cpp" if src.endswith(".o") else src
        path, flags = None, None
        try:
            with open(cpp, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith(CORE_MARKER):
                        path = line[len(CORE_MARKER):].strip()
                    elif line.startswith(CORE_FLAGS_MARKER):
                        flags = json.loads(line[len(CORE_FLAGS_MARKER):])
                    elif line.startswith("// ---- aoti-debug runtime"):
                        break  # the markers come before the runtime
        except (OSError, ValueError):
            continue
        if path and not os.path.isfile(path) and flags:
            from aoti_debug.native import build as _build
            try:
                path = str(_build.core_object(flags))
            except (_build.BuildError, OSError):
                pass  # the link then fails on the missing object, loudly
        if path:
            found.append(path)
    return found


def _inliner():
    """A function that returns a header with every project include inlined (no
    include path needed).

    Each header keeps an include guard in place of `#pragma once`, and is
    inlined once where it is sure to be compiled: an include that sits inside
    an #if inlines its header again (a later unconditional include must still
    see it), with the headers of its own that it includes unconditionally
    inlined once within it.  The guards are the same for every inliner, so a
    header inlined twice in one file is compiled once."""
    from aoti_debug.native.core import include_dir
    root = include_dir()
    done: set = set()

    def expand(path: str, known: set) -> str:
        """`path` inlined, leaving out the headers in `known` (compiled wherever
        this text is), to which it adds those it includes unconditionally."""
        path = os.path.normpath(path)
        guard = "AOTID_INLINED_" + re.sub(r"\W", "_", os.path.relpath(path, root)).upper()
        with open(path) as f:
            text = _PRAGMA_ONCE.sub("", f.read())
        here, depth, out = os.path.dirname(path), 0, []
        for line in text.splitlines(keepends=True):
            stripped = line.lstrip()
            if stripped.startswith(("#if", "#ifdef", "#ifndef")):
                depth += 1
            elif stripped.startswith("#endif"):
                depth -= 1
            m = _INCLUDE.match(line)
            if m:
                target = os.path.normpath(os.path.join(here, m.group(1)))
                if target in known:
                    continue
                inner = known if depth == 0 else set(known)  # inside an #if: what it adds stays there
                inner.add(target)
                out.append(expand(target, inner))
            else:
                out.append(line)
        return f"#ifndef {guard}\n#define {guard}\n" + "".join(out) + f"\n#endif  // {guard}\n"

    def inline(*parts: str) -> str:
        """aoti_debug/<parts...>, nothing when this inliner has inlined it already."""
        path = os.path.normpath(os.path.join(root, "aoti_debug", *parts))
        if path in done:
            return ""
        done.add(path)
        return expand(path, done)
    return inline


@functools.lru_cache(maxsize=None)
def _inlined() -> Tuple[str, str]:
    """(the runtime, the CUDA device hooks), by one inliner: the hooks, which
    follow the runtime in a wrapper, leave out the headers it inlined."""
    inline = _inliner()
    runtime = ("// ---- aoti-debug runtime (cpp_runtime/include, inlined) ----\n"
               + inline("aoti.h") + inline("checks.h") + inline("detail", "wrapper_args.h")
               + "// ---- end of aoti-debug runtime ----\n")
    return runtime, inline("detail", "cuda_hooks.h")


def _runtime_text() -> str:
    """aoti.h, checks.h and the wrapper's glue (detail/wrapper_args.h) with
    every project include inlined."""
    return _inlined()[0]


def device_glue(device: str) -> str:
    """What a wrapper for `device` adds after the runtime: its device hooks
    (detail/cuda_hooks.h)."""
    return _inlined()[1] if device == "cuda" else ""


def scalar_type(dtype: str) -> int:
    """The c10::ScalarType code of a dtype name (native/core.py's one table), -1 if unknown."""
    from aoti_debug.native.core import DTYPE_CODES
    return DTYPE_CODES.get(dtype, -1)


ROLE = {IN: "aoti_debug::Role::In", OUT: "aoti_debug::Role::Out", INOUT: "aoti_debug::Role::InOut"}


def _value(a: Arg) -> str:
    return f"aoti_debug::tensor(aoti_debug_gen::handle({a.expr}))"


# A launch's arguments are described through one `aoti_debug_gen::Args` per
# launch (detail/wrapper_args.h): each at most once, and only when something that runs
# asks (a record at level 3 and up, a check).  A view argument's expression
# builds a new tensor handle each time it is evaluated.  Inputs are described
# through `aotid_in_N`, defined before the launch; outputs through
# `aotid_out_N`, defined after it (an output handle may not exist before).

def _side(site: Site, which: str) -> str:
    """The list of a launch's arguments with one side described: kIn before
    the launch, kOut or kAll after it."""
    n = site.index
    describer = "in" if which == "kIn" else "out"
    return f"aotid_a_{n}.side(aotid_{describer}_{n}, aotid_site_{n}, aoti_debug_gen::{which})"


def _values(site: Site, out_side: bool) -> List[str]:
    """The launch's arguments, with the side it writes (or reads) described."""
    return [_side(site, "kOut" if out_side else "kIn")] if site.args else []


def _all_values(site: Site) -> str:
    """Every argument, after the launch."""
    return _side(site, "kAll") if site.args else "{}"


def _describer(name: str, site: Site, roles: Tuple[str, ...], otherwise: str = "") -> str:
    cases = "".join(f" case {i}: d.keep({i}, {a.expr}); break;"
                    for i, a in enumerate(site.args) if a.role in roles)
    default = f" default: {otherwise}(d, i);" if otherwise else ""
    return f"auto {name} = [&](aoti_debug_gen::Args& d, int i) {{ switch (i) {{{cases}{default} }} }};"


def args_before(site: Site) -> List[str]:
    """The launch's argument cache and its inputs' describer (nothing without arguments)."""
    if not site.args:
        return []
    n = site.index
    return [f"aoti_debug_gen::Args aotid_a_{n}({len(site.args)});",
            _describer(f"aotid_in_{n}", site, (IN, INOUT))]


def args_after(site: Site) -> List[str]:
    """The outputs' describer, which hands inputs to the inputs' one."""
    if not site.args:
        return []
    n = site.index
    return [_describer(f"aotid_out_{n}", site, (OUT,), f"aotid_in_{n}")]


def args_done(site: Site) -> List[str]:
    """After the launch's last check: the view handles built for it go."""
    return [f"aotid_a_{site.index}.done();"] if site.args else []


def _call(macro: str, *args: str) -> str:
    return f"{macro}({', '.join(args)});"


def _spec_tail(a: Arg) -> str:
    """An ArgSpec's fields after its name and role (launch.h's order), up to the
    last one that is not its default."""
    fields = ["true" if a.constant else "false", c_string(a.scale) if a.scale else "nullptr",
              str(a.writer), c_string(a.writer_words) if a.writer else "nullptr",
              c_string(a.dequant) if a.dequant else "nullptr"]
    defaults = ["false", "nullptr", "0", "nullptr", "nullptr"]
    while fields and fields[-1] == defaults[len(fields) - 1]:
        fields.pop()
    return "".join(", " + f for f in fields)


def site_definition(site: Site) -> List[str]:
    n = site.index
    lines = []
    if site.args:
        specs = ", ".join(f"{{{c_string(a.name)}, {ROLE[a.role]}"
                          f"{_spec_tail(a)}}}" for a in site.args)
        lines.append(f"static const aoti_debug::ArgSpec aotid_args_{n}[] = {{{specs}}};")
    prov = site.provenance
    lines.append(
        f"static aoti_debug::Site aotid_site_{n}{{{c_string(site.kernel)}, "
        f"{c_string(','.join(prov.nodes))}, {c_string('' if prov.source == '-' else prov.source)}, "
        f"{c_string(','.join(prov.modules))}, "
        f"{'aotid_args_%d' % n if site.args else 'nullptr'}, {len(site.args)}, "
        f"{c_string(site.record_lines(output_sources(site)))}"
        f"{', ' + c_string(fx_ops.to_text(site.ops)) if site.ops else ''}}};")
    return lines + args_before(site)


def before_launch(site: Site) -> List[str]:
    return site_definition(site) + [launch_statement(site)]


def launch_statement(site: Site) -> str:
    """The `launch` record's statement, after the site's definition and its inputs' describer."""
    return _call("AOTI_DEBUG_LAUNCH", "aotid_run", f"aotid_site_{site.index}", *_values(site, False))


def after_launch(site: Site, nan_check: bool, memcheck: bool = False, blackbox: bool = False) -> List[str]:
    return (args_after(site)
            + [_call("AOTI_DEBUG_LAUNCH_END", "aotid_run", f"aotid_site_{site.index}", *_values(site, True))]
            + checks_after(site, nan_check, memcheck, blackbox) + args_done(site))


def _launch_args(site: Site, describer: str) -> str:
    """The launch's arguments for aoti_debug::LaunchChecks, through one describer."""
    return f"aotid_a_{site.index}.sides(aotid_{describer}_{site.index})" if site.args else "{}"


def checks_before(site: Site, memcheck: bool, blackbox: bool) -> List[str]:
    """Before a launch, the checks that act there (the memory check, the black
    box), in the order launch_checks.h keeps: one branch when off at run time."""
    if not (memcheck or blackbox):
        return []
    return [f"if (AOTI_DEBUG_UNLIKELY(aotid_checks.on)) aotid_checks.before(aotid_site_{site.index}, "
            f"{_launch_args(site, 'in')});"]


def checks_after(site: Site, nan_check: bool, memcheck: bool, blackbox: bool) -> List[str]:
    """After a launch, the checks (the black box, the plan, memory and NaN
    checks), in the order launch_checks.h keeps: one branch when off at run
    time.  The plan check's layouts are evaluated only when a check is on.
    Each output carries its own source line for the NaN check: a fused kernel
    writes buffers that come from different lines of the model."""
    if not (nan_check or memcheck or blackbox or site.planned):
        return []
    n = site.index
    body = []
    if site.planned:
        body.append("  namespace aotid_sx = aoti_debug::detail::sizeexpr;")
        planned = []
        for j, p in enumerate(site.planned):
            values = [_planned(e) for e in p.sizes + p.strides] or ["aotid_sx::undefined()"]
            body.append(f"  const aotid_sx::Int aotid_pl_{n}_{j}[] = {{{', '.join(values)}}};")
            planned.append(f"{{{p.arg}, {scalar_type(p.dtype)}, {len(p.sizes)}, aotid_pl_{n}_{j}}}")
        body.append(f"  const aoti_debug::PlannedOutput aotid_planned_{n}[] = {{{', '.join(planned)}}};")
    if nan_check:
        sources = ", ".join(c_string(output_where(site, a) if a.role != IN else "") for a in site.args) or "nullptr"
        body.append(f"  static const char* const aotid_sources_{n}[] = {{{sources}}};")
    call = (f"  aotid_checks.after(aotid_site_{n}, {_launch_args(site, 'out')}, "
            f"{f'aotid_sources_{n}' if nan_check else 'nullptr'}, "
            f"{f'aotid_planned_{n}, {len(site.planned)}' if site.planned else 'nullptr, 0'});")
    return ["if (AOTI_DEBUG_UNLIKELY(aotid_checks.on)) {"] + body + [call, "}"]


def _planned(expr) -> str:
    """A planned size or stride as a checked value (sizeexpr.h); undefined when unknown."""
    if expr is not None:
        try:
            return sizeexpr.cpp(expr, str)    # the wrapper's own variables, s0, s1, ...
        except sizeexpr.Unprintable:
            pass
    return "aotid_sx::undefined()"


def output_sources(site: Site) -> dict:
    """Each output's own source line and module (output_source), by the name records show."""
    return {a.name: output_source(site, a) for a in site.outputs()}


def output_source(site: Site, a: Arg):
    """An extern kernel or custom op computes its own op only: its line and
    module (a Provenance).  A fused kernel's output has the line of the op
    feeding it (ir_queries.buffer_source)."""
    from . import ir_queries
    if site.kind in ("extern", "proxy"):
        return site.provenance
    prov = ir_queries.buffer_source(a.name, site.provenance.nodes)
    return dataclasses.replace(prov, module=module_path(prov.module))


def output_where(site: Site, a: Arg) -> str:
    """What the NaN check's note says of an output's origin, `file:line, module a.b.c`
    (both runtimes print it as given: one text, formatted here); for a float8 output, then
    `\n` and the line of its cast into float8, named for saturated values."""
    prov = output_source(site, a)
    text = where(prov.source, prov.module)
    if site.kind in ("extern", "proxy"):
        return text
    # a float8 output saturates at its cast, not at the op a NaN would come from: that
    # line follows on a line of its own, for a finding of saturated values only (names
    # from the model cannot hold a newline: plan.inert)
    from . import ir_queries
    cast = ir_queries.cast_source(a.name, site.provenance.nodes)
    cast_text = where(cast.source, module_path(cast.module)) if cast is not None else text
    return text if cast_text == text else f"{text}\n{cast_text}"


def skipped_launch(site: Site, nan_check: bool, memcheck: bool = False, blackbox: bool = False) -> List[str]:
    """A launch the kernel filter leaves out of the log still takes its number
    (and is still checked and kept in the black box: the filter narrows logging only)."""
    if nan_check or memcheck or blackbox or site.planned:
        return site_definition(site) + ["++aotid_run.launch;"]
    return ["++aotid_run.launch;"]


class Emitter:
    """C++ lines for hooks.launch: a site's description is a static next to its
    call, so nothing goes into the header."""

    @staticmethod
    def launch(site: Site, shown: bool, nan_check: bool, memcheck: bool = False, blackbox: bool = False):
        """(header, before, after) lines around the launch."""
        before = checks_before(site, memcheck, blackbox)
        if shown:
            return [], before_launch(site) + before, after_launch(site, nan_check, memcheck, blackbox)
        checks = checks_after(site, nan_check, memcheck, blackbox)
        return ([], skipped_launch(site, nan_check, memcheck, blackbox) + before,
                args_after(site) + checks + args_done(site) if checks else [])


EMITTER = Emitter()


def _bool(value: bool) -> str:
    return "true" if value else "false"


def model_config(settings, model: str) -> str:
    """What is compiled in, then (AOTI_DEBUG_COMPILE=all) what a run does while
    unset: an aoti_debug::ModelConfig set field by field (Settings.artifact_config)."""
    fields = []
    for name, value in settings.artifact_config(model, _torch_version()).items():
        if name == "defaults":
            fields.append("c.defaults.given = true;")
            fields += [f"c.defaults.{k} = {_cpp_value(v)};" for k, v in value.items()]
        else:
            fields.append(f"c.{name} = {_cpp_value(value)};")
    return f"[] {{ aoti_debug::ModelConfig c{{}}; {' '.join(fields)} return c; }}()"


def _cpp_value(value) -> str:
    if isinstance(value, bool):
        return _bool(value)
    return str(value) if isinstance(value, int) else c_string(value)


def _torch_version() -> str:
    import torch
    return str(torch.__version__)


def _names(var: str, names: Sequence[str]) -> str:
    if not names:
        return f"static const char* const* {var} = nullptr;"
    return f"static const char* const {var}[] = {{{', '.join(c_string(n) for n in names)}}};"


def model_decl(settings, model: str) -> str:
    """The model, at file scope: made when the artifact is loaded, so instance
    numbers (`ranker#2`) follow the order of loading, not of first runs."""
    return f"static aoti_debug::Model aotid_model({model_config(settings, model)});"


def run_begin(settings, inputs: Sequence[str], labels: Sequence[str], device: str = "cpu",
              device_index: Optional[int] = None) -> List[str]:
    values = [_value(Arg(n, n, IN)) for n in inputs]
    # a device run is tied to the stream its launches go to: AOTI's run_impl's
    # `stream`, or (torch.compile's C++ wrapper, `device_index` given) the device's current one
    stream = ("static_cast<void*>(stream)" if device_index is None
              else f"aoti_debug_gen::cuda_current_stream({int(device_index)})")
    begin = (["AOTI_DEBUG_BEGIN_RUN_ON", "aotid_run", "aotid_model", "&aoti_debug_gen::cuda_hooks", stream]
             if device_glue(device) else ["AOTI_DEBUG_BEGIN_RUN", "aotid_run", "aotid_model"])
    lines = [_names("aotid_inputs", labels), _call(*begin, "aotid_inputs", *values)]
    if settings.check_inputs or settings.memcheck != "off":
        lines.append("aoti_debug::PlanChecks aotid_plan(aotid_model, aotid_run);")
    if settings.memcheck != "off":
        lines.append("aoti_debug::MemChecks aotid_mem(aotid_model, aotid_run);")
    if settings.blackbox > 0:
        lines += ["aoti_debug::BlackBox aotid_box(aotid_model, aotid_run);",
                  f"if (AOTI_DEBUG_UNLIKELY(aotid_box.on)) aotid_box.inputs(aotid_inputs, {{{', '.join(values)}}});"]
    if settings.nan_check.enabled:
        lines += ["aoti_debug::NanChecks aotid_nan(aotid_model, aotid_run);",
                  f"if (AOTI_DEBUG_UNLIKELY(aotid_nan.on)) aotid_nan.inputs({{{', '.join(values)}}});"]
    held = [f"&aotid_{name}" if on else "nullptr" for name, on in (
        ("plan", settings.check_inputs or settings.memcheck != "off"), ("mem", settings.memcheck != "off"),
        ("box", settings.blackbox > 0), ("nan", settings.nan_check.enabled))]
    if held != ["nullptr"] * 4:
        lines.append(f"aoti_debug::LaunchChecks aotid_checks({', '.join(held)});")
    return lines


def run_end(settings, outputs: Sequence[Arg]) -> List[str]:
    lines = [_names("aotid_outputs", [a.name for a in outputs]),
             _call("AOTI_DEBUG_END_RUN", "aotid_run", "aotid_outputs", *[_value(a) for a in outputs])]
    if settings.memcheck != "off":
        lines.append("if (AOTI_DEBUG_UNLIKELY(aotid_mem.on)) aotid_mem.finish(aotid_outputs, "
                     f"{{{', '.join(_value(a) for a in outputs)}}});")
    if settings.nan_check.enabled:
        lines.append("if (AOTI_DEBUG_UNLIKELY(aotid_nan.on)) aotid_nan.finish();")
    return lines
