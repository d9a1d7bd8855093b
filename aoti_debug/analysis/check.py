"""`aoti-debug check`: every dumped launch re-run op by op in eager on its
recorded inputs, in the recorded dtype and in float64, and its recorded
outputs judged against both (docs/analysis.md, "check").

An output element is beyond tolerance when its error against the float64
reference exceeds `atol + rtol * |reference|` (atol defaults to rtol times
the largest |reference| of that output: errors are judged at the output's
own scale, or a reduction's at the scale of the terms it summed), unless every op of the launch is PyTorch's own (aten, prims) and
the compiled result is at least as close to float64 as eager's is: then the
loss is the dtype's, not the kernel's.  A custom op re-run is the same code,
so only float64 judges it.  Integer and boolean outputs must equal eager's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import ops as opsmod
from .dumps import load
from .manifest import MANIFEST
from .records import MANTISSA, NARROW, Origin, parse_origin
from .untrusted import InputError

# rtol per dtype: a few hundred float32 ULPs, a handful of half-precision ones, one
# step of a format under 16 bits (a quantisation may round a step apart)
# float4_e2m1fn_x2 aside: torch converts it to no wider dtype to measure it by
RTOL = {"float64": 1e-10, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2,
        **{dtype: rtol for dtype, rtol in NARROW.items() if dtype != "float4_e2m1fn_x2"}}


@dataclass
class Output:
    name: str
    node: str
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: Optional[float] = None
    outside: int = 0
    numel: int = 0
    worst: str = ""                 # the element furthest beyond, in words
    tolerance: str = ""
    skipped: str = ""               # why this output was not compared
    against: str = "float64"        # the reference: float64, else eager (no_wide says why)
    no_wide: str = ""
    # NaN/Inf elements recorded, in eager in the dtype (`dtype`), in float64 (None: no float64
    # run): whether a NaN is the kernel's, the dtype's or the math's (triage)
    dtype: str = ""
    nonfinite: int = 0
    eager_nonfinite: int = 0
    wide_nonfinite: Optional[int] = None


@dataclass
class Launch:
    ident: str
    kernel: str
    source: str
    folder: str
    line: int
    program: Optional[opsmod.Program]
    outputs: List[Output] = field(default_factory=list)
    why: str = ""                   # not checkable: why
    origin: Optional[Origin] = None

    def where(self, output: str) -> str:
        """`file:line, module a.b` of an output, as every finding names it."""
        return self.origin.where_of([output]) if self.origin else (self.source or "-")

    @property
    def compared(self) -> List[Output]:
        return [o for o in self.outputs if not o.skipped]

    @property
    def failed(self) -> bool:
        return any(o.outside for o in self.compared)

    @property
    def checkable(self) -> bool:
        return not self.why and bool(self.compared)

    def reason(self) -> str:
        return self.why or "; ".join(f"{o.name}: {o.skipped}" for o in self.outputs) or "no outputs"

    def line_text(self) -> str:
        if not self.checkable:
            return f"{self.ident} {self.kernel}  not checkable: {self.reason()}"
        worst = max(self.compared, key=lambda o: (o.outside, o.max_rel))
        ulps = [o.max_ulp for o in self.compared if o.max_ulp is not None]
        text = (f"{self.ident} {self.kernel}  {'BEYOND' if self.failed else 'ok'}  "
                f"max_abs={max(o.max_abs for o in self.compared):.3g} "
                f"max_rel={max(o.max_rel for o in self.compared):.3g}")
        if ulps:
            text += f" max_ulp={max(ulps):.3g}"
        if self.failed:
            text += f" ({worst.name}: {worst.outside} of {worst.numel} beyond)"
        narrow = [o for o in self.compared if o.against != "float64" and o.no_wide]
        if narrow:      # judged against eager: say so, and why
            text += "; against eager, not float64: " + "; ".join(f"{o.name} ({o.no_wide})" for o in narrow)
        skipped = [o for o in self.outputs if o.skipped]
        if skipped:     # never dropped silently
            text += "; not compared: " + "; ".join(f"{o.name} ({o.skipped})" for o in skipped)
        return text

    def ops_text(self) -> str:
        own = self.program.own() if self.program else []
        return ", ".join(f"{op.short} ({op.line})" if op.line else op.short for op in own) or "-"


# -- reading the dump -------------------------------------------------------------

def launches(folder: str) -> List[Tuple[Dict[str, Any], Optional[Dict[str, Any]], int]]:
    """(before line, after line or None, manifest line number) of each dumped launch."""
    return dumped(folder)[1]


def dumped(folder: str) -> Tuple[Optional[Dict[str, Any]], List[Tuple[Dict[str, Any], Optional[Dict[str, Any]], int]]]:
    """The run's line and `launches(folder)`, from one reading of the manifest."""
    from .dumps import manifest_lines
    run: Optional[Dict[str, Any]] = None
    befores: Dict[str, Tuple[int, Dict[str, Any]]] = {}
    afters: Dict[str, Dict[str, Any]] = {}
    for number, e in manifest_lines(folder):
        if e["kind"] == "run":
            run = run or e
        elif e["kind"] != "launch":
            continue
        elif e["event"] == "before":
            befores[e["id"]] = (number, e)
        else:
            afters[e["id"]] = e
    return run, [(e, afters.get(ident), number) for ident, (number, e) in befores.items()]


