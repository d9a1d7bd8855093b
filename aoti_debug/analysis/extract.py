"""`aoti-debug extract LAUNCH`: one dumped launch as a folder to attach to a bug report.

The folder holds `repro.py` (plain torch, no aoti-debug), the launch's recorded
inputs and outputs (`inputs.pt`, `recorded.pt`: dicts of tensors that
`torch.load(weights_only=True)` reads), and, given the package, the compiled
kernel's source (`kernel.cpp`).  `repro.py` re-runs the launch's FX ops in eager,
through torch.compile and through AOTI, and says whether each matches the recording.

The dump is untrusted: the script is generated from validated names only (FX node
names and operator names are identifiers, every other value is written with repr),
and only registered `torch.ops` operators are written into it.
"""

from __future__ import annotations

import os
import re
import zipfile
from typing import Any, Dict, List, Optional

from . import ops as opsmod
from .check import dumped, held_outputs, known_sizes, origin_of, run_symbols, tensors, term_scale
from .untrusted import InputError, create, printable, writable_targets

FORMATS = ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format")


class NotExtractable(Exception):
    """The launch cannot be written as torch code: the message says why."""


def find(root: str, ident: str):
    """(folder, before line, after line, the folder's run line and launches) of launch `ident`
    under `root`: `M:R.K` as the log and nan-origin name it (M the model instance), or `R.K` as
    a run folder's manifest writes it.  Each folder's manifest is read once."""
    from .replay import folders, nested
    m = re.fullmatch(r"(?:([^:]+):)?(\d+\.\d+)", ident)
    if m is None:
        raise InputError(f"launch {printable(ident)!r}: expected a launch id M:R.K or R.K as the log, "
                         "nan-origin and the manifest write it (e.g. ranker:1.4 or 1.4)")
    model, number = m.groups()

    found = []
    for folder in folders(root):
        run, entries = dumped(folder)
        if model is None or (run or {}).get("model") == model:
            found += [(folder, before, after, (run, entries)) for before, after, _ in entries
                      if before["id"] == number]
    if not found:
        deeper = nested(root)
        raise InputError(f"{root}: no dumped launch {printable(ident)}"
                         + (f" (not searched: the dump directories in it, {', '.join(deeper)}; give one of "
                            "them)" if deeper else ""))
    if len(found) > 1:
        raise InputError(f"{root}: launch {printable(ident)} is in {len(found)} run folders "
                         f"({', '.join(os.path.basename(f) for f, _, _, _ in found)}); give one of them"
                         + ("" if model else ", or name the model instance (M:R.K)"))
    return found[0]


def _expr(v: Any, symbols: Dict[str, int], inputs: Dict[str, Any], used: List[str]) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_expr(x, symbols, inputs, used) for x in v) + "]"
    if not isinstance(v, dict):
        return repr(v)
    if "node" in v:
        return f"v_{v['node']}"
    if "input" in v:
        name = v["input"]
        if name not in inputs:
            raise NotExtractable(f"input {printable(name)} was not dumped")
        if v.get("view") and v.get("shape") is not None and \
                [opsmod.evaluate(s, symbols) for s in v["shape"]] != list(inputs[name].shape):
            raise NotExtractable(f"input {printable(name)} is a view the ops cannot place")
        if name not in used:
            used.append(name)
        return f"inputs[{name!r}]"
    if "sym" in v:
        return str(opsmod.evaluate(v["sym"], symbols))
    if "float" in v:
        if v["float"] not in ("inf", "-inf", "nan"):
            raise NotExtractable(f"float {printable(str(v['float']))} is not one the codegen writes")
        return f"float({v['float']!r})"
    if "dtype" in v:
        if v["dtype"] not in opsmod._DTYPES:
            raise NotExtractable(f"dtype {printable(str(v['dtype']))} is not known")
        return f"torch.{v['dtype']}"
    if "device" in v:
        return "torch.device('cpu')"
    if "layout" in v:
        if v["layout"] != "strided":
            raise NotExtractable(f"layout {printable(str(v['layout']))} is not re-run")
        return "torch.strided"
    if "memory_format" in v:
        if v["memory_format"] not in FORMATS:
            raise NotExtractable(f"memory format {printable(str(v['memory_format']))} is not known")
        return f"torch.{v['memory_format']}"
    if "missing" in v:
        raise NotExtractable(f"{printable(v['missing'])} is {printable(str(v.get('why', 'not recorded')))}")
    raise NotExtractable(f"an argument of type {printable(str(v.get('unsupported')))} is not recorded")


