"""Level 0 is silent, and a log's timestamps never go backwards.

Level 0 writes no record and no banner: what the user must still see (a
NaN-check warning, a refused setting) goes to stderr, one line each, as
`aoti-debug <topic>: <message>`, from the C++ runtime in an AOTI artifact
and from the Python runtime of torch.compile alike.  Every header line is
stamped under the write lock, so records formatted earlier by another thread
never appear later with an older time.  Fresh processes throughout.
"""

import re

import pytest

from aoti_debug.runtime import format as fmt
from conftest import PLANTED, TESTS, clean_env, run_package, run_python
from models import line_of

pytestmark = pytest.mark.torch_matrix

LEVEL = "expected one of 0, 1, 3, 5, 10"


@pytest.fixture(scope="module")
def planted_all(packages):
    return packages.get("planted", AOTI_DEBUG_COMPILE="all")


def outputs_only(text):
    return all(line.startswith("OUTPUT ") for line in text.splitlines())


def test_aoti_level_0_warns_on_stderr_only(planted_all):
    proc = run_package(planted_all, "planted", inputs="models.planted_inputs('log')",
                       AOTI_DEBUG_NAN_CHECK="warn", AOTI_DEBUG_LOGLEVEL="7")
    assert outputs_only(proc.stdout) and proc.stdout.count("OUTPUT") == 4
    lines = proc.stderr.splitlines()
    ours = [line for line in lines if line.startswith("aoti-debug")]
    assert ours[0] == (f"aoti-debug settings: AOTI_DEBUG_LOGLEVEL='7' is not valid: {LEVEL}; "
                       "keeping 0")
    kernel = re.fullmatch(
        r"aoti-debug nan-check: launch planted:1\.\d+ (cpp_fused_\w+) \(source (\S+)\) wrote 1 NaN into "
        r"buf\d+ \(first at flat index 0\); its inputs held no NaN, so this launch is where NaN "
        r"first appears", ours[1])
    assert kernel and kernel.group(2) == line_of("planted.log")
    assert ours[2:] == [f"aoti-debug nan-check: run 1: NaN/Inf in 1 launch: {kernel.group(1)} x1"]


def test_aoti_level_0_raise_says_it_once_in_the_exception(planted_all):
    proc = run_package(planted_all, "planted", inputs="models.planted_inputs('log')",
                       AOTI_DEBUG_NAN_CHECK="raise")
    assert re.match(r"RAISED: aoti-debug NaN check: launch planted:1\.\d+ cpp_fused_\w+ \(source "
                    + re.escape(line_of("planted.log")), proc.stdout), proc.stdout
    assert "aoti-debug nan-check:" not in proc.stderr and "=" * 80 not in proc.stderr


def test_aoti_level_0_with_nothing_to_say_writes_nothing(planted_all):
    proc = run_package(planted_all, "planted", AOTI_DEBUG_NAN_CHECK="warn", AOTI_DEBUG_LOGLEVEL="0")
    assert outputs_only(proc.stdout) and "aoti-debug" not in proc.stderr


def test_torch_compile_level_0_warns_on_stderr_only(tmp_path):
    code = """
        import torch, aoti_debug
        def f(x):
            return torch.log(x) * 2
        with aoti_debug.instrument(nan_check="warn"):
            y = torch.compile(f)(torch.tensor([1.0, -1.0, 2.0]))
        print("OUTPUT", y.isnan().sum().item())
    """
    proc = run_python(code, env=clean_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache")))
    assert proc.stdout == "OUTPUT 1\n"
    ours = [line for line in proc.stderr.splitlines() if line.startswith("aoti-debug")]
    # (source -: the function comes from `python -c`, which has no file)
    assert ours == [
        "aoti-debug nan-check: launch model:1.1 cpp_fused_log_mul_0 (source -) wrote 1 NaN into buf0 "
        "(first at flat index 1); its inputs held no NaN, so this launch is where NaN first appears",
        "aoti-debug nan-check: run 1: NaN/Inf in 1 launch: cpp_fused_log_mul_0 x1"]


# -- timestamps ----------------------------------------------------------------------

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\] \[pid \d+\] ", re.M)


def test_timestamps_never_go_backwards_across_threads_notes_and_the_banner(packages, tmp_path):
    log = tmp_path / "log.txt"
    pt2 = packages.get("planted", **PLANTED)
    code = f"""
        import sys, threading; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({pt2!r})
        args = models.planted_inputs('sqrt')
        def work():
            for _ in range(20):
                m(*args)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
    """
    run_python(code, env=clean_env(AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_NAN_CHECK="warn",
                                   AOTI_DEBUG_KERNELS="[", AOTI_DEBUG_LOGLEVEL="3"))
    text = log.read_text()
    stamps = STAMP.findall(text)
    assert len(stamps) > 80 * 4, len(stamps)
    assert text.count("aoti-debug - System Information") == 1
    assert " note - settings\n" in text and " note - nan-check\n" in text
    assert stamps == sorted(stamps)


def test_the_python_writer_stamps_every_header_with_the_time_of_the_write():
    text = ("[2026-11-24 01:00:00.000002] [pid 7] note - settings\n  x [1] y\n"
            "[2026-11-24 01:00:00.000001] [pid 7] run 1 m\n  [not a header\n")
    assert fmt.restamp(text, "2026-11-24 02:00:00.000000") == (
        "[2026-11-24 02:00:00.000000] [pid 7] note - settings\n  x [1] y\n"
        "[2026-11-24 02:00:00.000000] [pid 7] run 1 m\n  [not a header\n")
