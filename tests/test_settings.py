"""aoti_debug.settings: values, aliases, precedence, and the messages for bad values."""

import pytest

from aoti_debug import settings as S
from conftest import clean_env, run_python, two_refused_compiles


def read(**env):
    return S.read(environ={k: str(v) for k, v in env.items()})


def test_defaults():
    s = read()
    assert (s.level, s.logdest, s.kernels, s.check_inputs, str(s.nan_check), s.sync,
            s.dump_dir, s.dump_max_size_gb, s.dump_max_count) == (
        0, "stdout", (), False, "off", False, "aoti_debug_dumps", 20.0, 1000)
    assert set(s.sources.values()) == {"default"}


@pytest.mark.parametrize("upstream,level", [("0", 0), ("1", 10), ("2", 5), ("3", 1)])
def test_upstream_printer_levels_map(upstream, level):
    s = read(AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=upstream)
    assert s.level == level
    assert s.sources["level"] == f"AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER={upstream}"


def test_our_variable_wins_over_the_alias_and_arguments_win_over_both():
    env = dict(AOTI_DEBUG_LOGLEVEL=3, AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=1)
    assert read(**env).level == 3
    s = S.read(environ={k: str(v) for k, v in env.items()}, overrides={"level": 5})
    assert (s.level, s.sources["level"]) == (5, "argument")


def test_what_a_variable_set_is_told_apart_from_defaults_arguments_and_bad_values():
    """What a run's variables may lower: only a valid value from the environment."""
    env = dict(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_NAN_CHECK="loud", AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT="addmm",
               AOTI_DEBUG_MEMCHECK="warn")
    s, problems = S.read_with_problems(environ=env, overrides={"memcheck": "off"})
    assert len(problems) == 1 and "AOTI_DEBUG_NAN_CHECK" in problems[0]
    assert s.from_variables == {"level", "kernels"}
    assert [s.set_at_run_time(f) for f in ("level", "kernels", "nan_check", "memcheck", "blackbox")] == [
        "AOTI_DEBUG_LOGLEVEL=3", "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=addmm", None, None, None]
    assert (s.sources["nan_check"], s.sources["memcheck"]) == (
        "default (AOTI_DEBUG_NAN_CHECK is not valid)", "argument")


def test_aliases_for_filters_guards_and_nan_asserts():
    s = read(AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT="Triton_Poi_*, addmm",
             AOTI_RUNTIME_CHECK_INPUTS=1, TORCHINDUCTOR_NAN_ASSERTS=1)
    assert s.kernels == ("triton_poi_*", "addmm")
    assert s.check_inputs is True
    assert str(s.nan_check) == "raise:naninf" and s.nan_check.count_inf


@pytest.mark.parametrize("value,text", [("warn", "warn:nan"), ("raise", "raise:nan"),
                                        ("WARN:NANINF", "warn:naninf"), ("off", "off"), ("0", "off")])
def test_nan_modes(value, text):
    assert str(read(AOTI_DEBUG_NAN_CHECK=value).nan_check) == text


@pytest.mark.parametrize("name,value,accepted", [
    ("AOTI_DEBUG_LOGLEVEL", "abc", "expected one of 0, 1, 3, 5, 10"),
    ("AOTI_DEBUG_LOGLEVEL", "7", "expected one of 0, 1, 3, 5, 10"),
    ("AOTI_DEBUG_DUMP_MAX_COUNT", "-1", "expected a whole number >= 0"),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "0", "expected a number of gigabytes > 0, e.g. 0.5"),
    ("AOTI_DEBUG_DUMP_MAX_SIZE_GB", "lots", "expected a number of gigabytes > 0, e.g. 0.5"),
    ("AOTI_DEBUG_NAN_CHECK", "maybe",
     "expected one of off, warn, raise, warn:nan, raise:nan, warn:naninf, raise:naninf"),
    ("AOTI_DEBUG_SYNC", "sometimes", "expected one of 0, 1, true, false, yes, no, on, off"),
    ("AOTI_DEBUG_CHECK_INPUTS", "2", "expected one of 0, 1, true, false, yes, no, on, off"),
    ("AOTI_DEBUG_LOGDEST", " ", "expected stdout, stderr, or a file path (%i becomes the process id, %r its rank)"),
    ("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "5",
     "expected one of 0, 1, 2, 3 (1 -> level 10, 2 -> level 5, 3 -> level 1)"),
    ("TORCHINDUCTOR_NAN_ASSERTS", "yes please", "expected 0 or 1"),
])
def test_bad_values_name_the_variable_the_value_and_what_is_accepted(name, value, accepted):
    with pytest.raises(S.SettingsError) as info:
        read(**{name: value})
    assert str(info.value) == f"{name}={value!r} is not valid: {accepted}"


