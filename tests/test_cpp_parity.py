"""The same package run from Python and from the C++ runner: the same records,
the same errors.  A C++ server gets exactly what a Python user gets."""

import os
import re
import subprocess

import pytest

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from conftest import PLANTED, clean_env, raised, records, run_package, saved_inputs, without_torch_logs

# the same package from both runtimes on every vector ISA (.ci/run's second pass)
pytestmark = [pytest.mark.torch_matrix, pytest.mark.isa_sensitive]


@pytest.fixture(scope="module")
def exe():
    return str(runner.build_runner())


@pytest.fixture(scope="module")
def mlp10(packages):
    return packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10")


def both(tmp_path, pt2, model, expr, **env):
    """Run from Python and from C++ with the same inputs and run-time variables."""
    inputs = saved_inputs(tmp_path, expr)
    py_log, cpp_log = tmp_path / "python.log", tmp_path / "cpp.log"
    py = run_package(pt2, model, inputs=f"torch.load({inputs!r})", AOTI_DEBUG_LOGDEST=str(py_log), **env)
    cpp = runner.run_package(pt2, inputs, env=clean_env(AOTI_DEBUG_LOGDEST=str(cpp_log), **env))
    read = lambda p: mask(p.read_text()) if p.exists() else ""
    return py, cpp, read(py_log), read(cpp_log)


@pytest.mark.parametrize("level", ["1", "3", "5"])
def test_python_and_cpp_write_identical_records(tmp_path, exe, mlp10, level):
    py, cpp, py_log, cpp_log = both(tmp_path, mlp10, "mlp", "models.example('mlp')[1]",
                                    AOTI_DEBUG_LOGLEVEL=level)
    assert cpp.returncode == 0, cpp.stderr
    assert len(records(py_log)) >= 7
    assert py_log == cpp_log


def test_sync_on_a_cpu_model_waits_for_nothing_and_says_nothing_in_both_runtimes(tmp_path, exe, mlp10):
    """AOTI_DEBUG_SYNC on a CPU artifact: CPU launches are synchronous, so there is no device to wait
    for and no note; a level-0 run is told that it waits for nothing, in the same words by both."""
    from aoti_debug.settings import SYNC_NEEDS_LEVEL
    py, cpp, py_log, cpp_log = both(tmp_path, mlp10, "mlp", "models.example('mlp')[1]",
                                    AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_SYNC="1")
    assert cpp.returncode == 0, cpp.stderr
    assert "note" not in py_log and len(records(py_log)) >= 7, py_log
    assert py_log == cpp_log
    (tmp_path / "0").mkdir()
    py, cpp, py_log, cpp_log = both(tmp_path / "0", mlp10, "mlp", "models.example('mlp')[1]",
                                    AOTI_DEBUG_LOGLEVEL="0", AOTI_DEBUG_SYNC="1")
    assert cpp.returncode == 0, cpp.stderr
    line = f"aoti-debug settings: {SYNC_NEEDS_LEVEL}"
    assert [l for l in py.stderr.splitlines() if l.startswith("aoti-debug")] == [line], py.stderr
    assert [l for l in cpp.stderr.splitlines() if l.startswith("aoti-debug")] == [line], cpp.stderr
    assert py_log == cpp_log == ""


def dump_tree(root):
    """{relative path with pids masked: content} of a dump directory: manifests
    with their per-process fields masked, tensors loaded, the .so copy by size."""
    import json
    import pathlib
    import torch
    out = {}
    for path in sorted(pathlib.Path(root).rglob("*")):
        if path.is_dir():
            continue
        rel = re.sub(r"\b\d+-", "PID-", str(path.relative_to(root)))
        if path.suffix == ".pt":
            t = torch.load(path, weights_only=True)
            ts = t if isinstance(t, (list, tuple)) else [t]
            out[rel] = [(x.dtype, tuple(x.shape), x.stride(), x.tolist()) for x in ts]
        elif path.name == "manifest.jsonl":
            lines = []
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                if "thread" in rec:       # the thread that ran it: the process's main thread here
                    assert rec.pop("thread") == rec["pid"], rec
                for key in ("time", "pid", "so"):
                    rec.pop(key, None)
                if "so_copy" in rec:
                    rec["so_copy"] = re.sub(r"\b\d+-", "PID-", rec["so_copy"])
                lines.append(rec)
            out[rel] = lines
        else:
            out[rel] = path.stat().st_size
    return out


def test_level_10_logs_and_dump_folders_are_the_same(tmp_path, exe, mlp10):
    dumps = {side: tmp_path / f"dumps-{side}" for side in ("python", "cpp")}
    inputs = saved_inputs(tmp_path, "models.example('mlp')[1]")
    py_log, cpp_log = tmp_path / "python.log", tmp_path / "cpp.log"
    run_package(mlp10, "mlp", inputs=f"torch.load({inputs!r})", AOTI_DEBUG_LOGLEVEL="10",
                AOTI_DEBUG_LOGDEST=str(py_log), AOTI_DEBUG_DUMP_DIR=str(dumps["python"]))
    cpp = runner.run_package(mlp10, inputs, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_LOGDEST=str(cpp_log),
                                                          AOTI_DEBUG_DUMP_DIR=str(dumps["cpp"])))
    assert cpp.returncode == 0, cpp.stderr
    assert mask(py_log.read_text()) == mask(cpp_log.read_text())
    py_tree, cpp_tree = dump_tree(dumps["python"]), dump_tree(dumps["cpp"])
    assert "PID-mlp-run1/inputs.pt" in py_tree
    assert "PID-mlp-run1/launch000001_out_buf0.pt" in py_tree
    assert len([k for k in py_tree if k.endswith(".pt")]) >= 8
    events = [r["event"] for r in py_tree["PID-mlp-run1/manifest.jsonl"]]
    assert events[:3] == ["run", "before", "after"] and events[-1] == "run-end"
    assert py_tree == cpp_tree


