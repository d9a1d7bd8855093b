"""Symbolic sizes as C++ over detail/sizeexpr.h: every operation checked, so
the input guard evaluates a stride, a derived size or a relation on any
inputs without undefined behaviour (a division by zero or an overflow makes
the value undefined, never a trap).

Only the forms shape expressions take are printed; anything else raises
Unprintable, and the guard leaves that check out and says so.
"""

from __future__ import annotations

from typing import Callable

NS = "aotid_sx::"     # the guard block aliases aoti_debug::detail::sizeexpr


# sympy's relation -> (sizeexpr.h's function, operands swapped): a > b is b < a
_RELATIONS = {"Eq": ("eq", False), "Ne": ("ne", False), "StrictLessThan": ("lt", False),
              "LessThan": ("le", False), "StrictGreaterThan": ("lt", True), "GreaterThan": ("le", True)}


class Unprintable(ValueError):
    """An expression the checked printer has no form for."""


def cpp(expr, symbol: Callable[[object], str]) -> str:
    """C++ of `expr` (an integer expression or a relation): an Int or a Bool;
    `symbol(s)` names the int64_t variable holding symbol s."""
    import sympy
    from torch.utils._sympy import functions as F

    def fold(fn: str, args) -> str:
        out = walk(args[0])
        for a in args[1:]:
            out = f"{NS}{fn}({out}, {walk(a)})"
        return out

    def walk(e) -> str:
        if e is sympy.true or e is sympy.false:
            return f"{NS}known({'true' if e is sympy.true else 'false'})"
        if e.is_Integer:
            return f"{NS}k({int(e)}LL)" if int(e) > -2**63 else f"{NS}k(INT64_MIN)"
        if e.is_Symbol:
            return f"{NS}k({symbol(e)})"
        if isinstance(e, sympy.Add):
            return fold("add", e.args)
        if isinstance(e, sympy.Mul):
            return fold("mul", e.args)
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) >= 0:
            return f"{NS}pow({walk(e.base)}, {int(e.exp)})"
        if type(e).__name__ == "PowByNatural" and e.args[1].is_Integer and int(e.args[1]) >= 0:
            return f"{NS}pow({walk(e.args[0])}, {int(e.args[1])})"
        if isinstance(e, F.FloorDiv):                         # CleanDiv too
            return f"{NS}floordiv({walk(e.args[0])}, {walk(e.args[1])})"
        if isinstance(e, (F.Mod, F.PythonMod, sympy.Mod)):
            return f"{NS}mod({walk(e.args[0])}, {walk(e.args[1])})"
        if isinstance(e, F.ModularIndexing):
            base, div, modulus = e.args
            return f"{NS}mod({NS}floordiv({walk(base)}, {walk(div)}), {walk(modulus)})"
        if isinstance(e, (F.Max, sympy.Max)):
            return fold("max", e.args)
        if isinstance(e, (F.Min, sympy.Min)):
            return fold("min", e.args)
        for kind, (fn, flipped) in _RELATIONS.items():
            if isinstance(e, getattr(sympy, kind)):
                a, b = (e.rhs, e.lhs) if flipped else (e.lhs, e.rhs)
                return f"{NS}{fn}({walk(a)}, {walk(b)})"
        if isinstance(e, sympy.And):
            return fold("all", e.args)
        if isinstance(e, sympy.Or):
            return fold("any", e.args)
        if isinstance(e, sympy.Not):
            return f"{NS}negate({walk(e.args[0])})"
        raise Unprintable(f"{type(e).__name__} in {expr}")

    return walk(sympy.sympify(expr))
