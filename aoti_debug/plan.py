"""The instrumentation plan: what each launch is, where it came from, which
arguments it reads and writes.  The contract between the codegen, which builds
it (codegen_patches/, reading Inductor's IR in ir_plan.py), emits it through
cpp_emit (AOTI) or python_emit (torch.compile) and writes it to TORCH_TRACE,
and the runtimes, which follow it and write its body lines into records.
Neither imports the other: both import this.  Imports nothing from torch.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Tuple

IN, OUT, INOUT = "in", "out", "inout"


@dataclasses.dataclass(frozen=True)
class Provenance:
    nodes: Tuple[str, ...] = ()      # FX node names the launch computes
    source: str = "-"                # the user's line named for the kernel, "file:line"
    modules: Tuple[str, ...] = ()    # nn.Module paths and every fused line, for the kernel filter
    lines: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()   # ("file:line", its nodes), in source order
    module: str = "-"                # the innermost nn.Module path of the op `source` names

    def origin_line(self) -> str:
        return f"origin: nodes={','.join(self.nodes) or '-'} source={self.source}"

    def source_lines(self) -> str:
        return "".join(f"  source-line: {line} nodes={','.join(nodes)}\n" for line, nodes in self.lines)

    def filter_names(self) -> Tuple[str, ...]:
        return self.nodes + self.modules + ((self.source,) if self.source != "-" else ())


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str        # as the record shows it (buffer / input name)
    expr: str        # the wrapper expression that yields the tensor
    role: str        # in | out | inout
    value: str = ""  # the FX node whose result the buffer holds ("" = not known)
    constant: bool = False  # one of the artifact's constants (weights): the black box does not copy it
    scale: str = ""  # the op's schema argument it is passed as when the kernel uses it as a scale (scale_a)
    # a scale an earlier launch of the same call wrote: that launch's index (0: none, a constant
    # or an input) and its kernel and origin, "cpp_fused_div_1 (source m.py:12, module fc1)"
    writer: int = 0
    writer_words: str = ""
    dequant: str = ""  # an operand of a scaled matmul: how its scales apply (dequant_spec; docs/log-format.md 3.3)


@dataclasses.dataclass(frozen=True)
class Dequant:
    """How an operand of a scaled matmul is scaled, as the codegen reads it from the
    op (codegen_patches/ir_plan.py, dequant_operands): element (r, c) of the operand
    (float4_e2m1fn_x2 unpacked, two a byte along K) times its scale element, times
    `global_scale`'s one element when there is one."""
    scale: str                # the buffer of its scale
    layout: str               # tensorwise | rowwise (one per outer index) | block (`block` along K)
    label: str                # what the record's scaled_by= says: "scale_a (rowwise)"
    kdim: int = 1             # its contraction dimension: 1 for self (M, K), 0 for mat2 (K, N)
    block: int = 0
    swizzled: bool = False    # block scales in cuBLAS's 128x4 tiles (SwizzleType.SWIZZLE_32_4_4)
    global_scale: str = ""    # the buffer of a tensor-wide second scale (NVFP4), "" when none


DEQUANT_LAYOUTS = ("tensorwise", "rowwise", "block")


def dequant_spec(d: Dequant, scale: int, global_scale: int = -1) -> str:
    """The text an operand's Arg.dequant carries to both runtimes, its scales by their
    index among the launch's arguments: "<scale> <global or -1> <layout> <block>
    <swizzled 0|1> <kdim> <label>" (parse_dequant reads it; detail::parse_dequant too)."""
    return f"{scale} {global_scale} {d.layout} {d.block} {int(d.swizzled)} {d.kdim} {d.label}"


