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
    proc = subprocess.run([sys.executable, "-m", "aoti_debug.demo", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "eager output has NaN: True" in out
    assert "the two logs are identical once timestamps and pids are masked: True" in out
    assert re.search(r"^NaN/Inf origin: launch 1\.\d+ cpp_fused_\w*log\w*", out, re.M), out
    assert f"  source: {demo.__file__}:{line}\n" in out
    assert re.search(r"later launches show NaN/Inf too \(victims\): ", out)