def body(program: opsmod.Program, wanted: Dict[str, str], inputs: Dict[str, Any],
         symbols: Dict[str, int]) -> tuple:
    """(code lines of `launch(inputs)`, input names it reads, custom op namespaces)."""
    needed = {op.node for node in set(wanted.values()) for op in opsmod.dependencies(program, node)}
    lines: List[str] = []
    used: List[str] = []
    namespaces: List[str] = []
    for op in program.ops:
        if op.node not in needed:
            continue
        where = f"  # {op.line!r}" if op.line else ""
        if opsmod.handed_view(op, inputs, symbols) is not None:
            if op.same_as not in used:
                used.append(op.same_as)
            lines.append(f"v_{op.node} = inputs[{op.same_as!r}]  # the view the launch was handed")
            continue
        try:
            opsmod.operator(op.op, op.args, op.kwargs)  # a registered operator, named by identifiers only
        except opsmod.NotCheckable as exc:
            raise NotExtractable(str(exc)) from None
        args = [_expr(a, symbols, inputs, used) for a in op.args]
        args += [f"{k}={_expr(v, symbols, inputs, used)}" for k, v in op.kwargs.items()]
        if op.op == "getitem":
            lines.append(f"v_{op.node} = {args[0]}[{args[1]}]{where}")
            continue
        if not opsmod.is_upstream(op.op) and op.op.split(".")[0] not in namespaces:
            namespaces.append(op.op.split(".")[0])
        lines.append(f"v_{op.node} = torch.ops.{op.op}({', '.join(args)}){where}")
    lines.append("return {" + ", ".join(f"{name!r}: v_{node}" for name, node in wanted.items()) + "}")
    return lines, used, namespaces


def kernel_source(package: str, kernel: str) -> Optional[str]:
    """The definition of `kernel` in the package's generated C++ (None when absent)."""
    try:
        with zipfile.ZipFile(package) as z:
            names = [n for n in z.namelist() if n.endswith(".cpp")]
            texts = [z.read(n).decode("utf-8", "replace") for n in names]
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"--package {package}: cannot be read as a .pt2 package ({exc})") from None
    for text in texts:
        # the definition: the parameter list closed and a body opened (a declaration ends with ;)
        for m in re.finditer(rf'(?m)^(?:extern "C")?[\w:<>* ]*\b{re.escape(kernel)}\s*\(([^()]*)\)\s*\{{', text):
            depth = 0
            for i in range(m.end() - 1, len(text)):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    return text[m.start():i + 1] + "\n"
    return None