def parse_dequant(text: str) -> Optional[Tuple[int, int, str, int, bool, int, str]]:
    """(scale index, global index or -1, layout, block, swizzled, kdim, label) of a
    dequant_spec; None when it is not one."""
    parts = text.split(" ", 6)
    try:
        scale, glob, layout, block, swizzled, kdim, label = parts
        if layout not in DEQUANT_LAYOUTS or swizzled not in ("0", "1") or kdim not in ("0", "1"):
            return None
        return int(scale), int(glob), layout, int(block), swizzled == "1", int(kdim), label
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class Planned:
    """The layout the graph planned for one output of an extern kernel or custom
    op, from the op's fake: the dtype, and each size and stride as an expression
    of the wrapper's symbols (None: not known where the launch returns)."""
    arg: int                              # its index in Site.args
    dtype: str                            # "float32"
    sizes: Tuple[Optional[object], ...]
    strides: Tuple[Optional[object], ...]


@dataclasses.dataclass
class Site:
    """One instrumented launch point in the generated wrapper."""
    index: int
    kernel: str
    provenance: Provenance
    args: List[Arg]
    kind: str                  # cpp | triton | extern | proxy
    ops: List[dict] = dataclasses.field(default_factory=list)   # fx_ops.program (level 10)
    planned: List[Planned] = dataclasses.field(default_factory=list)   # the plan check's layouts

    def inputs(self) -> List[Arg]:
        return [a for a in self.args if a.role in (IN, INOUT)]

    def outputs(self) -> List[Arg]:
        return [a for a in self.args if a.role in (OUT, INOUT)]

    def record_lines(self, sources: Optional[Dict[str, "Provenance"]] = None) -> str:
        """The `module:`, `source-line:`, `output-source:`, `output-module:` and
        `holds:` body lines (docs/log-format.md 1.1) that both runtimes append
        after the origin line, formatted once here.  `sources`: each output's
        own line and module (of the op most likely to have turned its values
        non-finite); a line that differs from the launch's `source=` is
        written, so that a kernel fusing independent computations (torch 2.15
        fuses the branches of a model horizontally) points each output at its
        own line."""
        held = " ".join(f"{a.name}={a.value}" for a in self.outputs() if a.value)
        prov, own = self.provenance, ""
        if sources and len(prov.lines) > 1:
            elsewhere = [(a.name, sources[a.name]) for a in self.outputs()
                         if sources.get(a.name) and sources[a.name].source not in ("-", prov.source)]
            own = "".join(f"  output-source: {name} {p.source}\n" for name, p in elsewhere)
            # each line's module: an output of another line may be another layer's
            own += "".join(f"  output-module: {name} {p.module}\n" for name, p in elsewhere
                           if p.module not in ("-", prov.module))
        module = f"  module: {prov.module}\n" if prov.module != "-" else ""
        return module + prov.source_lines() + own + (f"  holds: {held}\n" if held else "")

    def to_json(self) -> dict:
        return {"index": self.index, "kernel": self.kernel, "kind": self.kind,
                "nodes": list(self.provenance.nodes), "source": self.provenance.source,
                "lines": [[line, list(nodes)] for line, nodes in self.provenance.lines],
                "modules": list(self.provenance.modules), "module": self.provenance.module,
                "args": [{"name": a.name, "role": a.role, "value": a.value, **({"scale": a.scale} if a.scale else {}),
                          **({"dequant": a.dequant} if a.dequant else {})}
                         for a in self.args],
                **({"ops": self.ops} if self.ops else {})}


