"""The plan check for torch.compile's instrumented wrapper.

The Python twin of PlanChecks in cpp_runtime/include/aoti_debug/detail/
checks.h, with the same message (docs/checks.md, "The plan check"): each
output of an extern kernel or custom op against the shape, strides and dtype
the graph planned for it from the op's fake.  On while the input guard or the
memory check is; raises under the guard or memcheck=raise, else one
`note - plan-check` per mismatch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple

from . import state
from .memcheck import launch_words


class PlanCheckError(RuntimeError):
    """Raised into the model's caller (a RuntimeError, as from AOTI)."""


def _planned_tuple(values: Sequence[Optional[int]]) -> str:
    items = ["?" if v is None else str(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def mismatch(t: Any, dtype: str, sizes: Sequence[Optional[int]], strides: Sequence[Optional[int]]) -> str:
    """What differs between tensor t and its plan, as the message says it ('' when nothing)."""
    got_sizes, parts = tuple(t.shape), []
    shape_ok = len(got_sizes) == len(sizes) and all(p is None or p == g for p, g in zip(sizes, got_sizes))
    numel = t.numel()
    if not shape_ok:
        parts.append(f"of shape {got_sizes} where the graph planned {_planned_tuple(sizes)}")
    elif numel > 0 and not all(g <= 1 or p is None or p == s
                               for g, p, s in zip(got_sizes, strides, t.stride())):
        parts.append(f"with strides {tuple(t.stride())} where the graph planned {_planned_tuple(strides)}")
    got_dtype = str(t.dtype).replace("torch.", "")
    if dtype and got_dtype != dtype:
        parts.append(f"of dtype {got_dtype} where the graph planned {dtype}")
    return ", and ".join(parts)


class PlanChecks:
    """One per run while the check is on."""

    def __init__(self, raise_: bool, model: str, run: int, level: int) -> None:
        self.raise_ = raise_
        self.model, self.run, self.level = model, run, level
        self.fired = None               # the black box's BlackBox.fired, while it is on

    def after(self, launch: int, site, values: Sequence[Any],
              planned: Callable[[], Sequence[Tuple[int, str, tuple, tuple]]]) -> None:
        """`planned()`: (argument index, dtype, sizes, strides) of each planned output,
        evaluated here: a size expression over sizes nothing vouched for may divide by
        zero, and the launch's outputs are then not compared."""
        try:
            plans = planned()
        except ArithmeticError:
            return
        for k, dtype, sizes, strides in plans:
            t = values[k] if k < len(values) else None
            if not (hasattr(t, "shape") and hasattr(t, "dtype")):
                continue
            what = mismatch(t, dtype, sizes, strides)
            if not what:
                continue
            name = site.args[k][0]
            msg = (f"{launch_words(self.model, self.run, launch, site)} returned {name} {what}: the op's "
                   "fake (register_fake or Meta kernel) disagrees with its kernel on these inputs, and "
                   f"the launches after it use {name} as planned")
            state.found("plan-check", msg, PlanCheckError("aoti-debug plan check: " + msg), self.raise_,
                        self.level, self.fired, launch, site, values)