def extract(root: str, ident: str, out_dir: str, package: Optional[str] = None) -> List[str]:
    """Write the folder; the paths written."""
    import torch
    folder, before, after, (run, entries) = find(root, ident)
    where = f"{os.path.join(folder, 'manifest.jsonl')} (launch {ident})"
    if "ops" not in before:
        raise NotExtractable("no ops recorded: compile the artifact at level 10 (AOTI_DEBUG_LOGLEVEL=10)")
    program = opsmod.decode(before["ops"], where)
    if program.error or not program.own():
        raise NotExtractable(program.error or "Inductor names no op for this launch")
    inputs = {k: v for k, v in tensors(folder, before["files"], ("in", "inout")).items() if v is not None}
    held = held_outputs(origin_of(before), program)
    if after is None:
        # the launch never returned (a crash, a kill, a black box's last launch): run it, compare nothing
        recorded = {}
        wanted = {name: node for name, node in held.items() if node in program.by_node and name not in inputs}
    elif after["status"] != "ok":
        raise NotExtractable("its outputs were not all dumped (a file could not be written, or a black box "
                             "kept its inputs only)")
    else:
        recorded = {k: v for k, v in tensors(folder, after["files"], ("out", "inout")).items() if v is not None}
        wanted = {name: held[name] for name in recorded if held.get(name) in program.by_node}
    if not wanted:
        raise NotExtractable("the records do not say which op's value any output holds")
    # a size the launch's own tensors do not give ((s0//4) alone) from the run's recorded inputs, as check
    known = known_sizes(program, wanted, recorded)
    symbols = {**run_symbols(folder, run, entries), **opsmod.bind(program, inputs, known)}
    try:
        lines, used, namespaces = body(program, wanted, inputs, symbols)
    except opsmod.NotCheckable as exc:
        raise NotExtractable(str(exc)) from None
    source = kernel_source(package, before["kernel"]) if package else None
    names = ["inputs.pt", "recorded.pt"] + ["kernel.cpp"] * (source is not None) + ["repro.py"]
    writable_targets(os.path.join(out_dir, name) for name in names)     # all, before any is written
    os.makedirs(out_dir, exist_ok=True)
    written = []

    def save(name, value):
        # never through a link or into a FIFO already in the folder (untrusted.create)
        path = os.path.join(out_dir, name)
        with create(path) as f:
            if isinstance(value, str):
                f.write(value.encode("utf-8", "backslashreplace"))
            else:
                torch.save(value, f)
        written.append(path)

    save("inputs.pt", {name: inputs[name] for name in used})
    save("recorded.pt", {name: recorded[name] for name in wanted if name in recorded})
    if source is not None:
        save("kernel.cpp", source)
    save("repro.py", _script(before, folder, lines, used, wanted, program, namespaces,
                             "kernel.cpp" if source is not None else None,
                             _term_scales(program, {k: v for k, v in wanted.items() if k in recorded},
                                          inputs, known, symbols)))
    return written


def _term_scales(program, wanted: Dict[str, str], inputs, known, symbols) -> Dict[str, float]:
    """Recorded output -> the scale of the terms its reduction summed (check.term_scale), from
    the launch's ops in float64 as check runs them: the script judges it at that scale too.
    Only a launch of torch's own ops is re-run here (a custom op runs in the script only)."""
    if not wanted or not all(opsmod.is_upstream(op.op) for op in program.ops):
        return {}
    try:
        wide = opsmod.Runner(program, inputs, wide=True, known=known, run_symbols=symbols)
    except Exception:
        return {}
    scales = {}
    for name, node in wanted.items():
        try:
            scale = term_scale(program, node, inputs, wide)
        except Exception:      # what cannot be re-run is judged at the output's own scale
            scale = 0.0
        if scale:
            scales[name] = float(f"{scale:.6g}")
    return scales


def _script(before, folder, lines, used, wanted, program, namespaces, kernel_file, scales) -> str:
    ops_text = ", ".join(f"{op.short} ({op.line})" if op.line else op.short for op in program.own())
    header = [f"Launch {before['id']} {before['kernel']}, recorded in {os.path.abspath(folder)}.",
              f"Its ops: {ops_text}.",
              f"The compiled kernel's source: {kernel_file}." if kernel_file else
              "The compiled kernel's source is not here (extract with --package PACKAGE.pt2 to add it).",
              ]
    if namespaces:
        header.append(f"Load the library that registers {', '.join(ns + '::' for ns in namespaces)} "
                      "ops first (e.g. with `python -c 'import mylib' ...` or by adding the import below).")
    doc = "\n".join(printable(h) for h in header).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    code = _TEMPLATE.replace("@DOC@", doc)
    code = code.replace("@INPUTS@", repr(used)).replace("@OUTPUTS@", repr(wanted)).replace("@SCALES@", repr(scales))
    return code.replace("@BODY@", "\n".join("    " + line for line in lines))


