"""Element-by-element comparison of two tensors, for replay and for diff of dumps.

An element passes when `|got - expected| <= atol + rtol * |expected|`; NaN
must meet NaN, and equal infinities are equal.  Imports torch when called.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple


@dataclasses.dataclass
class Closeness:
    ok: bool
    max_abs: float = 0.0                    # over the elements where neither side is NaN
    max_rel: float = 0.0                    # the largest difference relative to |expected|
    outside: int = 0                        # elements outside the tolerance (NaN mismatches included)
    numel: int = 0
    # the element furthest outside the tolerance (else the largest difference):
    # (index, expected value, got value, allowed difference there); None when empty
    worst: Optional[Tuple[Tuple[int, ...], float, float, float]] = None
    reason: str = ""                        # a mismatch of shape or dtype


def tensors(expected, got, atol: float, rtol: float) -> Closeness:
    import torch
    if expected.shape != got.shape:
        return Closeness(False, reason=f"shape mismatch {tuple(expected.shape)} vs {tuple(got.shape)}")
    if expected.dtype != got.dtype:
        return Closeness(False, reason=f"dtype mismatch {expected.dtype} vs {got.dtype}")
    if expected.numel() == 0:
        return Closeness(True)
    e, g = expected.detach().cpu(), got.detach().cpu()
    if e.dtype == torch.bool:
        e, g = e.to(torch.int8), g.to(torch.int8)
    complex_ = e.is_complex()
    if complex_:
        e, g = torch.view_as_real(e), torch.view_as_real(g)
    e, g = e.double(), g.double()
    nan_e, nan_g = torch.isnan(e), torch.isnan(g)
    both = ~nan_e & ~nan_g
    equal = (e == g) & both   # equal infinities give no difference
    diff = torch.where(both & ~equal, (e - g).abs(), torch.zeros_like(e))
    allowed = atol + rtol * e.abs()
    # how far outside the tolerance, as a multiple of it; infinite for NaN against a
    # number, an infinity against anything else, or any difference with no tolerance
    excess = torch.where(diff > allowed, diff / allowed, torch.zeros_like(e))
    infinite = (nan_e != nan_g) | (both & ~equal & (torch.isinf(e) | torch.isinf(g)))
    excess = torch.where(infinite, torch.full_like(e, math.inf), excess)
    # relative to |expected|: infinite against 0 or against an infinity
    rel = torch.nan_to_num(torch.where(diff > 0, diff / e.abs(), torch.zeros_like(e)),
                          nan=math.inf, posinf=math.inf)
    if complex_:   # one verdict per complex element: the worse of its two parts
        excess, diff = excess.amax(-1), diff.amax(-1)
    bad = excess > 0
    score = excess if bool(bad.any()) else diff
    flat = int(score.reshape(-1).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), score.shape)) if score.dim() else ()
    ev, gv = _element(expected, index), _element(got, index)
    allowed_here = atol + rtol * abs(ev) if math.isfinite(ev) else 0.0
    return Closeness(ok=not bool(bad.any()), max_abs=float(diff.max()),
                     max_rel=float(rel.max()), outside=int(bad.sum()), numel=expected.numel(),
                     worst=(index, ev, gv, allowed_here))


def _element(t, index) -> float:
    value = t[index].item() if index else t.item()
    return abs(value) if isinstance(value, complex) else float(value)
