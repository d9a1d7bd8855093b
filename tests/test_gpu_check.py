"""scripts/gpu-check.sh exactly as written, on this machine as on the GPU machine
it is for (docs/gpu.md): the interpreter whose torch is a CUDA build (here the
one running the tests), pip cut off from every index, a `python3.11` on PATH
that must never run.  Without a GPU: the header, the preflight, the layered
venv, every GPU test skipped with its reason, exit 3, and its files under OUT."""

import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import REPO, clean_env

pytestmark = [pytest.mark.torch_matrix, pytest.mark.slow,
              pytest.mark.skipif(torch.version.cuda is None or torch.cuda.is_available(),
                                 reason=f"torch {torch.__version__}: the GPU check's set-up takes a CUDA build of "
                                        "torch; here it would not be the one the script picks"
                                 if torch.version.cuda is None else "a GPU is here: scripts/gpu-check.sh runs it")]

SCRIPT = os.path.join(REPO, "scripts", "gpu-check.sh")


def gpu_check(tmp_path, stubs=None, **env):
    """Run the script with pip offline (an index URL nothing answers) and a python3.11 that
    records being called; returns (CompletedProcess, whether python3.11 ran)."""
    bin_dir = tmp_path / "stubs"
    bin_dir.mkdir(exist_ok=True)
    called = tmp_path / "python3.11-was-called"
    for name, body in {"python3.11": f"touch {called}; exit 99", **(stubs or {})}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    # TORCH and PYTHON choose the interpreter: only what the test gives
    full = {k: v for k, v in clean_env().items() if not k.startswith("GPU_CHECK_") and k not in ("TORCH", "PYTHON")}
    full.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PIP_NO_INDEX="1",
                PIP_INDEX_URL="http://127.0.0.1:9/simple", AOTI_DEBUG_VENV=str(tmp_path / "venv-gpu"), **env)
    proc = subprocess.run(["bash", SCRIPT], env=full, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    return proc, called.exists()


def test_without_a_gpu_it_skips_every_gpu_test_and_exits_3(tmp_path):
    out = tmp_path / "out"
    proc, called = gpu_check(tmp_path, PYTHON=sys.executable, OUT=str(out))
    text = proc.stdout
    assert proc.returncode == 3, text + proc.stderr
    assert not called
    lines = text.splitlines()
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    fingerprint = subprocess.run(["bash", os.path.join(REPO, "scripts", "source-fingerprint.sh")],
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert lines[0] == "==== aoti-debug GPU check ===="
    assert re.fullmatch(r"date: \d{4}-\d\d-\d\d \d\d:\d\d UTC, limit 480 s, 300 s a test", lines[1]), lines[1]
    assert re.fullmatch(rf"commit: {commit}( \(with uncommitted changes\))?", lines[2]), lines[2]
    assert lines[3] == (f"sources: {fingerprint}  (scripts/source-fingerprint.sh at a commit gives the same)")
    preflight = dict(re.findall(r"^([\w+-]+): +(.*)$", text.split("---- preflight ----\n", 1)[1]
                                .split("----", 1)[0], re.M))
    assert list(preflight) == ["python", "torch", "GPU", "driver", "triton", "nvcc", "cmake", "ninja", "gcc",
                               "g++", "pytest", "pytest-timeout", "numpy", "OUT"]
    assert preflight["python"].startswith(f"{sys.version.split()[0]} {sys.executable}")
    assert preflight["torch"] == f"{torch.__version__}, CUDA {torch.version.cuda}"
    assert preflight["GPU"] == "none: torch.cuda.is_available() is False (the GPU tests will be skipped)"
    assert preflight["OUT"] == str(out)
    assert f"set-up: aoti-debug installed in {tmp_path / 'venv-gpu'}, over {sys.executable} " \
           f"(torch {torch.__version__})" in lines
    skipped = [line for line in lines if line.startswith("SKIPPED ")]
    assert len(skipped) == 13 and all(line.endswith(
        f": no CUDA device (torch {torch.__version__}): these tests run only on an NVIDIA GPU "
        "(scripts/gpu-check.sh)") for line in skipped), skipped
    assert skipped[0].startswith("SKIPPED  test_gpu_nan_check_and_nan_origin")    # the most telling first
    assert "summary: 0 passed, 0 failed, 0 errors, 13 skipped in 0 s" in lines
    assert lines[-2:] == ["not run: no CUDA device",
                          "gpu-check: no CUDA device here: nothing was checked on a GPU (exit 3)"]
    assert sorted(os.listdir(out)) == ["bench.txt", "build-logs.tar.gz", "gpu-check.log", "junit.xml",
                                       "pytest.log"]
    assert (out / "gpu-check.log").read_text() == text
    assert 'skipped="13"' in (out / "junit.xml").read_text()


def test_without_an_interpreter_that_has_a_cuda_torch_set_up_fails_with_4(tmp_path):
    stubs = {"python3": "echo 'no torch here'; exit 1", "python": "echo 'no torch here'; exit 1"}
    proc, called = gpu_check(tmp_path, stubs=stubs, PYTHON=str(tmp_path / "missing"),
                             GPU_CHECK_COMMIT="0123456789ab")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert not called
    lines = proc.stdout.splitlines()
    assert lines[2] == "commit: 0123456789ab"
    assert lines[4:] == [
        "gpu-check: no interpreter here has a tested CUDA build of torch (2.11-2.15):",
        f"  {tmp_path / 'missing'}: not found",
        f"  {tmp_path / 'stubs' / 'python3'}: no torch here",
        f"  {tmp_path / 'stubs' / 'python'}: no torch here",
        "  (PYTHON=/path/to/python names one; TORCH=2.15.0 downloads one into a venv)",
        "gpu-check: set-up failed: nothing was tested (exit 4)"]


def test_a_malformed_limit_is_refused_with_2(tmp_path):
    proc, _ = gpu_check(tmp_path, GPU_CHECK_LIMIT="8m")
    assert proc.returncode == 2
    assert proc.stderr == "gpu-check: GPU_CHECK_LIMIT='8m' is not a whole number of seconds\n"