def test_all_problems_are_reported_together_and_non_strict_falls_back():
    env = {"AOTI_DEBUG_LOGLEVEL": "2", "AOTI_DEBUG_NAN_CHECK": "maybe"}
    with pytest.raises(S.SettingsError) as info:
        S.read(environ=env)
    assert len(info.value.problems) == 2
    s, problems = S.read_with_problems(environ=env)
    assert (s.level, str(s.nan_check)) == (0, "off")
    assert [S.with_fallback(p) for p in problems] == [
        "AOTI_DEBUG_LOGLEVEL='2' is not valid: expected one of 0, 1, 3, 5, 10; keeping 0",
        "AOTI_DEBUG_NAN_CHECK='maybe' is not valid: expected one of off, warn, raise, warn:nan, "
        "raise:nan, warn:naninf, raise:naninf; keeping off"]


def test_unknown_argument_is_a_type_error():
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['levle'\]"):
        S.read(environ={}, overrides={"levle": 3})


def test_info_command_shows_values_sources_and_system():
    proc = run_python("import sys; from aoti_debug.cli import main; sys.exit(main(['info']))",
                      env=clean_env(AOTI_DEBUG_LOGLEVEL=5, AOTI_RUNTIME_CHECK_INPUTS=1))
    lines = proc.stdout.splitlines()
    assert "  AOTI_DEBUG_LOGLEVEL            5                    from AOTI_DEBUG_LOGLEVEL=5" in lines
    assert "  AOTI_DEBUG_CHECK_INPUTS        1                    from AOTI_RUNTIME_CHECK_INPUTS=1" in lines
    assert "  AOTI_DEBUG_LOGDEST             stdout               from default" in lines
    import torch
    assert (f"  PyTorch version                {torch.__version__} "
            "(tested: aoti-debug is tested with torch 2.11 to 2.15)") in lines
    assert "  GPUs                           none visible" in lines or any(l.startswith("  GPU 0") for l in lines)


def test_info_with_bad_values_exits_2_with_every_message():
    import subprocess, sys
    proc = subprocess.run([sys.executable, "-m", "aoti_debug", "info"], capture_output=True, text=True,
                          env=clean_env(AOTI_DEBUG_LOGLEVEL="abc", AOTI_DEBUG_KERNELS="a,,b"))
    assert proc.returncode == 2
    # the start-up hook stays silent (only compiles fail); `info` says what is wrong and exits 2
    assert proc.stderr == ("\nerror: AOTI_DEBUG_LOGLEVEL='abc' is not valid: expected one of 0, 1, 3, 5, 10\n"
                           "error: AOTI_DEBUG_KERNELS='a,,b' is not valid: expected comma-separated globs "
                           "(*, ?, [...]), none of them empty, every [ closed by ]\n")
    assert "  AOTI_DEBUG_KERNELS             (all)                from default (AOTI_DEBUG_KERNELS is not valid)" \
        in proc.stdout.splitlines()


@pytest.mark.parametrize("kernels", ["a,,b", ["relu", ""], "x["])
def test_instrument_refuses_a_bad_filter_before_compiling(kernels):
    import aoti_debug
    with pytest.raises(S.SettingsError) as info:
        with aoti_debug.instrument(level=1, kernels=kernels):
            pytest.fail("the block ran")
    assert str(info.value).startswith("argument kernels=")
    assert str(info.value).endswith(" is not valid: expected comma-separated globs (*, ?, [...]), "
                                    "none of them empty, every [ closed by ]")


