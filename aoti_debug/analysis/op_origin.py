"""nan-origin down to the op: which op of the origin launch first made NaN/Inf.

From a level-10 dump, when the user asks for it (`--rerun-ops`: reading a dump
runs nothing unless asked), the launch's ops (the `ops` field of its manifest
line) are re-run one at a time in eager, in the recorded dtype, on its recorded
inputs; the answer is the first op whose output holds NaN/Inf while what it read
did not.  Otherwise, and from a log, the launch's FX nodes are listed, those
whose op can make NaN/Inf from finite values (a domain error, an overflow, 0/0)
first.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

from . import ops as opsmod
from .untrusted import InputError

# ops that can turn finite inputs into NaN/Inf: outside their domain, at a pole, or by overflow
NAN_CAPABLE = frozenset("""
    log log2 log10 log1p sqrt rsqrt div true_divide floor_divide reciprocal pow float_power
    acos asin atanh acosh lgamma digamma polygamma erfinv fmod remainder xlogy
    exp exp2 expm1 sinh cosh tan _softmax _log_softmax logsumexp var std var_mean
""".split())


def base_name(node: str) -> str:
    """An FX node's op as its name says it: log_2 -> log."""
    return re.sub(r"_\d+$", "", node)


def candidates(nodes: List[str]) -> str:
    """The launch's nodes, those that can make NaN/Inf from finite values first."""
    capable = [n for n in nodes if base_name(n) in NAN_CAPABLE]
    rest = [n for n in nodes if n not in capable]
    if not capable:
        return ", ".join(rest)
    return ", ".join(capable) + " (can make NaN/Inf)" + (f"; then {', '.join(rest)}" if rest else "")


def _nonfinite(value) -> bool:
    import torch
    if isinstance(value, torch.Tensor):
        return (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all())
    if isinstance(value, (list, tuple)):
        return any(_nonfinite(v) for v in value)
    return False


def first_op(manifest: str, line: int) -> str:
    """The answer for the launch whose `before` line is line `line` of `manifest`:
    `aten.log (file:line)`, or `not narrowed: <why>`."""
    from .check import held_outputs, known_sizes, origin_of, tensors
    from .dumps import manifest_lines
    folder = os.path.dirname(manifest)
    lines = manifest_lines(folder)
    entry = next((e for n, e in lines if n == line), None)
    if entry is None or entry.get("kind") != "launch" or entry.get("event") != "before":
        return "not narrowed: the dump has no launch at that line"
    after = next((e for _, e in lines if e.get("kind") == "launch" and e.get("event") == "after"
                  and e.get("id") == entry["id"]), None)
    if "ops" not in entry:
        return "not narrowed: no ops recorded (the artifact was compiled below level 10)"
    program = opsmod.decode(entry["ops"], f"{manifest}:{line}")
    if program.error or not program.own():
        return f"not narrowed: {program.error or 'Inductor names no op for this launch'}"
    inputs = {k: v for k, v in tensors(folder, entry["files"], ("in", "inout")).items() if v is not None}
    outputs = tensors(folder, after["files"], ("out", "inout")) if after is not None else {}
    try:
        held = held_outputs(origin_of(entry), program)
        runner = opsmod.Runner(program, inputs, known=known_sizes(program, held, outputs))
    except opsmod.NotCheckable as exc:
        return f"not narrowed: {exc}"
    for op in program.own():
        try:
            value = runner.value(op.node)
            read = [runner.value(n) for n in op.inputs()] + [
                inputs.get(a["input"]) for a in _input_args(op.args) if a["input"] in inputs]
        except opsmod.NotCheckable as exc:
            return f"not narrowed: {exc}"
        if _nonfinite(value) and not any(_nonfinite(v) for v in read):
            return f"{op.short} ({op.line})" if op.line else op.short
    return ("not narrowed: re-run in eager on the recorded inputs, no op of this launch makes "
            "NaN/Inf (the compiled kernel and eager disagree: run `aoti-debug check`)")


def _input_args(v) -> List[dict]:
    if isinstance(v, dict):
        return [v] if "input" in v else []
    if isinstance(v, list):
        return [a for x in v for a in _input_args(x)]
    return []


RERUN_HINT = "--rerun-ops re-runs them on the dumped inputs to name the op"


def describe(event, rerun: bool = False) -> Optional[str]:
    """The `op:` line of nan-origin's origin block, or None for a call.  The ops of
    a dumped launch are re-run only when `rerun` (the user asked: --rerun-ops)."""
    first = event.first
    origin = getattr(event, "origin", None)
    dumped = bool(first.file) and os.path.basename(first.file) == "manifest.jsonl"
    if dumped and rerun:
        try:
            return f"  op:     {first_op(first.file, first.line)}"
        except InputError as exc:
            return f"  op:     not narrowed: {exc}"
    nodes = list(origin.nodes) if origin is not None and origin.nodes else []
    if not nodes:
        return f"  op:     not narrowed: {RERUN_HINT}" if dumped else None
    return f"  candidate ops: {candidates(nodes)}" + (f" ({RERUN_HINT})" if dumped else "")
