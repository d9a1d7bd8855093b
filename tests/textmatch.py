"""Comparing program output with the output a document shows, where the
numbers a compiled kernel computed may differ in their last digits.

The same model gives slightly different floating-point results on another
CPU: Inductor and ATen pick the vector ISA (AVX-512, AVX2, ...) at run time,
and reduction order and math-library routines change with it.  Text that
such numbers went into is compared with a stated tolerance:

* A *floating-point number* is a decimal token, standing alone (not part of
  a name like ``float32`` or of a dotted version like ``2.13.0``), that was
  printed at full precision: with an exponent, or with at least 4 fraction
  digits (the tool prints ``%.6f``/``%.6g``/``%.6e``, torch 4 digits).  Two
  match when they have the same shape (the same number of fraction digits,
  an exponent on both or neither) and
  ``|a - b| <= max(RTOL * max(|a|, |b|), ATOL)``: agreement to about six
  significant digits, and to the last printed place of a ``%.6f`` statistic
  near zero.
* Launch ids ``M:R.K`` (``ranker#2:1.3``) and ``R.K`` are exact: they have
  fewer fraction digits, and one after an instance's ``name:`` or after the
  word ``launch`` is never taken for a number whatever K is.
* A content hash (``hash=`` and 16 hex digits) matches any content hash:
  it names the bits, which differ wherever the numbers differ in their last
  digits.
* Everything else is compared exactly: words, names, integers (shapes,
  counts, line numbers, indices), punctuation, ``nan`` and ``inf``.

The parity tests (one package, one machine: Python vs C++ runtime, two runs
in a row) keep comparing text exactly; this module is for text recorded on
one machine and checked on another.
"""

from __future__ import annotations

import functools
import re
from typing import Sequence

RTOL = 1e-5
ATOL = 1e-6

# a number not glued to a name, a dotted version or another number, nor a launch id
# (`ranker#2:1.3`: after a name and a colon, as a `file.py:33` line number, compared as text)
_NUMBER = re.compile(r"(?<![\w.])(?<![\w#]:)(?<!launch )[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _is_float(token: str) -> bool:
    fraction_digits, exponent = _shape(token)
    return exponent or (fraction_digits or 0) >= 4


def _shape(token: str):
    mantissa, _, exponent = token.lower().partition("e")
    fraction = mantissa.partition(".")[2] if "." in mantissa else None
    return (None if fraction is None else len(fraction)), bool(exponent)


def close(expected: str, actual: str) -> bool:
    """Whether two number tokens match under the rules above."""
    if expected == actual:
        return True
    if not (_is_float(expected) and _is_float(actual)) or _shape(expected) != _shape(actual):
        return False
    a, b = float(expected), float(actual)
    return abs(a - b) <= max(RTOL * max(abs(a), abs(b)), ATOL)


_HASH = re.compile(r"(?<=hash=)[0-9a-f]{16}\b")


def _split(line: str):
    """Text between numbers, and the numbers: ([text0, text1, ...], [num0, ...])."""
    line = _HASH.sub("HASH", line)
    return _NUMBER.split(line), _NUMBER.findall(line)


def same_line(expected: str, actual: str) -> bool:
    """One line: the same text around the numbers, and numbers that match."""
    (text_e, nums_e), (text_a, nums_a) = _split(expected), _split(actual)
    return (text_e == text_a and len(nums_e) == len(nums_a)
            and all(close(e, a) for e, a in zip(nums_e, nums_a)))


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether `actual` is `expected` line by line (same_line), where an
    expected line holding only '...' stands for any number of lines."""
    expected, actual = list(expected), list(actual)

    @functools.lru_cache(maxsize=None)
    def from_(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i].strip() == "...":
            return any(from_(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and same_line(expected[i], actual[j]) and from_(i + 1, j + 1)

    return from_(0, 0)

