"""The analysis commands on logs written by real artifacts: AOTI packages run from
Python (C++ shim records) and torch.compile (Python wrapper records)."""

import re

import pytest

from aoti_debug.cli import main
from conftest import PLANTED, TESTS, clean_env, run_package, run_python

# torch_matrix (every tested torch release): the tests marked below, where the
# installed Inductor decides the result; the rest of the file runs on the default one.

models = pytest.importorskip("models")     # tests/models.py (imports torch)


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def planted_logs(packages, tmp_path_factory):
    """Level-5 logs of the planted model: clean inputs twice, then the sqrt bug."""
    pt2 = packages.get("planted", **PLANTED)
    folder = tmp_path_factory.mktemp("planted-logs")
    logs = {}
    for name, bug in (("clean", None), ("clean2", None), ("sqrt", "sqrt")):
        logs[name] = str(folder / f"{name}.log")
        run_package(pt2, "planted", inputs=f"models.planted_inputs({bug!r})", AOTI_DEBUG_LOGLEVEL="5",
                    AOTI_DEBUG_NAN_CHECK="off", AOTI_DEBUG_LOGDEST=logs[name])
    return logs


@pytest.mark.torch_matrix
def test_nan_origin_names_the_sqrt_kernel_and_its_line(planted_logs, capsys):
    code, out, err = cli(capsys, "nan-origin", planted_logs["sqrt"])
    lines = out.splitlines()
    assert (code, err) == (1, "")
    assert re.fullmatch(r"NaN/Inf origin: launch planted:1\.\d+ cpp_fused_\w*sqrt\w* \(pid \d+, sqrt\.log:\d+\)", lines[0])
    assert lines[1] == f"  source: {models.line_of('planted.sqrt')}"
    assert "in b: shape=(5,) dtype=torch.float32 min=-4.000000 max=1.000000 mean=0.000000 " \
           "nan_count=0 inf_count=0" in out
    assert cli(capsys, "nan-origin", planted_logs["clean"]) == (
        0, "no NaN/Inf in the 3 launches of the log\n", "")


@pytest.mark.torch_matrix
def test_diff_of_two_clean_runs_agrees_and_the_sqrt_run_diverges_at_its_line(planted_logs, capsys):
    code, out, _ = cli(capsys, "diff", planted_logs["clean"], planted_logs["clean2"])
    assert code == 0 and out.splitlines()[-1] == (     # one artifact, one input: the same bits
        "A and B are identical bit for bit: the outputs of 3 aligned launch(es) and the model's "
        "outputs have equal content hashes")
    code, out, _ = cli(capsys, "diff", planted_logs["clean"], planted_logs["sqrt"])
    assert code == 1
    assert re.search(r"^first divergence: A planted:1\.\d+ cpp_fused_\w*sqrt\w* / B ", out, re.M)
    assert f"  source: {models.line_of('planted.sqrt')}\n" in out


def test_report_of_a_real_log(planted_logs, tmp_path, capsys):
    page = tmp_path / "r.html"
    code, out, _ = cli(capsys, "report", planted_logs["sqrt"], "--against", planted_logs["clean"],
                       "-o", str(page))
    assert code == 0 and "NaN/Inf origin: planted:1." in out and "first divergence: planted:1." in out
    path, line = models.line_of("planted.sqrt").rsplit(":", 1)
    assert f'href="file://{path}#L{line}">{path}:{line}</a>' in page.read_text()


# torch.compile's wrapper and the AOTI artifact of the same model, run on the same input
COMPILE = r"""
import os, sys
sys.path.insert(0, {tests!r})
import torch, models, aoti_debug
model, args, _ = models.seeded("mlp")
model.requires_grad_(False)
with torch.no_grad(), aoti_debug.instrument(level=5):
    torch.compile(model)(*args)
"""


