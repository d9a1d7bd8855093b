"""The C++ settings reader (cpp_runtime/include/aoti_debug/detail/settings.h)
against aoti_debug/settings.py: same problems, word for word, plus the
"; keeping <fallback>" tail; same resolved values; same glob semantics.
The grammar of each value, case by case, is tests/test_settings_grammar.py."""

from __future__ import annotations

import fnmatch

import pytest

from aoti_debug import settings
from aoti_debug.native import core as _native


@pytest.fixture(scope="session")
def native():
    assert _native.lib() is not None
    return _native


BAD = [
    ("AOTI_DEBUG_LOGLEVEL", ["7", "", "x", "2", "-1", "1.0", "five", "10 0", "0x5"]),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", ["4", "", "x", "-1"]),
    ("AOTI_DEBUG_LOGDEST", ["", "   ", "\t", "rank%r.log"]),
    ("AOTI_DEBUG_CHECK_INPUTS", ["2", "maybe", "enable"]),
    ("AOTI_RUNTIME_CHECK_INPUTS", ["2", "y"]),
    ("AOTI_DEBUG_NAN_CHECK", ["1", "raise:inf", "yes", "on", "error"]),
    ("TORCHINDUCTOR_NAN_ASSERTS", ["2", "yes", "raise"]),
    ("AOTI_DEBUG_MEMCHECK", ["1", "yes", "on", "raise:nan", "error"]),
    ("AOTI_DEBUG_SYNC", ["2", "sometimes"]),
    ("AOTI_DEBUG_NAN_CHECK_SAT", ["2", "sat", "raise"]),
    ("AOTI_DEBUG_DUMP_DIR", ["", "  ", "dumps/%r"]),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", ["0", "-1", "x", "inf", "nan", "1e", "0x10", "1__0", "", "-0.0",
                                     "1e-3", "+.5", "1E2"]),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", ["-1", "1.5", "x", "", "1_000", "+3"]),
    ("AOTI_DEBUG_BLACKBOX", ["on", "-1", "1000001", "64 launches"]),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", ["0", "", "1.5", "2000000"]),
    ("AOTI_DEBUG_KERNELS", ["a,,b", "relu,", "x["]),
    ("AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", [",triton_*"]),
]

GOOD = [
    ("AOTI_DEBUG_LOGLEVEL", [" 5 ", "05", "0"]),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", ["0", "1", "2", " 3"]),
    ("AOTI_DEBUG_LOGDEST", ["stderr", " /tmp/x_%i.log "]),
    ("AOTI_DEBUG_KERNELS", ["*Softmax*, aten::ADDMM ", ""]),
    ("AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", ["triton_*"]),
    ("AOTI_DEBUG_CHECK_INPUTS", ["YES", "off", "", " true "]),
    ("AOTI_DEBUG_NAN_CHECK", ["warn", "RAISE:NANINF", "0", "no", "warn:nan", ""]),
    ("TORCHINDUCTOR_NAN_ASSERTS", ["1", "TRUE", "0", ""]),
    ("AOTI_DEBUG_MEMCHECK", ["warn", " RAISE ", "0", "no", "off", ""]),
    ("AOTI_DEBUG_SYNC", ["on", "0"]),
    ("AOTI_DEBUG_NAN_CHECK_SAT", ["1", " YES ", ""]),
    ("AOTI_DEBUG_DUMP_DIR", [" dumps "]),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", ["0.5", " 2 ", "0.001", ".5", "5."]),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", ["0", " 12 ", "99999999999999999999999"]),
    ("AOTI_DEBUG_BLACKBOX", ["8", "off", " 0064 "]),
    ("AOTI_DEBUG_BLACKBOX_MAX_MB", ["1", " 64 "]),
]

FIELDS = {"AOTI_DEBUG_LOGLEVEL": "level",
          "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "level",
          "AOTI_DEBUG_LOGDEST": "logdest", "AOTI_DEBUG_KERNELS": "kernels",
          "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT": "kernels",
          "AOTI_DEBUG_CHECK_INPUTS": "check_inputs", "AOTI_RUNTIME_CHECK_INPUTS": "check_inputs",
          "AOTI_DEBUG_NAN_CHECK": "nan_check", "TORCHINDUCTOR_NAN_ASSERTS": "nan_check",
          "AOTI_DEBUG_MEMCHECK": "memcheck", "AOTI_DEBUG_SYNC": "sync", "AOTI_DEBUG_DUMP_DIR": "dump_dir",
          "AOTI_DEBUG_NAN_CHECK_SAT": "nan_check_sat",
          "AOTI_DEBUG_DUMP_MAX_SIZE_GB": "dump_max_size_gb",
          "AOTI_DEBUG_DUMP_MAX_COUNT": "dump_max_count", "AOTI_DEBUG_BLACKBOX": "blackbox",
          "AOTI_DEBUG_BLACKBOX_MAX_MB": "blackbox_max_mb"}


