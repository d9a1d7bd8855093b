"""One grammar for every setting, in both runtimes.

Each case of the table runs through aoti_debug/settings.py and through the C++
shim's reader (cpp_runtime/include/aoti_debug/detail/settings.h, by way of
the compiled core): both must accept a value as the same value, or refuse it
with the same message, `NAME='value' is not valid: <accepted>` (the C++ reader
adds `; keeping <fallback>`, here the default).  The grammar (docs/reference.md):
ASCII only; surrounding ASCII whitespace ignored; words in any ASCII case; a
whole number is ASCII digits; a decimal is ASCII digits with at most one '.'.
"""

from __future__ import annotations

import pytest

from aoti_debug import settings
from aoti_debug.native import core as _native


class ok(str):
    """An accepted value, as the C++ reader prints the resolved field."""


LEVEL = "expected one of 0, 1, 3, 5, 10"
UPSTREAM = "expected one of 0, 1, 2, 3 (1 -> level 10, 2 -> level 5, 3 -> level 1)"
COUNT = "expected a whole number >= 0"
SIZE = "expected a number of gigabytes > 0, e.g. 0.5"
BOOL = "expected one of 0, 1, true, false, yes, no, on, off"
NAN = "expected one of off, warn, raise, warn:nan, raise:nan, warn:naninf, raise:naninf"
NAN_ASSERTS = "expected 0 or 1"
MEMCHECK = "expected one of off, warn, raise"
BLACKBOX = "expected off, or a number of launches from 0 to 1000000 (0: off), e.g. 64"
BLACKBOX_MB = "expected a whole number of megabytes from 1 to 1048576"
GLOBS = "expected comma-separated globs (*, ?, [...]), none of them empty, every [ closed by ]"

DIGITS_25 = "9" * 25