def origin_of(before: Dict[str, Any]) -> Optional[Origin]:
    """The launch's origin (nodes, lines, modules, `holds:`) from its manifest line,
    which carries the record lines the codegen wrote."""
    body = [f"  origin: nodes={before.get('nodes') or '-'} source={before.get('source') or '-'}"]
    return parse_origin(body + before.get("lines", "").splitlines(), lambda j: None)[0]


def held_outputs(origin: Optional[Origin], program: opsmod.Program) -> Dict[str, str]:
    """Output record name -> the FX node whose value it holds: the `holds:` line
    of the launch's origin (origin_of), then the ops' own `holds` lists."""
    held = dict(origin.holds or {}) if origin else {}
    for op in program.ops:
        held.update((buffer, op.node) for buffer in op.holds if buffer not in held)
    return held


def known_sizes(program: opsmod.Program, held: Dict[str, str], outputs: Dict[str, Any]) -> List[tuple]:
    """(size expressions, tensor) of each recorded output that holds an op's value:
    the symbols of a dynamic shape are bound from them too (ops.bind)."""
    return [(program.by_node[held[n]].shape, t) for n, t in outputs.items()
            if t is not None and held.get(n) in program.by_node and program.by_node[held[n]].shape is not None]


def tensors(folder: str, files: List[Dict[str, Any]], roles: Tuple[str, ...]) -> Dict[str, Any]:
    """Record name -> the dumped tensor, or None where no file was written."""
    import torch
    out = {}
    for f in files:
        if f["role"] in roles:
            path = os.path.join(folder, f["file"]) if f.get("file") else None
            value = load(path) if path else None
            if path and not isinstance(value, torch.Tensor):
                raise InputError(f"{path}: holds a {type(value).__name__} (a launch's dump holds a tensor)")
            out[f["name"]] = value
    return out


# -- judging ------------------------------------------------------------------------

def ulp(ref, dtype: str):
    """The spacing of `dtype` at |ref|, as float64."""
    import torch
    bits = MANTISSA[dtype]
    finfo = torch.finfo(getattr(torch, dtype))
    _, exponent = torch.frexp(ref.abs().clamp_min(finfo.tiny))
    return torch.ldexp(torch.ones_like(ref), exponent - 1 - bits).clamp_min(finfo.tiny * 2.0 ** -bits)


# Reductions: an output that sums its operand's elements rounds at the scale of
# those terms, not at its own (the mean of centred values is near zero, and a
# summation order of its own moves it by a few ULPs of the terms).
_SUMS = ("aten.sum", "aten.mean", "aten.var", "aten.var_mean", "aten.std", "aten.std_mean")


def term_scale(program, node: str, inputs: Dict[str, Any], runner) -> float:
    """The largest finite |value| among the terms the op computing `node` sums (0.0
    when it is no reduction): the floor of that output's scale."""
    import torch
    op = program.by_node.get(node)
    if op is not None and op.op == "getitem" and op.inputs():
        op = program.by_node.get(op.inputs()[0])
    if op is None or op.short not in _SUMS:
        return 0.0
    terms = [a["input"] for a in op.args if isinstance(a, dict) and isinstance(a.get("input"), str)]
    values = [inputs.get(name) for name in terms]
    for name in op.inputs():
        try:
            values.append(runner.value(name))
        except opsmod.NotCheckable:
            pass
    scale = 0.0
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
            finite = v[torch.isfinite(v)]
            if finite.numel():
                scale = max(scale, float(finite.abs().max()))
    return scale


