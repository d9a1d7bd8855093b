"""Memory check poison, as cpp_runtime/include/aoti_debug/detail/poison.h
defines it: the NaN the guarding allocator fills new memory and guard
regions with, recognised as written, quieted by arithmetic, or converted
between float32 and float64 / bfloat16 (sign and quiet bit ignored)."""

from __future__ import annotations

from typing import Any, Tuple

WORD = 0x7FF57FA5   # float32; twice over, float64; each half, float16 and bfloat16

# dtype name -> (integer view, sign mask, quiet bit, poison values)
_FORMS = {
    "float32": ("int32", 0x7FFFFFFF, 0x00400000, (WORD, 0x7FEBFD2B, 0x7FE50000, 0x7FF50000)),
    "float64": ("int64", 0x7FFFFFFFFFFFFFFF, 0x0008000000000000, (0x7FFD7FA57FF57FA5, 0x7FFEAFF4A0000000)),
    "float16": ("int16", 0x7FFF, 0x0200, (0x7FF5, 0x7FA5, 0x7FAB)),
    "bfloat16": ("int16", 0x7FFF, 0x0040, (0x7FF5, 0x7FE5)),
}


def _mask(t: Any):
    """A bool tensor: where `t` (a CPU floating tensor) holds poison; None for other tensors."""
    import torch
    form = _FORMS.get(str(t.dtype).replace("torch.", ""))
    if form is None or t.device.type != "cpu":
        return None
    view, sign, quiet, values = form
    bits = (t.detach().contiguous().view(getattr(torch, view)) & sign) | quiet
    hit = torch.zeros_like(bits, dtype=torch.bool)
    for v in values:
        hit |= bits == v
    return hit


def count(t: Any) -> Tuple[int, int]:
    """(poison elements, flat index of the first or -1)."""
    hit = _mask(t)
    if hit is None or hit.numel() == 0:
        return 0, -1
    flat = hit.reshape(-1)
    n = int(flat.sum())
    return n, (int(flat.nonzero()[0]) if n else -1)


def at(t: Any, flat: int) -> bool:
    """Whether element `flat` (row-major) of `t` is poison."""
    hit = _mask(t)
    return hit is not None and 0 <= flat < hit.numel() and bool(hit.reshape(-1)[flat])