# (variable, value, ok(resolved value) or the accepted-values text of the refusal)
CASES = [
    # whole numbers: ASCII digits, leading zeros allowed, nothing else
    ("AOTI_DEBUG_LOGLEVEL", "3", ok("3")),
    ("AOTI_DEBUG_LOGLEVEL", " 3 ", ok("3")),
    ("AOTI_DEBUG_LOGLEVEL", "\t10\n", ok("10")),
    ("AOTI_DEBUG_LOGLEVEL", "03", ok("3")),
    ("AOTI_DEBUG_LOGLEVEL", "0" * 24 + "5", ok("5")),
    ("AOTI_DEBUG_LOGLEVEL", "\u0663", LEVEL),        # Arabic-Indic 3: Python's int() took it
    ("AOTI_DEBUG_LOGLEVEL", "\uff13", LEVEL),        # full-width 3
    ("AOTI_DEBUG_LOGLEVEL", "\u00b2", LEVEL),        # superscript 2: isdigit() but not int()
    ("AOTI_DEBUG_LOGLEVEL", "1_0", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "+3", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "-1", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "3.0", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "nan", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "inf", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "1e400", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", DIGITS_25, LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "7", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "0x5", LEVEL),
    ("AOTI_DEBUG_LOGLEVEL", "3\u00a0", LEVEL),       # no-break space is not ASCII whitespace
    ("AOTI_DEBUG_LOGLEVEL", "3\x1f", LEVEL),         # nor is the unit separator
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", " 3 ", ok("1")),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "03", ok("1")),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "2", ok("5")),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "0", ok("0")),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "\u0663", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "\uff13", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "\u00b2", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "1_0", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "+3", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "-1", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "3.0", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "nan", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "inf", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "1e400", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "", UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", DIGITS_25, UPSTREAM),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "4", UPSTREAM),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "0", ok("0")),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", " 3 ", ok("3")),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "03", ok("3")),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "0" * 25, ok("0")),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", DIGITS_25, ok(str(2**63 - 1))),   # that large is no limit
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "9223372036854775808", ok(str(2**63 - 1))),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "\u0663", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "\uff13", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "\u00b2", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "1_0", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "+3", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "-1", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "3.0", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "nan", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "inf", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "1e400", COUNT),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "", COUNT),
    # decimals: ASCII digits with at most one '.'; no sign, exponent, nan or inf
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0.5", ok("0.5")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", ".5", ok("0.5")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "5.", ok("5.0")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", " 3 ", ok("3.0")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "03", ok("3.0")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "3.0", ok("3.0")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0.001", ok("0.001")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", DIGITS_25, ok("1e+25")),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "\u0663", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "\uff13", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "\u00b2", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1_0", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1_000.5", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "+3", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "-1", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "-0.0", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0.0", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "nan", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "inf", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "Infinity", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1e400", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1e-3", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1" + "0" * 400, SIZE),     # overflows to inf
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0." + "0" * 400 + "1", SIZE),  # underflows to 0
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "1.2.3", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", ".", SIZE),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "", SIZE),
    # booleans and modes: words in any ASCII case
    ("AOTI_DEBUG_CHECK_INPUTS", "1", ok("1")),
    ("AOTI_DEBUG_CHECK_INPUTS", " YES ", ok("1")),
    ("AOTI_DEBUG_CHECK_INPUTS", "Off", ok("0")),
    ("AOTI_DEBUG_CHECK_INPUTS", "", ok("0")),
    ("AOTI_DEBUG_CHECK_INPUTS", "\uff11", BOOL),
    ("AOTI_DEBUG_CHECK_INPUTS", "\uff2f\uff2e", BOOL),  # full-width ON
    ("AOTI_DEBUG_CHECK_INPUTS", "true\u00a0", BOOL),
    ("AOTI_DEBUG_CHECK_INPUTS", "+1", BOOL),
    ("AOTI_DEBUG_CHECK_INPUTS", "01", BOOL),
    ("AOTI_DEBUG_CHECK_INPUTS", "2", BOOL),
    ("AOTI_RUNTIME_CHECK_INPUTS", "TRUE", ok("1")),
    ("AOTI_RUNTIME_CHECK_INPUTS", "y", BOOL),
    ("AOTI_DEBUG_SYNC", "on", ok("1")),
    ("AOTI_DEBUG_NAN_CHECK_SAT", "1", ok("1")),
    ("AOTI_DEBUG_NAN_CHECK_SAT", " Off ", ok("0")),
    ("AOTI_DEBUG_NAN_CHECK_SAT", "", ok("0")),
    ("AOTI_DEBUG_NAN_CHECK_SAT", "naninf", BOOL),
    ("AOTI_DEBUG_SYNC", "\u0661", BOOL),
    ("AOTI_DEBUG_SYNC", "maybe", BOOL),
    ("AOTI_DEBUG_NAN_CHECK", "RAISE:NANINF", ok("raise:naninf")),
    ("AOTI_DEBUG_NAN_CHECK", " warn ", ok("warn:nan")),
    ("AOTI_DEBUG_NAN_CHECK", "0", ok("off")),
    ("AOTI_DEBUG_NAN_CHECK", "", ok("off")),
    ("AOTI_DEBUG_NAN_CHECK", "\uff57\uff41\uff52\uff4e", NAN),  # full-width warn
    ("AOTI_DEBUG_NAN_CHECK", "raise:inf", NAN),
    ("AOTI_DEBUG_NAN_CHECK", "1", NAN),
    ("AOTI_DEBUG_MEMCHECK", "RAISE", ok("raise")),
    ("AOTI_DEBUG_MEMCHECK", " warn ", ok("warn")),
    ("AOTI_DEBUG_MEMCHECK", "no", ok("off")),
    ("AOTI_DEBUG_MEMCHECK", "", ok("off")),
    ("AOTI_DEBUG_MEMCHECK", "1", MEMCHECK),
    ("AOTI_DEBUG_MEMCHECK", "raise:nan", MEMCHECK),
    ("AOTI_DEBUG_MEMCHECK", "\uff57\uff41\uff52\uff4e", MEMCHECK),  # full-width warn
    ("TORCHINDUCTOR_NAN_ASSERTS", "1", ok("raise:naninf")),
    ("TORCHINDUCTOR_NAN_ASSERTS", "TRUE", ok("raise:naninf")),
    ("TORCHINDUCTOR_NAN_ASSERTS", "", ok("off")),
    ("TORCHINDUCTOR_NAN_ASSERTS", "\uff11", NAN_ASSERTS),
    ("TORCHINDUCTOR_NAN_ASSERTS", "01", NAN_ASSERTS),
    ("TORCHINDUCTOR_NAN_ASSERTS", "yes", NAN_ASSERTS),
    # kernel filters: an empty value is every kernel; no empty glob, no unclosed set
    ("AOTI_DEBUG_KERNELS", "*Softmax*, aten::ADDMM", ok("*softmax*,aten::addmm")),
    ("AOTI_DEBUG_KERNELS", "", ok("")),
    ("AOTI_DEBUG_KERNELS", "  ", ok("")),
    ("AOTI_DEBUG_KERNELS", "x[ab]y", ok("x[ab]y")),
    ("AOTI_DEBUG_KERNELS", "[]]x", ok("[]]x")),      # ']' first in a set is a member
    ("AOTI_DEBUG_KERNELS", "[!]]", ok("[!]]")),
    ("AOTI_DEBUG_KERNELS", "[[]", ok("[[]")),
    ("AOTI_DEBUG_KERNELS", "a,,b", GLOBS),
    ("AOTI_DEBUG_KERNELS", "a,", GLOBS),
    ("AOTI_DEBUG_KERNELS", ",a", GLOBS),
    ("AOTI_DEBUG_KERNELS", "a, ,b", GLOBS),
    ("AOTI_DEBUG_KERNELS", ",", GLOBS),
    ("AOTI_DEBUG_KERNELS", "x[", GLOBS),
    ("AOTI_DEBUG_KERNELS", "*[*", GLOBS),
    ("AOTI_DEBUG_KERNELS", "[]", GLOBS),
    ("AOTI_DEBUG_KERNELS", "[!]", GLOBS),
    ("AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", "Triton_*", ok("triton_*")),
    ("AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", "triton_*,", GLOBS),
    # the black box: off or a count of launches, and its ring's size in megabytes
    ("AOTI_DEBUG_BLACKBOX", "64", ok("64")),
    ("AOTI_DEBUG_BLACKBOX", " 064 ", ok("64")),
    ("AOTI_DEBUG_BLACKBOX", "OFF", ok("0")),
    ("AOTI_DEBUG_BLACKBOX", "no", ok("0")),
    ("AOTI_DEBUG_BLACKBOX", "", ok("0")),
    ("AOTI_DEBUG_BLACKBOX", "0", ok("0")),
    ("AOTI_DEBUG_BLACKBOX", "1000000", ok("1000000")),
    ("AOTI_DEBUG_BLACKBOX", "1000001", BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX", DIGITS_25, BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX", "on", BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX", "-1", BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX", "64k", BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX", "\uff16\uff14", BLACKBOX),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "1", ok("1")),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", " 0512 ", ok("512")),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "1048576", ok("1048576")),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "1048577", BLACKBOX_MB),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "0", BLACKBOX_MB),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "0.5", BLACKBOX_MB),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", "", BLACKBOX_MB),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", DIGITS_25, BLACKBOX_MB),
]