def judge(out: Output, got, eager, wide, upstream: bool, atol: Optional[float], rtol: Optional[float],
          no_wide: str = "", terms: float = 0.0) -> None:
    """Measures `got` against float64 (`wide`), else against eager, with `no_wide` saying why;
    `terms`: the scale of what a reduction summed (term_scale), a floor of the output's own."""
    import torch
    out.numel = got.numel()
    if got.shape != eager.shape:
        out.skipped = f"holds {out.node}, of shape {tuple(eager.shape)}, but has shape {tuple(got.shape)}"
        return
    if got.numel() == 0:
        return
    dtype = out.dtype = str(got.dtype).replace("torch.", "")
    if not got.is_floating_point() or dtype not in RTOL:
        if eager.dtype != got.dtype:
            out.skipped = f"dtype {dtype}, but eager gives {str(eager.dtype).replace('torch.', '')}"
            return
        differ = got != eager
        out.outside = int(differ.sum())
        out.tolerance = "exact"
        if out.outside:
            i = int(differ.reshape(-1).nonzero()[0])
            out.worst = (f"first at flat index {i}: recorded {got.reshape(-1)[i].item()} "
                         f"eager {eager.reshape(-1)[i].item()}")
        return
    g, e = got.double(), eager.double()
    out.nonfinite, out.eager_nonfinite = _nonfinite(g), _nonfinite(e)
    if wide is not None and wide.shape == got.shape:
        r = wide.double()
        out.wide_nonfinite = _nonfinite(r)
    else:
        r, out.against = e, "eager"
        out.no_wide = no_wide or (f"float64 gives shape {tuple(wide.shape)}" if wide is not None
                                  else "no float64 run")
    out.max_abs, out.max_rel = _abs_rel(g, e)
    r_tol = RTOL[dtype] if rtol is None else rtol
    finite = torch.isfinite(r)
    scale = max(float(r[finite].abs().max()) if bool(finite.any()) else 0.0, terms)
    a_tol = r_tol * scale if atol is None else atol
    out.tolerance = f"atol={a_tol:.3g} rtol={r_tol:.3g} for {dtype}, against {out.against}"
    err = _err(g, r)
    allowed = a_tol + r_tol * r.abs()
    beyond = err > allowed
    if upstream:        # as close to float64 as eager: the dtype's loss, not the kernel's
        beyond &= err > _err(e, r) + allowed
    out.outside = int(beyond.sum())
    both = torch.isfinite(g) & finite
    if bool(both.any()):
        out.max_ulp = float((((g - r).abs() / ulp(r, dtype))[both]).max())
    if out.outside:
        excess = torch.where(beyond, err / allowed.clamp_min(1e-300), torch.zeros_like(err))
        i = int(excess.reshape(-1).argmax())
        out.worst = (f"worst at flat index {i}: recorded {g.reshape(-1)[i].item():.9g}, "
                     f"eager {e.reshape(-1)[i].item():.9g}"
                     + (f", float64 {r.reshape(-1)[i].item():.9g}" if out.against == "float64" else ""))


def _nonfinite(t) -> int:
    import torch
    return int((~torch.isfinite(t)).sum())


def _err(a, b):
    """|a - b| with NaN meeting NaN and equal infinities equal; a mismatch of those is infinite."""
    import torch
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    diff = (a - b).abs()
    return torch.where(same, torch.zeros_like(diff), torch.nan_to_num(diff, nan=math.inf))


def _abs_rel(g, e):
    import torch
    err = _err(g, e)
    finite = torch.isfinite(err)
    max_abs = float(err[finite].max()) if bool(finite.any()) else 0.0
    if not bool(finite.all()):
        max_abs = math.inf
    rel = torch.where(err > 0, err / e.abs(), torch.zeros_like(err))
    rel = torch.nan_to_num(rel, nan=math.inf, posinf=math.inf)
    return max_abs, float(rel.max()) if rel.numel() else 0.0


