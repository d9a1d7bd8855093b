"""The `aoti-debug` command line through its real entry point, in fresh
processes: --version, a wrong option named with the command's own usage,
`replay` taking its directory either way, and a closed pipe ending quietly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import clean_env

from aoti_debug import __version__


def aoti_debug(*argv, stdout=subprocess.PIPE):
    return subprocess.run([sys.executable, "-m", "aoti_debug", *argv], env=clean_env(),
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


def test_version():
    proc = aoti_debug("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"aoti-debug {__version__}\n", "")


def test_a_wrong_option_is_named_with_the_commands_own_usage(tmp_path):
    proc = aoti_debug("nan-origin", str(tmp_path / "x.log"), "--bogus")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("usage: aoti-debug nan-origin [-h] [--rerun-ops]\n"
                           "                             LOG_OR_DUMP_DIR [LOG_OR_DUMP_DIR ...]\n"
                           "aoti-debug nan-origin: error: unrecognized arguments: --bogus\n")


def test_replay_takes_its_directory_as_an_argument_or_with_dir(tmp_path):
    empty = tmp_path / "dumps"
    empty.mkdir()
    positional, option = aoti_debug("replay", str(empty)), aoti_debug("replay", "--dir", str(empty))
    assert positional.returncode == option.returncode == 2
    assert positional.stderr == option.stderr
    assert positional.stderr.startswith(f"aoti-debug replay: {empty}")
    both = aoti_debug("replay", str(empty), "--dir", str(tmp_path))
    assert (both.returncode, both.stderr) == (
        2, f"aoti-debug replay: two dump directories given ({empty} and --dir {tmp_path}); give one\n")
    neither = aoti_debug("replay")
    assert (neither.returncode, neither.stderr) == (
        2, "aoti-debug replay: no dump directory given "
           "(expected `aoti-debug replay DUMP_DIR`, or --dir DUMP_DIR)\n")


@pytest.mark.parametrize("buffered", [False, True], ids=["unbuffered", "buffered"])
def test_a_closed_pipe_ends_quietly_with_status_141(buffered):
    """`aoti-debug info | head -1`: the reader is gone before the first line is
    written (stdout buffered, it meets the closed pipe only when flushed)."""
    env = clean_env()
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "aoti_debug", "info"], env=env,
                            stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    os.close(read)             # before the interpreter has even started
    _, stderr = proc.communicate(timeout=120)
    assert (proc.returncode, stderr) == (141, "")


CLOSED_STDOUT = ("standard output is closed, so nothing could be printed "
                 "(give it a file or a pipe, e.g. > out.txt or > /dev/null)\n")


@pytest.mark.parametrize("argv", [["info"], ["nan-origin", "run.log"]], ids=["info", "nan-origin"])
def test_a_closed_stdout_is_exit_2_with_one_line(argv, tmp_path):
    """`aoti-debug info >&-`: said in one line on stderr; with stderr closed too, the
    exit status alone says it."""
    (tmp_path / "run.log").write_text("")
    command = " ".join([sys.executable, "-m", "aoti_debug", *argv])
    proc = subprocess.run(f"exec {command} >&-", shell=True, cwd=tmp_path, env=clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"aoti-debug {argv[0]}: " + CLOSED_STDOUT)
    proc = subprocess.run(f"exec {command} >&- 2>&-", shell=True, cwd=tmp_path, env=clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", "")


def test_a_log_that_opens_but_cannot_be_read_is_exit_2_with_one_line():
    """/proc/self/mem is a regular file whose read fails (EIO)."""
    proc = aoti_debug("nan-origin", "/proc/self/mem")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "aoti-debug nan-origin: /proc/self/mem: cannot be read (Input/output error)\n")