FIELD = {**{v.name: v.field for v in settings.VARIABLES},
         **{v.alias: v.field for v in settings.VARIABLES if v.alias}}


def as_text(field, value):
    """A Python Settings value in the C++ reader's output form."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if field == "kernels":
        return ",".join(value)
    if field == "dump_max_size_gb":
        return repr(value)
    return str(value)


def python_reader(name, value):
    resolved, problems = settings.read_with_problems({name: value})
    return problems, as_text(FIELD[name], getattr(resolved, FIELD[name]))


def cpp_reader(name, value):
    problems, values = _native.read_settings({name: value})
    return problems, values[FIELD[name]]


@pytest.fixture(scope="module")
def native():
    assert _native.lib() is not None


def _id(case):
    name, value, _ = case
    return f"{name}={value[:12]!r}" + ("..." if len(value) > 12 else "")


@pytest.mark.parametrize("reader", ["python", "c++"])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_both_runtimes_read_every_value_alike(native, reader, case):
    name, value, want = case
    if reader == "python":
        problems, resolved = python_reader(name, value)
    else:
        problems, resolved = cpp_reader(name, value)
    if isinstance(want, ok):
        assert (problems, resolved) == ([], want)
        return
    message = f"{name}={value!r} is not valid: {want}"
    if reader == "c++":
        message = settings.with_fallback(message)   # "; keeping <default>"
    assert problems == [message]
    assert resolved == as_text(FIELD[name], getattr(settings.Settings(), FIELD[name]))


def test_every_variable_has_cases():
    # AOTI_DEBUG_COMPILE is read at compile time only, by settings.py alone
    # (test_compile_all.py); the C++ reader never sees it
    assert {name for name, _, _ in CASES} >= set(FIELD) - {"AOTI_DEBUG_LOGDEST", "AOTI_DEBUG_DUMP_DIR",
                                                           "AOTI_DEBUG_COMPILE"}