def check_launch(folder: str, before: Dict[str, Any], after: Optional[Dict[str, Any]], number: int,
                 atol: Optional[float], rtol: Optional[float], symbols: Optional[Dict[str, int]] = None) -> Launch:
    where = f"{os.path.join(folder, MANIFEST)}:{number}"
    program = opsmod.decode(before["ops"], where) if "ops" in before else None
    launch = Launch(before["id"], before["kernel"], before["source"], folder, number, program,
                    origin=origin_of(before))
    if program is None:
        launch.why = "no ops recorded (the artifact was compiled below level 10, or Inductor names none)"
        return launch
    if program.error:
        launch.why = program.error
        return launch
    if not program.own():
        launch.why = "Inductor names no op for this launch"
        return launch
    if after is None or after["status"] != "ok":
        launch.why = "its outputs were not all dumped (the run stopped, or a file could not be written)"
        return launch
    absent = [f["file"] for f in before["files"] + after["files"]
              if f.get("file") and not os.path.lexists(os.path.join(folder, f["file"]))]
    if absent:      # a lost file is a gap of the dump (completeness.py), not unreadable input
        launch.why = f"{absent[0]} is absent (the manifest names it)"
        return launch
    inputs = {k: v for k, v in tensors(folder, before["files"], ("in", "inout")).items() if v is not None}
    outputs = tensors(folder, after["files"], ("out", "inout"))
    held = held_outputs(launch.origin, program)
    upstream = all(opsmod.is_upstream(op.op) for op in program.ops)
    known = known_sizes(program, held, outputs)
    eager = opsmod.Runner(program, inputs, known=known, run_symbols=symbols)
    wide = opsmod.Runner(program, inputs, wide=True, known=known, run_symbols=symbols)
    for name, got in outputs.items():
        node = held.get(name, "")
        out = Output(name, node)
        launch.outputs.append(out)
        if got is None:
            out.skipped = "no file was dumped for it"
            continue
        if not node:
            out.skipped = "the records do not say which op's value it holds"
            continue
        try:
            e = eager.value(node)
        except opsmod.NotCheckable as exc:
            out.skipped = str(exc)
            continue
        import torch
        if not isinstance(e, torch.Tensor):
            out.skipped = f"{node} is not a tensor"
            continue
        w, no_wide = None, ""
        try:
            w = wide.value(node)
        except opsmod.NotCheckable as exc:
            no_wide = f"the float64 run: {exc}"
        if w is not None and not isinstance(w, torch.Tensor):
            w, no_wide = None, f"the float64 run gives no tensor for {node}"
        terms = term_scale(program, node, inputs, wide if w is not None else eager)
        judge(out, got, e, w, upstream, atol, rtol, no_wide, terms)
    return launch


def run_symbols(folder: str, run: Optional[Dict[str, Any]], entries) -> Dict[str, int]:
    """Symbols of a dynamic shape bound from the run's recorded model inputs
    (inputs.pt, named by `run`, its manifest line), by the size expressions the
    launches' ops give those inputs: a launch whose own tensors do not bind a symbol
    (`(s0//4)` alone) is checked with it all the same."""
    labels = run.get("inputs") if run else None
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        return {}
    shapes: Dict[str, List[str]] = {}
    for before, _, number in entries:
        if "ops" in before:
            program = opsmod.decode(before["ops"], f"{os.path.join(folder, MANIFEST)}:{number}")
            for label, shape in opsmod.model_input_shapes(program, labels).items():
                shapes.setdefault(label, shape)
    files = [f for f in run.get("files", []) if f.get("name") == "inputs" and f.get("file")]
    if not shapes or not files or not os.path.lexists(os.path.join(folder, files[0]["file"])):
        return {}
    values = load(os.path.join(folder, files[0]["file"]))
    import torch
    if not isinstance(values, (list, tuple)):
        return {}
    return opsmod.bind_pairs([(shapes[label], t) for label, t in zip(labels, values)
                              if label in shapes and isinstance(t, torch.Tensor)])


def check(root: str, atol: Optional[float] = None, rtol: Optional[float] = None) -> List[Launch]:
    from .replay import folders
    found: List[Launch] = []
    for folder in folders(root):
        run, entries = dumped(folder)
        symbols = run_symbols(folder, run, entries)
        for before, after, number in entries:
            found.append(check_launch(folder, before, after, number, atol, rtol, symbols))
    return found
