"""Compile once, decide at run time: AOTI_DEBUG_COMPILE=all.

An artifact compiled with it carries level 10, NaN/Inf checks and input
guards, and runs with all of them off until the run-time variables ask; the
other compile-time variables become what a run does while its own are unset.
Every run is a fresh process, as a server would be.
"""

import json
import re

import pytest

from aoti_debug import settings
from aoti_debug.analysis.mask import mask
from conftest import PLANTED, TESTS, clean_env, raised, records, run_package, run_python
from models import line_of

pytestmark = pytest.mark.torch_matrix

ALL = dict(AOTI_DEBUG_COMPILE="all")


@pytest.fixture(scope="module")
def planted_all(packages):
    return packages.get("planted", **ALL)


# -- the setting -------------------------------------------------------------------

def test_all_compiles_in_everything_and_keeps_what_was_asked_for_as_defaults():
    asked = settings.read({"AOTI_DEBUG_COMPILE": " ALL ", "AOTI_DEBUG_LOGLEVEL": "1",
                           "AOTI_DEBUG_KERNELS": "*relu*"})
    built = asked.compiled()
    assert (built.level, built.kernels, str(built.nan_check), built.check_inputs) == \
        (10, (), "raise:naninf", True)
    assert built.run_defaults == settings.RunDefaults(level=1, kernels=("*relu*",), check_inputs=False, nan_check=settings.NanCheck(), memcheck="off", blackbox=0)
    assert built.defaults == built.run_defaults
    # without it, what is asked for is what is compiled in, and what runs do
    plain = settings.read({"AOTI_DEBUG_LOGLEVEL": "3"})
    assert plain.compiled() is plain and plain.defaults == settings.RunDefaults(
        level=3, kernels=(), check_inputs=False, nan_check=settings.NanCheck(), memcheck="off", blackbox=0)
    assert settings.read({"AOTI_DEBUG_COMPILE": "all"}).anything_compiled_in
    assert not settings.read({"AOTI_DEBUG_COMPILE": "selected"}).anything_compiled_in


def test_a_bad_compile_mode_names_what_is_accepted():
    with pytest.raises(settings.SettingsError) as info:
        settings.read({"AOTI_DEBUG_COMPILE": "everything"})
    assert info.value.problems == [
        "AOTI_DEBUG_COMPILE='everything' is not valid: expected selected (what the other "
        "variables ask for) or all (level 10, NaN/Inf checks and input guards, off at run "
        "time until asked for)"]
    with pytest.raises(settings.SettingsError, match=r"^argument compile='x' is not valid"):
        settings.read(overrides={"compile": "x"})


# -- an AOTI artifact -------------------------------------------------------------

def test_off_at_run_time_until_asked_for(packages, planted_all):
    plain = run_package(packages.get("planted", **PLANTED), "planted", AOTI_DEBUG_LOGDEST="stderr")
    got = run_package(planted_all, "planted")
    # nothing written anywhere, and the same outputs as another build of it
    assert got.stdout == plain.stdout and got.stdout.count("OUTPUT") == 4
    assert "aoti-debug" not in got.stderr
    # a NaN goes unchecked...
    got = run_package(planted_all, "planted", inputs="models.planted_inputs('log')")
    assert "RAISED" not in got.stdout and got.stdout.splitlines()[0].split()[2] == "nan"
    # ...and a wrong input unguarded (7 elements where 6 were compiled for: reads 6)
    got = run_package(planted_all, "planted", inputs="(torch.ones(7),) + models.planted_inputs()[1:]")
    assert "RAISED" not in got.stdout and got.stdout.count("OUTPUT") == 4


def test_the_nan_check_and_guards_are_one_variable_away(planted_all):
    proc = run_package(planted_all, "planted", inputs="models.planted_inputs('log')",
                       AOTI_DEBUG_NAN_CHECK="raise")
    assert re.fullmatch(r"aoti-debug NaN check: launch planted:1\.\d+ cpp_fused_\w+ \(source (\S+)\) wrote 1 "
                        r"NaN into buf\d+ \(first at flat index 0\); its inputs held no NaN, so "
                        r"this launch is where NaN first appears", raised(proc)).group(1) \
        == line_of("planted.log")
    proc = run_package(planted_all, "planted", inputs="(torch.ones(7),) + models.planted_inputs()[1:]",
                       AOTI_DEBUG_CHECK_INPUTS="1")
    assert raised(proc) == ("aoti-debug: the inputs of model 'planted' do not match what it "
                            "was compiled for:\n  a.shape[0] is 7, expected 6")