def test_argument_values_follow_the_same_grammar():
    with pytest.raises(S.SettingsError, match=r"^argument level='\u0663' is not valid"):
        S.read(environ={}, overrides={"level": "\u0663"})
    assert S.read(environ={}, overrides={"level": " 05 "}).level == 5


def test_instrument_refuses_a_bad_variable_even_one_its_argument_overrides(monkeypatch):
    import aoti_debug
    monkeypatch.setenv("AOTI_DEBUG_LOGLEVEL", "\u0663")
    with pytest.raises(S.SettingsError) as info:
        with aoti_debug.instrument(level=5):
            pytest.fail("the block ran")
    assert str(info.value) == "AOTI_DEBUG_LOGLEVEL='\u0663' is not valid: expected one of 0, 1, 3, 5, 10"


def _info(**env):
    return run_python("import sys; from aoti_debug.cli import main; sys.exit(main(['info']))",
                      env=clean_env(**env), check=False)


def test_info_tries_the_log_destination_as_a_run_opens_it(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("")
    dest = f"{regular}/x.log"            # under a regular file: no run can open it
    proc = _info(AOTI_DEBUG_LOGDEST=dest)
    assert proc.returncode == 2
    assert proc.stderr == (f"\nerror: AOTI_DEBUG_LOGDEST={dest}: cannot open {dest} (Not a directory); "
                           "a run would write its records to stderr instead\n")
    fresh = tmp_path / "new" / "deeper" / "debug_%i.log"
    proc = _info(AOTI_DEBUG_LOGDEST=str(fresh))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]     # the try left nothing behind


def test_info_puts_a_long_value_on_its_own_line(tmp_path):
    dest = str(tmp_path / "logs" / "debug_%i.log")
    lines = _info(AOTI_DEBUG_LOGDEST=dest).stdout.splitlines()
    i = lines.index(f"  AOTI_DEBUG_LOGDEST             {dest}")
    assert lines[i + 1] == " " * 54 + f"from AOTI_DEBUG_LOGDEST={dest}"


# -- names that are not ours ------------------------------------------------------------

LOGLEVLE = ("AOTI_DEBUG_LOGLEVLE is not a variable aoti-debug reads (did you mean AOTI_DEBUG_LOGLEVEL?); "
            "ignoring it")
NANCHECK = ("AOTI_DEBUG_NANCHECK is not a variable aoti-debug reads (did you mean AOTI_DEBUG_NAN_CHECK?); "
            "ignoring it")
REFUSED = ("no aoti-debug variable is set, only the unknown one(s) above: the compile is refused rather "
           "than build an artifact without the instrumentation asked for")


def test_an_unknown_name_is_named_with_the_closest_known_one():
    env = {"AOTI_DEBUG_LOGLEVLE": "5", "AOTI_DEBUG_NANCHECK": "raise", "AOTI_DEBUG_ZZZ": "1",
           "AOTI_DEBUG_CACHEDIR": "/c", "TORCHINDUCTOR_NAN_ASSERT": "1",
           # the project's own names that are not settings, and upstream's own variables: never named
           "AOTI_DEBUG_CACHE_DIR": "/c", "AOTI_DEBUG_RUNTIME_REGISTRY": "1:0x10:1", "AOTI_DEBUG_VENV": "v",
           "AOTI_DEBUG_CACHE": "c", "AOTI_DEBUG_FUZZ_EXAMPLES": "5", "AOTI_DEBUG_PREFIX": "/p",
           "TORCHINDUCTOR_SIZE_ASSERTS": "1", "AOT_INDUCTOR_DEBUG_COMPILE": "1", "AOTI_DEBUG_LOGLEVEL": "1"}
    assert S.unknown_variables(env) == [
        "AOTI_DEBUG_CACHEDIR is not a variable aoti-debug reads (did you mean AOTI_DEBUG_CACHE_DIR?); ignoring it",
        LOGLEVLE, NANCHECK, "AOTI_DEBUG_ZZZ is not a variable aoti-debug reads; ignoring it",
        "TORCHINDUCTOR_NAN_ASSERT is not a variable aoti-debug reads (did you mean TORCHINDUCTOR_NAN_ASSERTS?); "
        "ignoring it"]
    assert S.only_unknown(env) == []            # a known variable is set: the unknown ones are notes


