import os
import re
import subprocess
import sys
import textwrap

import pytest

from aoti_debug.settings import ALL_NAMES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clean_env(**extra):
    """The test process's environment without any aoti-debug variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ALL_NAMES and k != "AOTI_DEBUG_RUNTIME_REGISTRY"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(code, env=None, cwd=None, timeout=300, check=True):
    """Run `code` in a fresh interpreter; returns the CompletedProcess (text mode)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env=clean_env() if env is None else env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


BANNER = re.compile(r"^={80}\n\[[^\n]*\] aoti-debug - System Information\n={80}\n(?:[^\n]*\n)*?={80}\n", re.M)


def banners(text):
    return BANNER.findall(text)


def records(text):
    """Split log text into records (header line + body lines), banners dropped."""
    out = []
    for line in BANNER.sub("", text).splitlines(keepends=True):
        if line.startswith("[") or not out:
            out.append(line)
        else:
            out[-1] += line
    return out


@pytest.fixture
def tmp_log(tmp_path):
    return tmp_path / "log.txt"