def as_text(field, value):
    """A Python Settings value in the C++ reader's output form."""
    if field in ("check_inputs", "sync", "nan_check_sat"):
        return "1" if value else "0"
    if field == "kernels":
        return ",".join(value)
    if field == "dump_max_size_gb":
        return repr(float(value))
    if field in ("rank", "world") and value is None:
        return "-1"
    return str(value)


# An artifact compiled with these; run-only variables fall back to defaults.
COMPILED = dict(level=3, kernels="*relu*", nan_check="warn:naninf", check_inputs=True, memcheck="warn",
                blackbox=32)
FALLBACK = {"level": "3", "logdest": "stdout", "kernels": "*relu*", "check_inputs": "1",
            "nan_check": "warn:naninf", "memcheck": "warn", "sync": "0", "nan_check_sat": "0", "dump_dir": "aoti_debug_dumps",
            "dump_max_size_gb": "20.0", "dump_max_count": "1000", "blackbox": "32", "blackbox_max_mb": "256"}


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in BAD for v in vs])
def test_bad_value_message_matches_python_and_keeps_fallback(native, name, value):
    _, py_problems = settings.read_with_problems({name: value})
    assert len(py_problems) == 1
    problems, values = native.read_settings({name: value}, **COMPILED)
    field = FIELDS[name]
    assert problems == [py_problems[0] + "; keeping " + FALLBACK[field]]
    assert values[field] == FALLBACK[field]


def test_a_refused_filter_without_a_compiled_one_keeps_every_kernel(native):
    _, py_problems = settings.read_with_problems({"AOTI_DEBUG_KERNELS": "a,,b"})
    problems, values = native.read_settings({"AOTI_DEBUG_KERNELS": "a,,b"})
    assert problems == [py_problems[0] + "; keeping *"] == [settings.with_fallback(py_problems[0])]
    assert values["kernels"] == ""


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in GOOD for v in vs])
def test_good_value_resolves_like_python(native, name, value):
    py, py_problems = settings.read_with_problems({name: value})
    assert py_problems == []
    problems, values = native.read_settings({name: value})
    field = FIELDS[name]
    assert problems == []
    assert values[field] == as_text(field, getattr(py, field))


def test_defaults_without_variables(native):
    problems, values = native.read_settings({})
    py = settings.read({})
    assert problems == []
    assert values == {f: as_text(f, getattr(py, f)) for f in values}


def test_primary_name_wins_even_when_bad(native):
    env = {"AOTI_DEBUG_LOGLEVEL": "7", "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "1"}
    _, py_problems = settings.read_with_problems(env)
    problems, values = native.read_settings(env, level=5)
    assert problems == [py_problems[0] + "; keeping 5"] and values["level"] == "5"
    env = {"AOTI_DEBUG_NAN_CHECK": "off", "TORCHINDUCTOR_NAN_ASSERTS": "1"}
    assert native.read_settings(env)[1]["nan_check"] == "off"


def test_several_problems_in_python_order(native):
    env = {"AOTI_DEBUG_DUMP_MAX_COUNT": "x", "AOTI_DEBUG_LOGLEVEL": "4", "AOTI_DEBUG_SYNC": "?"}
    _, py_problems = settings.read_with_problems(env)
    problems, _ = native.read_settings(env)
    assert problems == [p + "; keeping " + k for p, k in zip(py_problems, ("0", "0", "1000"))]


@pytest.mark.parametrize("value", ["caf\u00e9", "tab\there", "quote'only", "both'\"", "back\\slash",
                                   "nl\nx", "\x01\x7f", "nbsp\u00a0", "emoji\U0001f600"])
def test_value_quoting_matches_python_repr(native, value):
    _, py_problems = settings.read_with_problems({"AOTI_DEBUG_LOGLEVEL": value})
    problems, _ = native.read_settings({"AOTI_DEBUG_LOGLEVEL": value})
    assert problems == [py_problems[0] + "; keeping 0"]


GLOB_PATTERNS = ["*softmax*", "aten::addmm", "triton_?oi_*", "cpp_fused_[ab]*", "[!c]*",
                 "*.py:1[0-9]", "layers.*.attn", "*", "?", "[]]x", "[a-c]x", "x[", "*[*",
                 "model.py:12", "*relu*_1", "[!]]"]
GLOB_TEXTS = ["cpp_fused_Softmax_3", "aten::addmm", "ATEN::ADDMM", "triton_poi_fused_0",
              "triton_per_fused_1", "cpp_fused_add_2", "cpp_fused_relu_1", "model.py:12",
              "model.py:123", "layers.0.attn", "layers.10.attn.q", "x", "]x", "bx", "dx", "x[",
              "a[b", "", "cpp_fused_relu_relu_1"]


@pytest.mark.parametrize("pattern", GLOB_PATTERNS)
def test_glob_matches_python_fnmatch_case_insensitively(native, pattern):
    for text in GLOB_TEXTS:
        want = bool(text) and fnmatch.fnmatchcase(text.lower(), pattern.lower())
        assert native.glob_match(pattern, text) == want, (pattern, text)


RANKED = "AOTI_DEBUG_LOGDEST", "log_r%r_p%i.log", "AOTI_DEBUG_DUMP_DIR", "dumps/%r"
# (environment, (rank, world), (logdest, dump_dir) or the problem of each)
RANK_CASES = [
    ({"RANK": "2", "WORLD_SIZE": "4"}, ("2", "4"), ("log_r2_p%i.log", "dumps/2")),
    ({"RANK": " 02 ", "WORLD_SIZE": "x"}, ("2", "-1"), ("log_r2_p%i.log", "dumps/2")),
    ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "8"}, ("1", "2"),
     ("log_r1_p%i.log", "dumps/1")),
    ({"RANK": "-1", "LOCAL_RANK": "3"}, ("3", "-1"), ("log_r3_p%i.log", "dumps/3")),
    ({"RANK": "3", "WORLD_SIZE": "0"}, ("3", "-1"), ("log_r3_p%i.log", "dumps/3")),
    ({}, ("-1", "-1"), None),
    ({"RANK": "two", "WORLD_SIZE": "4"}, ("-1", "-1"), None),
]


