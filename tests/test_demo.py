"""The README's first command: the demo must keep finding its planted bug."""

import re
import subprocess
import sys

import pytest

from conftest import clean_env

pytestmark = pytest.mark.torch_matrix


@pytest.mark.slow
def test_demo_names_the_planted_kernel_and_line(tmp_path):
    import aoti_debug.demo as demo
    line = next(n for n, text in enumerate(open(demo.__file__), 1) if "torch.log(centred)" in text)
    # run as scripts/demo.sh runs it: the venv not activated (the next steps then name its CLI by
    # path), whether or not the shell running the tests activated it
    proc = subprocess.run([sys.executable, "-m", "aoti_debug.demo", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, env=clean_env(PATH="/usr/bin:/bin"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "eager output has NaN: True" in out
    assert "the two logs are identical once timestamps and pids are masked: True" in out
    assert re.search(r"^NaN/Inf origin: launch scorer:1\.\d+ cpp_fused_\w*log\w*", out, re.M), out
    assert f"  source: {demo.__file__}:{line}\n" in out
    assert re.search(r"later launches show NaN/Inf too \(victims\): ", out)
    # step 4 shows whole records: every tensor block that opens also closes
    excerpt = out.split("=== 4.", 1)[1].split("=== 5.", 1)[0].splitlines()[1:]
    body = [l.strip() for l in excerpt if l.strip()]
    assert body[0] == body[-1] == "…"
    assert body.count("Tensor(") == body.count(")") > 0
    assert sum(l.startswith("stride=") for l in body) == body.count("Tensor(")
    # the next steps run as printed, from a shell whose PATH does not know the venv
    steps = out.split("=== next: try these (ready to copy)\n", 1)[1].splitlines()
    commands = [l.strip() for l in steps if l.strip() and not l.strip().startswith("#")]
    assert [c.split()[1] for c in commands] == ["report", "diff"]
    env = clean_env(PATH="/usr/bin:/bin")
    report = subprocess.run(commands[0], shell=True, env=env, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    diff = subprocess.run(commands[1], shell=True, env=env, capture_output=True, text=True, timeout=300)
    assert diff.returncode == 0, diff.stdout + diff.stderr