# -- provenance -------------------------------------------------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# what a name from the model (a file, a module path) may not carry into a record raw:
# control characters (a newline would start a forged record; an escape sequence acts on a
# terminal), C1 controls and Unicode's line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def inert(text: str) -> str:
    """A name from the model as records carry it: control characters as \\xNN / \\uNNNN
    (docs/log-format.md), so that it is one inert piece of its line in both runtimes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def user_frame(stack_trace: Optional[str]) -> Optional[str]:
    """The innermost frame outside torch itself, as 'file:line'."""
    if not stack_trace:
        return None
    frames = _FRAME.findall(stack_trace)
    for path, line in reversed(frames):
        normalized = path.replace("\\", "/")
        if "/site-packages/torch/" in normalized or "/torch/nn/modules/" in normalized \
                or "/torch/_" in normalized or normalized.startswith("<"):   # <eval_with_key>.55: FX-generated
            continue
        return f"{inert(path)}:{line}"
    real = [f for f in frames if not f[0].startswith("<")]     # never FX-generated code
    return f"{inert(real[-1][0])}:{real[-1][1]}" if real else None


# Ops that can turn finite inputs into NaN/Inf, most telling first: a domain
# error or a division (log of a negative, 0/0, sqrt, pow, exp overflow), then
# what overflows only at the edges of a dtype (a product, a narrowing cast).
NAN_CAPABLE_TIERS = (
    frozenset({"log", "log2", "log10", "log1p", "sqrt", "rsqrt", "div", "reciprocal", "pow", "exp",
               "exp2", "expm1", "acos", "asin", "acosh", "atanh", "tan", "fmod", "remainder", "erfinv",
               "lgamma", "digamma", "polygamma", "var", "std", "var_mean", "std_mean"}),
    frozenset({"mul", "convert_element_type", "_to_copy"}),
)


def op_name(node) -> str:
    target = getattr(node, "target", None)
    name = getattr(target, "__name__", None) or str(target)
    return name.split(".")[0]


def nan_tier(node) -> Optional[int]:
    """0 for the most telling NaN-capable ops, 1 for the others, None if it cannot make NaN/Inf."""
    op = op_name(node)
    return next((i for i, ops in enumerate(NAN_CAPABLE_TIERS) if op in ops), None)


def _line_key(line: str, files: List[str]):
    path, _, number = line.rpartition(":")
    return files.index(path), int(number) if number.isdigit() else 0


def provenance_of_fx_nodes(fx_nodes: Iterable) -> Provenance:
    """Names, modules and source lines of FX nodes (in execution order).

    A fused kernel spans several lines and one must be named: the line of the
    first op (in execution order) of the most telling NaN-capable tier (a log,
    a division before a product), else the first line; that is where a numeric
    bug most likely sits.  Every line is listed with its nodes."""
    names: List[str] = []
    modules: List[str] = []
    by_line: dict = {}
    files: List[str] = []
    best = None                      # (tier, position, line, module)
    first_module = None              # the module of the first node with a line
    for node in fx_nodes:
        name = getattr(node, "name", None)
        if not name or name in names:
            continue
        names.append(name)
        meta = getattr(node, "meta", {}) or {}
        line = user_frame(meta.get("stack_trace"))
        stack = [str(path) for path, _ in (meta.get("nn_module_stack") or {}).values() if path]
        innermost = stack[-1] if stack else "-"
        if line:
            by_line.setdefault(line, []).append(name)
            path = line.rpartition(":")[0]
            if path not in files:
                files.append(path)
            if first_module is None:
                first_module = innermost
            tier = nan_tier(node)
            if tier is not None and (best is None or tier < best[0]):
                best = (tier, len(names), line, innermost)
        modules += [path for path in stack if path not in modules]
    first = next(iter(by_line), None)
    source, module = (best[2], best[3]) if best else (first or "-", first_module or "-")
    ordered = sorted(by_line, key=lambda line: _line_key(line, files))
    return Provenance(tuple(names), source, tuple(modules) + tuple(l for l in ordered if l != source),
                      tuple((line, tuple(by_line[line])) for line in ordered), module)


def where(source: Optional[str], module: Optional[str] = None) -> str:
    """`file:line, module a.b.c`: the user's line and the module running it, as
    every finding names a launch's origin (the NaN check's note, nan-origin,
    diff, report).  Layers of one model share their lines; the module path
    says which layer.  Unknown parts: source `-`, no module."""
    text = source or "-"
    return text if not module or module == "-" else f"{text}, module {module}"


def launch_module(lines: str) -> str:
    """The module path of a launch's `module:` line ("" when it has none): the
    first of the body lines Site.record_lines formats, which both runtimes
    carry; the memory check's notes name it as the NaN check's do."""
    head = "  module: "
    return lines[len(head):].split("\n", 1)[0] if lines.startswith(head) else ""


_DYNAMO_SELF = re.compile(r"^L\['self'\]\.?")


def module_path(path: str) -> str:
    """Dynamo spells module paths from the local `self` (L['self'].fc1); AOTI as fc1."""
    return inert(_DYNAMO_SELF.sub("", path) or path)