def test_level_10_is_one_variable_away(tmp_path, planted_all):
    log, dumps = tmp_path / "log.txt", tmp_path / "dumps"
    proc = run_package(planted_all, "planted", AOTI_DEBUG_LOGLEVEL="10",
                       AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_DUMP_DIR=str(dumps))
    assert proc.stdout.count("OUTPUT") == 4 and proc.stderr.count("aoti-debug") == 0
    text = mask(log.read_text())
    assert [r.split("\n", 1)[0] for r in records(text)][0] == "[TIMESTAMP] [pid PID] run 1 planted thread=TID"
    assert "      nan_count=0\n" in text        # statistics: level 5 and up
    [run_dir] = [p for p in dumps.iterdir() if p.is_dir()]
    events = [(e["event"], e.get("id")) for e in map(json.loads, (run_dir / "manifest.jsonl").open())]
    assert events == [("run", None), ("before", "1.1"), ("after", "1.1"), ("before", "1.2"),
                      ("after", "1.2"), ("before", "1.3"), ("after", "1.3"), ("run-end", None)]


def test_compile_time_values_become_the_run_time_defaults(packages):
    pt2 = packages.get("mlp", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_KERNELS="*relu*", **ALL)

    def heads(**env):
        proc = run_package(pt2, "mlp", **env)
        return [r.split("\n", 1)[0] for r in records(mask(proc.stdout)) if r.startswith("[")]

    assert heads() == ["[TIMESTAMP] [pid PID] run 1 mlp thread=TID",
                       "[TIMESTAMP] [pid PID] launch mlp:1.2 cpp_fused_relu_0",
                       "[TIMESTAMP] [pid PID] launch mlp:1.4 cpp_fused_relu_1"]
    # more than the defaults, up to what is compiled in
    assert heads(AOTI_DEBUG_KERNELS="*") == [
        "[TIMESTAMP] [pid PID] run 1 mlp thread=TID"] + [
        f"[TIMESTAMP] [pid PID] launch mlp:1.{k} {name}" for k, name in enumerate(
            ["aoti_torch_cpu_addmm_out", "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out",
             "cpp_fused_relu_1", "aoti_torch_cpu_addmm_out", "cpp_fused__softmax_2"], 1)]
    assert heads(AOTI_DEBUG_LOGLEVEL="3")[-2:] == [
        "[TIMESTAMP] [pid PID] launch-end mlp:1.4 cpp_fused_relu_1",
        "[TIMESTAMP] [pid PID] run-end 1 mlp"]
    assert heads(AOTI_DEBUG_LOGLEVEL="0") == []


# -- torch.compile ------------------------------------------------------------------

def test_torch_compile_with_instrument_compile_all(tmp_path):
    code = f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models, aoti_debug
        model, args, _ = models.seeded("mlp")
        with torch.no_grad(), aoti_debug.instrument(compile="all", level=1, kernels="*relu*"):
            torch.compile(model)(*args)
    """
    cache = dict(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))

    def heads(**env):
        proc = run_python(code, env=clean_env(**cache, **env))
        return [r.split("\n", 1)[0] for r in records(mask(proc.stdout))]

    # one kernel serves both ReLUs here
    assert heads() == ["[TIMESTAMP] [pid PID] run 1 model thread=TID",
                       "[TIMESTAMP] [pid PID] launch model:1.2 cpp_fused_relu_0",
                       "[TIMESTAMP] [pid PID] launch model:1.4 cpp_fused_relu_0"]
    level5 = heads(AOTI_DEBUG_LOGLEVEL="5")
    assert level5[-2:] == ["[TIMESTAMP] [pid PID] launch-end model:1.4 cpp_fused_relu_0",
                           "[TIMESTAMP] [pid PID] run-end 1 model"]