@pytest.mark.parametrize("env,rank,paths", RANK_CASES)
def test_rank_and_percent_r_alike_in_both_runtimes(native, env, rank, paths):
    env = {**env, RANKED[0]: RANKED[1], RANKED[2]: RANKED[3]}
    py, py_problems = settings.read_with_problems(env)
    problems, values = native.read_settings(env)
    assert (values["rank"], values["world"]) == rank == (as_text("rank", py.rank), as_text("world", py.world))
    if paths is not None:
        assert problems == py_problems == []
        assert (values["logdest"], values["dump_dir"]) == paths == (py.logdest, py.dump_dir)
        return
    why = ("%r becomes the process's rank, read from RANK, else LOCAL_RANK (torchrun sets both), "
           "and neither is set to a whole number")
    assert py_problems == [f"AOTI_DEBUG_LOGDEST='log_r%r_p%i.log' is not valid: {why}",
                           f"AOTI_DEBUG_DUMP_DIR='dumps/%r' is not valid: {why}"]
    assert problems == [py_problems[0] + "; keeping stdout", py_problems[1] + "; keeping aoti_debug_dumps"]
    assert (values["logdest"], values["dump_dir"]) == ("stdout", "aoti_debug_dumps") == (py.logdest, py.dump_dir)


UNKNOWN_NAMES = ["AOTI_DEBUG_LOGLEVLE", "AOTI_DEBUG_NANCHECK", "AOTI_DEBUG_NAN_CHEK", "AOTI_DEBUG_ZZZ",
                 "AOTI_DEBUG_", "AOTI_DEBUG_CACHEDIR", "AOTI_DEBUG_DUMP", "AOTI_DEBUG_BLACKBOXMAXMB",
                 "AOTI_DEBUG_" + "X" * 120, "TORCHINDUCTOR_NAN_ASSERT", "AOT_INDUCTOR_FILTERED_KERNEL_TO_PRINT",
                 "AOTI_RUNTIME_CHECK_INPUT", "TORCHINDUCTOR_SIZE_ASSERTS", "aoti_debug_loglevel",
                 # known: never named
                 "AOTI_DEBUG_CACHE_DIR", "AOTI_DEBUG_VENV", "AOTI_DEBUG_PREFIX", "AOTI_DEBUG_SYNC"]


def test_unknown_names_are_noted_word_for_word_as_in_python(native):
    env = {name: "1" for name in UNKNOWN_NAMES}
    problems, _ = native.read_settings(env)
    assert problems == [settings.with_fallback(p) for p in settings.read_with_problems(env)[1]] \
        + settings.unknown_variables(env)
    assert problems[:3] == [
        "AOTI_DEBUG_ is not a variable aoti-debug reads; ignoring it",
        "AOTI_DEBUG_BLACKBOXMAXMB is not a variable aoti-debug reads (did you mean AOTI_DEBUG_BLACKBOX_MAX_MB?); "
        "ignoring it",
        "AOTI_DEBUG_CACHEDIR is not a variable aoti-debug reads (did you mean AOTI_DEBUG_CACHE_DIR?); ignoring it"]
    assert len(problems) == 12


def test_each_misspelling_picks_the_same_closest_name(native):
    """difflib's ratio, and its ties (the greater name), one name at a time."""
    names = [v.name for v in settings.VARIABLES] + list(settings.OTHER_NAMES)
    for name in names:
        for cut in range(len("AOTI_DEBUG_"), len(name)):
            env = {name[:cut] + name[cut + 1:]: "1"}       # one character dropped
            assert native.read_settings(env)[0] == settings.unknown_variables(env), env