_TEMPLATE = '''#!/usr/bin/env python3
"""@DOC@

Re-runs the launch's ops on its recorded inputs (inputs.pt) in eager, through
torch.compile and through AOTI, and compares each with its recorded outputs
(recorded.pt).  Needs torch only.

    python repro.py [--skip-compile] [--skip-aoti]

Exit status: 0 every way that ran matches the recording, 1 one does not.
"""

import argparse
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = @INPUTS@    # the recorded inputs launch() reads
OUTPUTS = @OUTPUTS@    # recorded output -> the FX node whose value it holds
# recorded output -> the largest term its reduction summed: it is judged at that scale
# at least (a mean of centred values is near zero, its rounding is the terms')
SCALES = @SCALES@
RTOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def launch(inputs):
@BODY@


class Launch(torch.nn.Module):
    def forward(self, *args):
        out = launch(dict(zip(INPUTS, args)))
        return tuple(out[name] for name in OUTPUTS)


def compare(got, want, floor=0.0):
    """(matches, what was seen) of one output against its recording; `floor`: SCALES's."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return False, f"got {getattr(got, 'dtype', type(got).__name__)} {tuple(getattr(got, 'shape', ()))}, " \\
                      f"recorded {want.dtype} {tuple(want.shape)}"
    if not (want.is_floating_point() or want.is_complex()):
        differ = int((got != want).sum())
        return differ == 0, f"{differ} element(s) differ" if differ else "equal"
    if want.is_complex():
        got, want = torch.view_as_real(got), torch.view_as_real(want)
    g, w = got.detach().cpu().double(), want.double()
    places = torch.isnan(w) | torch.isinf(w)
    same_inf = torch.equal(torch.isinf(g), torch.isinf(w)) and torch.equal(g[torch.isinf(g)], w[torch.isinf(w)])
    same_places = torch.equal(torch.isnan(g), torch.isnan(w)) and same_inf
    finite = torch.isfinite(g) & torch.isfinite(w)
    err = (g - w).abs()[finite]
    rtol = RTOL.get(want.dtype, 1e-5)
    scale = max(float(w[finite].abs().max()) if bool(finite.any()) else 0.0, floor)
    ok = same_places and bool((err <= rtol * scale + rtol * w[finite].abs()).all())
    text = f"max abs error {float(err.max()) if err.numel() else 0.0:.3g}"
    n = int(places.sum())
    if n:
        text += (f", NaN/Inf at the same {n} place(s) as recorded" if same_places
                 else f"; NaN/Inf where the recording has none, or the other way round ({n} recorded)")
    return ok, text


def run_eager(args):
    return Launch()(*[a.clone() for a in args])


def run_compile(args):
    return torch.compile(Launch())(*[a.clone() for a in args])


def run_aoti(args):
    with tempfile.TemporaryDirectory() as tmp:
        ep = torch.export.export(Launch(), tuple(a.clone() for a in args))
        path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tmp, "launch.pt2"))
        return torch._inductor.aoti_load_package(path)(*[a.clone() for a in args])


def main():
    parser = argparse.ArgumentParser(description="Re-run one recorded launch and compare with the recording.")
    parser.add_argument("--skip-compile", action="store_true", help="leave out torch.compile")
    parser.add_argument("--skip-aoti", action="store_true", help="leave out AOTI")
    opts = parser.parse_args()
    inputs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)
    recorded = torch.load(os.path.join(HERE, "recorded.pt"), weights_only=True)
    args = [inputs[name] for name in INPUTS]
    ways = [("eager", run_eager)]
    ways += [] if opts.skip_compile else [("torch.compile", run_compile)]
    ways += [] if opts.skip_aoti else [("AOTI", run_aoti)]
    status = 0
    for way, run in ways:
        try:
            outs = run(args)
        except Exception as exc:
            print(f"{way}: could not run: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            status = 1
            continue
        for name, got in zip(OUTPUTS, outs):
            if name not in recorded:
                print(f"{way}: {name} ({OUTPUTS[name]}) ran; nothing to compare with (the recording ends "
                      "before this launch returned)")
                continue
            ok, text = compare(got, recorded[name], SCALES.get(name, 0.0))
            print(f"{way}: {name} ({OUTPUTS[name]}) {'matches the recording' if ok else 'DIFFERS from the recording'}: {text}")
            status = status if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
'''
