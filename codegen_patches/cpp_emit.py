"""C++ text for the AOTI wrapper: the inlined runtime and the calls into it.

The generated code talks to cpp_runtime/include/aoti_debug/generated.h only.
Every per-launch statement sits behind `aotid_run.on()`, one predictable
branch on a value cached at the start of the run.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Iterable, List, Sequence

from .plan import IN, INOUT, OUT, Arg, Site

ROLE_CODE = {IN: 0, OUT: 1, INOUT: 2}
_INCLUDE = re.compile(r'^\s*#\s*include\s+"(aoti_debug/[^"]+)"\s*$', re.M)


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


@functools.lru_cache(maxsize=None)
def runtime_source() -> str:
    """generated.h with every project include inlined once (no include path needed)."""
    from aoti_debug._native import include_dir
    root = include_dir()
    seen: set = set()

    def expand(rel: str) -> str:
        if rel in seen:
            return ""
        seen.add(rel)
        with open(os.path.join(root, rel)) as f:
            text = f.read()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    body = expand("aoti_debug/generated.h")
    return ("// ---- aoti-debug runtime (cpp_runtime/include, inlined) ----\n"
            + body + "\n// ---- end of aoti-debug runtime ----\n")


def _handles(args: Sequence[Arg]) -> str:
    """Temporaries for view expressions (kept alive for the call), then the handle array."""
    temps, handles = [], []
    for i, a in enumerate(args):
        if a.expr.isidentifier():
            handles.append(f"aoti_debug::gen::handle({a.expr})")
        else:
            temps.append(f"auto aotid_v{i} = {a.expr}; ")
            handles.append(f"aoti_debug::gen::handle(aotid_v{i})")
    return "".join(temps) + f"AtenTensorHandle aotid_h[] = {{{', '.join(handles)}}};"


def _site_definition(site: Site) -> List[str]:
    n = site.index
    lines = []
    names = site.provenance.filter_names()
    if site.args:
        infos = ", ".join(f"{{{c_string(a.name)}, {ROLE_CODE[a.role]}}}" for a in site.args)
        lines.append(f"static const aoti_debug::gen::ArgInfo aotid_args_{n}[] = {{{infos}}};")
    lines.append(
        f"static const aoti_debug::gen::Site aotid_site_{n} = {{{n}, {c_string(site.kernel)}, "
        f"{c_string(','.join(site.provenance.nodes))}, {c_string(site.provenance.source)}, "
        f"{c_string(chr(10).join(names))}, "
        f"{'aotid_args_%d' % n if site.args else 'nullptr'}, {len(site.args)}}};")
    return lines


def before_launch(site: Site) -> List[str]:
    inputs = site.inputs()
    lines = _site_definition(site)
    if inputs:
        lines.append(f"if (aotid_run.on()) {{ {_handles(inputs)} "
                     f"aotid_run.before(aotid_site_{site.index}, aotid_h); }}")
    else:
        lines.append(f"if (aotid_run.on()) {{ aotid_run.before(aotid_site_{site.index}, nullptr); }}")
    return lines


def after_launch(site: Site) -> List[str]:
    outputs = site.outputs()
    if outputs:
        return [f"if (aotid_run.on()) {{ {_handles(outputs)} "
                f"aotid_run.after(aotid_site_{site.index}, aotid_h); }}"]
    return [f"if (aotid_run.on()) {{ aotid_run.after(aotid_site_{site.index}, nullptr); }}"]


def compiled_options(settings) -> str:
    """The compile-time settings as a C++ aggregate (generated.h's Compiled)."""
    return (f"{{{settings.level}, {c_string(','.join(settings.kernels))}, "
            f"{c_string(str(settings.nan_check))}, {1 if settings.check_inputs else 0}, "
            f"{c_string(_torch_version())}}}")


def _torch_version() -> str:
    import torch
    return str(torch.__version__)


def run_begin(settings, model: str, inputs: Sequence[str]) -> List[str]:
    lines = [f"static aoti_debug::gen::Model aotid_model({c_string(model)}, "
             f"aoti_debug::gen::Compiled{compiled_options(settings)});",
             "aoti_debug::gen::Run aotid_run(aotid_model);"]
    args = [Arg(n, n, IN) for n in inputs]
    if args:
        infos = ", ".join(f"{{{c_string(a.name)}, 0}}" for a in args)
        lines.append(f"static const aoti_debug::gen::ArgInfo aotid_inputs[] = {{{infos}}};")
        lines.append(f"if (aotid_run.on()) {{ {_handles(args)} "
                     f"aotid_run.begin(aotid_inputs, aotid_h, {len(args)}); }}")
    else:
        lines.append("if (aotid_run.on()) { aotid_run.begin(nullptr, nullptr, 0); }")
    return lines


def run_end(outputs: Sequence[str]) -> List[str]:
    if not outputs:
        return ["if (aotid_run.on()) { aotid_run.end(nullptr, nullptr, 0); }"]
    infos = ", ".join(f"{{{c_string(name)}, 1}}" for name in outputs)
    handles = _handles([Arg(name, name, OUT) for name in outputs])
    return [f"static const aoti_debug::gen::ArgInfo aotid_outputs[] = {{{infos}}};",
            f"if (aotid_run.on()) {{ {handles} "
            f"aotid_run.end(aotid_outputs, aotid_h, {len(outputs)}); }}"]