def test_cpp_process_honours_run_time_variables(tmp_path, exe, mlp10):
    inputs = saved_inputs(tmp_path, "models.example('mlp')[1]")
    dest = tmp_path / "logs" / "server_%i.log"
    proc = runner.run_package(mlp10, inputs, env=clean_env(AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(dest),
                                                           AOTI_DEBUG_KERNELS="*addmm*"))
    assert proc.returncode == 0, proc.stderr
    [log] = list((tmp_path / "logs").iterdir())
    assert re.fullmatch(r"server_\d+\.log", log.name)
    pid = log.name[len("server_"):-len(".log")]
    text = log.read_text()
    assert f"[pid {pid}] run 1 mlp thread=" in text
    heads = [r.splitlines()[0] for r in records(mask(text))]
    assert heads[0] == "[TIMESTAMP] [pid PID] run 1 mlp thread=TID"
    assert len(heads) == 4 and all(h.endswith("aoti_torch_cpu_addmm_out") for h in heads[1:])
    assert all(r.count("\n") == 1 for r in records(text))        # level 1, lowered from 10


def test_guard_violation_reaches_cpp_with_pythons_text(tmp_path, exe, dynamic):
    expr = "(torch.randn(65, 4).double(), torch.randn(3, 4))"
    py, cpp, _, _ = both(tmp_path, dynamic, "dynamic", expr, AOTI_DEBUG_LOGLEVEL="0")
    text = raised(py)
    assert text.startswith("aoti-debug: the inputs of model 'dynamic' do not match")
    assert cpp.returncode == 1
    assert cpp.stderr.endswith(f"aoti-debug-run: model run failed: {text}\n")


def test_nan_raise_reaches_cpp_with_pythons_text(tmp_path, exe, packages):
    planted = packages.get("planted", **PLANTED)
    py, cpp, py_log, cpp_log = both(tmp_path, planted, "planted", "models.planted_inputs('sqrt')",
                                    AOTI_DEBUG_LOGLEVEL="5")
    text = raised(py)
    assert text.startswith("aoti-debug NaN check: launch planted:1.")
    assert cpp.returncode == 1
    assert cpp.stderr.endswith(f"aoti-debug-run: model run failed: {text}\n")
    assert py_log == cpp_log


def test_a_saturated_fp8_value_reaches_cpp_with_pythons_records_and_text(tmp_path, exe, packages):
    """The fp8 model (models.py's Fp8Linear) with an input its float8_e4m3fn cast saturates, at
    level 5 under AOTI_DEBUG_NAN_CHECK_SAT=1: the same records (sat_count in the float8
    block) and the same error from the C++ runner."""
    fp8 = packages.get("fp8", **PLANTED)
    py, cpp, py_log, cpp_log = both(tmp_path, fp8, "fp8", "models.fp8_inputs(overflow=True)",
                                    AOTI_DEBUG_NAN_CHECK_SAT="1")
    text = raised(py)
    assert text.startswith("aoti-debug NaN check: launch fp8:1.1 ") and " and 1 saturated into buf0 " in text
    assert cpp.returncode == 1
    assert cpp.stderr.endswith(f"aoti-debug-run: model run failed: {text}\n")
    # launch 1.1 reads x (float32) and raises: its one float8 block, the quantized x
    assert py_log == cpp_log and py_log.count("      sat_count=") == py_log.count("      sat_count=1\n") == 1


@pytest.mark.parametrize("dest", ["stdout", "stderr"])
def test_a_log_on_a_closed_pipe_does_not_stop_the_run(tmp_path, exe, mlp10, dest):
    """`AOTI_DEBUG_LOGLEVEL=5 aoti-debug-run ... | head -1` once head has exited: the log's
    writes fail, the run goes on and its outputs are written (the log on stdout: one line
    on stderr says the records are lost; on stderr: nothing can be said)."""
    import torch
    inputs = saved_inputs(tmp_path, "models.example('mlp')[1]")
    quiet = runner.run_package(mlp10, inputs, outputs=tmp_path / "quiet.pt",
                               env=clean_env(AOTI_DEBUG_LOGLEVEL="0"))
    assert quiet.returncode == 0, quiet.stderr
    read, write = os.pipe()
    os.close(read)
    closed = {"stdout": write} if dest == "stdout" else {"stderr": write}
    try:
        proc = subprocess.run([exe, mlp10, "--inputs", inputs, "--outputs", str(tmp_path / "o.pt")],
                              **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **closed},
                              env=clean_env(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=dest),
                              text=True, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 0
    got, expected = runner.load_outputs(tmp_path / "o.pt"), runner.load_outputs(tmp_path / "quiet.pt")
    assert len(got) == len(expected) > 0 and all(torch.equal(g, e) for g, e in zip(got, expected))
    if dest == "stdout":
        assert without_torch_logs(proc.stderr) == ("aoti-debug: cannot write the log to stdout (Broken pipe); "
                                                   "records are lost until a write succeeds\n")
    else:   # the runner's own lines are all there
        lines, quiet_lines = proc.stdout.splitlines(), quiet.stdout.splitlines()
        assert lines[:len(got)] == quiet_lines[:len(got)] and lines[0].startswith("output 0: shape=")
        assert re.fullmatch(r"ran 1 time, [\d.]+ ms per run", lines[len(got)])
        assert lines[len(got) + 1:] == [f"outputs written to {tmp_path / 'o.pt'}"]