def test_only_unknown_names_refuse_the_compile():
    env = {"AOTI_DEBUG_LOGLEVLE": "5", "AOTI_DEBUG_NANCHECK": "raise", "AOTI_DEBUG_CACHE_DIR": "/c"}
    assert S.only_unknown(env) == [LOGLEVLE[:-len("; ignoring it")], NANCHECK[:-len("; ignoring it")], REFUSED]
    assert S.only_unknown({"AOTI_DEBUG_CACHE_DIR": "/c"}) == []


def test_info_names_unknown_variables():
    proc = _info(AOTI_DEBUG_LOGLEVLE="5", AOTI_DEBUG_NANCHECK="raise")
    assert proc.returncode == 2             # a compile would be refused
    out = proc.stdout
    assert "\nunknown variables (not read by aoti-debug)\n" f"  {LOGLEVLE}\n  {NANCHECK}\n\nsystem\n" in out
    assert "  AOTI_DEBUG_LOGLEVEL            0                    from default" in out.splitlines()
    assert proc.stderr == f"\nerror: {REFUSED}\n"
    proc = _info(AOTI_DEBUG_LOGLEVLE="5", AOTI_DEBUG_LOGLEVEL="3")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert f"\nunknown variables (not read by aoti-debug)\n  {LOGLEVLE}\n\nsystem\n" in proc.stdout


def test_a_run_notes_an_unknown_name_once(tmp_path):
    log = tmp_path / "x.log"
    run_python("""
        from aoti_debug import log_api
        f = log_api(lambda x: x)
        f(1); f(2)
        """, env=clean_env(AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_NANCHECK="raise"))
    text = log.read_text()
    assert text.count(f"] note - settings\n  {NANCHECK}\n") == 1, text


# -- upstream's variables: taken over, and said so ---------------------------------------

def test_each_upstream_alias_says_which_variable_it_was_read_as():
    env = {"AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "2", "TORCHINDUCTOR_NAN_ASSERTS": "1",
           "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT": "Addmm, cpp_*", "AOTI_RUNTIME_CHECK_INPUTS": "yes",
           "TORCHINDUCTOR_SIZE_ASSERTS": "1"}        # upstream's own: not ours to mention
    assert S.upstream_notes(env) == [
        "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2 is read as AOTI_DEBUG_LOGLEVEL=5; "
        "Inductor's own printer is off",
        "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=Addmm, cpp_* is read as AOTI_DEBUG_KERNELS=addmm,cpp_*; "
        "Inductor's own printer is off",
        "AOTI_RUNTIME_CHECK_INPUTS=yes is read as AOTI_DEBUG_CHECK_INPUTS=1",
        "TORCHINDUCTOR_NAN_ASSERTS=1 is read as AOTI_DEBUG_NAN_CHECK=raise:naninf"]
    # ours set too: the alias is not read, and that is said; a bad alias is the compile's own error
    assert S.upstream_notes({"AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": " 1\t", "AOTI_DEBUG_LOGLEVEL": "3",
                             "TORCHINDUCTOR_NAN_ASSERTS": "7"}) == [
        "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=' 1\\t' is not read: AOTI_DEBUG_LOGLEVEL=3 is set and "
        "wins; Inductor's own printer is off"]
    assert S.upstream_notes({"AOTI_DEBUG_LOGLEVEL": "5"}) == []


def test_upstream_aliases_are_named_once_at_the_first_compile(tmp_path):
    proc = two_refused_compiles(tmp_path, AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER="2",
                                TORCHINDUCTOR_NAN_ASSERTS="1")
    assert proc.stderr == (
        "aoti-debug settings: AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2 is read as AOTI_DEBUG_LOGLEVEL=5; "
        "Inductor's own printer is off\n"
        "aoti-debug settings: TORCHINDUCTOR_NAN_ASSERTS=1 is read as AOTI_DEBUG_NAN_CHECK=raise:naninf\n")