@pytest.mark.torch_matrix
def test_torch_compile_and_aoti_logs_of_one_model_agree(packages, aoti_cache, tmp_path, capsys):
    compiled = tmp_path / "compile.log"
    run_python(COMPILE.format(tests=TESTS), timeout=600,
               env=clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGDEST=compiled))
    aoti = tmp_path / "aoti.log"
    run_package(packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10"), "mlp", AOTI_DEBUG_LOGLEVEL="5",
                AOTI_DEBUG_LOGDEST=str(aoti))
    code, out, _ = cli(capsys, "diff", str(compiled), str(aoti))
    assert code == 0, out
    assert "the logs agree: 6 aligned launch(es) compared" in out \
        or "A and B are identical bit for bit: the outputs of 6 aligned launch(es)" in out, out


@pytest.mark.parametrize("bug", ["log", "sqrt", "div", "overflow"])
def test_nan_origin_names_the_line_of_each_planted_bug(packages, tmp_path, capsys, bug):
    """Whatever Inductor fuses (torch 2.13 fuses the log, division and overflow
    branches into one kernel, 2.15 the log and square-root ones), the line named
    is the bug's own, from the record's output-source lines."""
    pt2 = packages.get("planted", **PLANTED)
    log = str(tmp_path / f"{bug}.log")
    run_package(pt2, "planted", inputs=f"models.planted_inputs({bug!r})", AOTI_DEBUG_LOGLEVEL="5",
                AOTI_DEBUG_NAN_CHECK="off", AOTI_DEBUG_LOGDEST=log)
    code, out, err = cli(capsys, "nan-origin", log)
    assert (code, err) == (1, "")
    assert out.splitlines()[1] == f"  source: {models.line_of('planted.' + bug)}", out


@pytest.fixture(scope="module")
def noisy_logs(packages, tmp_path_factory):
    """Two level-5 logs of one artifact whose custom op adds noise below any tolerance."""
    pt2 = packages.get("noisy", AOTI_DEBUG_LOGLEVEL="5")
    folder = tmp_path_factory.mktemp("noisy-logs")
    logs = [str(folder / f"{name}.log") for name in ("a", "b")]
    for log in logs:
        run_package(pt2, "noisy", AOTI_DEBUG_LOGDEST=log)
    return logs


def test_diff_names_the_first_non_deterministic_launch_and_nothing_before(noisy_logs, capsys):
    a, b = noisy_logs
    code, out, err = cli(capsys, "diff", a, b)
    op = "aotid_test.noisy_add.default"
    # within the tolerances the runs agree; their bits part at the noisy op, not before
    assert (code, err) == (0, "")
    lines = out.splitlines()[2:]
    assert re.fullmatch(r"noisy:1\.1  noisy:1\.1  cpp_fused_\w+_0 +identical  0 \(bit for bit\)", lines[1])
    assert re.fullmatch(rf"noisy:1\.2  noisy:1\.2  {op} +ok +(0 \(bits differ\)|out buf\d+ \w+ delta \S+)", lines[2])
    assert re.fullmatch(rf"first bitwise difference: A noisy:1\.2 {op} / B noisy:1\.2 {op} \(out buf\d+\); "
                        r"1 of the 1 aligned pair\(s\) before it identical", lines[-2])      # buffer numbers vary by release
    assert lines[-1] == "the logs agree: 3 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"
    # asked for equal bits, the op's launch is the first divergence
    code, out, _ = cli(capsys, "diff", "--exact", a, b)
    lines = out.splitlines()
    assert code == 1 and f"first divergence: A noisy:1.2 {op} / B noisy:1.2 {op}" in lines
    assert lines[lines.index(f"first divergence: A noisy:1.2 {op} / B noisy:1.2 {op}") + 1] == \
        f"  source: {models.line_of('noisy.op')}"
    assert re.fullmatch(r"  out buf\d+ hash [0-9a-f]{16} vs [0-9a-f]{16}", lines[lines.index("  nodes:  noisy_add") + 1])
    # a log against itself is identical bit for bit, the model's outputs included
    assert cli(capsys, "diff", a, a)[1].splitlines()[-1] == (
        "A and B are identical bit for bit: the outputs of 3 aligned launch(es) and the model's "
        "outputs have equal content hashes")
