"""docs/tutorial.md runs as written: every command it shows, in document
order, must exit as shown and print what is shown.

Conventions of the tutorial (its introduction states them for readers too):

* Commands are the lines starting with "$ " inside ```console blocks; a
  command whose line ends with "\\" continues on the next line.  The lines
  after a command, up to the next command or the end of the block, are its
  expected output: stdout and stderr together, as a terminal shows them.
* Exit status: a command ending with the comment "# exit N" must exit with
  status N; every other command must exit with 0.
* Abridged output: a line holding only "..." (indentation allowed) stands
  for any number of lines, none included.  Every other line must match,
  after trailing whitespace is stripped and after masking: exactly, except
  that floating-point numbers agree to a tolerance (tests/textmatch.py:
  relative 1e-5, launch indices and integers exact), since the shown
  output was recorded on one CPU and the kernels' last digits depend on
  the vector ISA the machine runs.
* Masking, applied to the shown and the actual output alike: timestamps,
  "[pid N]" and 0x pointers (aoti_debug.analysis.mask), "pid N" anywhere
  else, the process id that %i puts into a log name ("worker_4242.log"),
  and timings ("1.465 ms").  In the actual output the scratch checkout's
  path is written "~/aoti-debug" (the tutorial's name for the reader's
  checkout), and bash's report of a command killed by a signal
  ("...: line 1:  4242 Segmentation fault   python run.py ...") is reduced
  to what an interactive shell prints ("Segmentation fault").
* The only other fenced blocks allowed are ```python blocks, and each must
  appear verbatim in one of examples/tutorial/*.py: code the tutorial
  quotes cannot drift from the code it runs.

The commands run one after another in a single bash process, so `cd` and
shell variables carry over, started at the root of a scratch checkout that
holds a copy of examples/tutorial (the commands write their files there)
and examples/custom_op (a link: the op's sources are only read, and the
library built from them is reused), and .venv (the running environment).  The environment is the test's without
any aoti-debug variable (conftest.clean_env), with the venv's bin first on
PATH, PYTHONUNBUFFERED=1 (line-buffered like a terminal, so stdout and
stderr interleave as they would on screen), the session's Inductor cache,
and MYLIB_BUILD_DIR pointing at the session's build of the custom op.  The
C++ runner is built (or found in its cache) before the first command.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from typing import List, Optional

import pytest

from aoti_debug.analysis.mask import mask_line
from conftest import REPO, clean_env, without_torch_logs
from textmatch import matches

# output recorded on another CPU, compared on this one (.ci/run: on a second vector ISA too)
pytestmark = pytest.mark.isa_sensitive

TUTORIAL = os.path.join(REPO, "docs", "tutorial.md")
EXAMPLES = os.path.join(REPO, "examples", "tutorial")
SHOWN_ROOT = "~/aoti-debug"          # how the tutorial writes the reader's checkout
COMMAND_TIMEOUT = 600                # seconds; an AOTI compile takes 10-25 s here

_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
_PID = re.compile(r"\bpid \d+")
_PID_IN_LOG_NAME = re.compile(r"(?<=_)\d+(?=\.log\b)")
# the process id in dump names (4242-blackbox, 4242-ranker-run500) and a thread id
_PID_IN_DUMP_NAME = re.compile(r"(?<![\w.])\d+(?=-(?:blackbox|[\w#]+-run\d))")
_THREAD = re.compile(r"\bthread \d+")
_TIMING = re.compile(r"\b\d+(?:\.\d+)? ms\b")
_SIGNAL_REPORT = re.compile(
    r"^.*line \d+: +\d+ (Segmentation fault|Aborted|Killed|Bus error|Floating point exception"
    r"|Illegal instruction)(?: +\(core dumped\))?(?: .*)?$")


# ---- the document ---------------------------------------------------------------

@dataclasses.dataclass
class Command:
    text: str                 # what bash runs (continuation lines included)
    expected: List[str]       # the output lines the document shows
    exit: int                 # the exit status the document shows
    line: int                 # where the command starts in the document (1-based)


@dataclasses.dataclass
class Document:
    commands: List[Command]
    python_blocks: List[str]
    other_blocks: List[tuple]   # (line, info string) of fenced blocks that are neither


def parse(text: str) -> Document:
    """The commands (with their shown output) and quoted code of a Markdown text."""
    lines = text.splitlines()
    doc = Document([], [], [])
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*(\S*)", lines[i])
        if not fence:
            i += 1
            continue
        start, info = i, fence.group(2)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), None)
        assert end is not None, f"tutorial.md:{start + 1}: unclosed fenced block"
        body = lines[start + 1:end]
        if info == "console":
            doc.commands.extend(_console(body, start + 2))
        elif info == "python":
            doc.python_blocks.append("\n".join(body) + "\n")
        else:
            doc.other_blocks.append((start + 1, info))
        i = end + 1
    return doc


def _console(body: List[str], first_line: int) -> List[Command]:
    commands: List[Command] = []
    k = 0
    if body and not body[0].startswith("$ "):
        raise AssertionError(f"tutorial.md:{first_line}: a console block must start with a '$ ' command")
    while k < len(body):
        line_no = first_line + k
        parts = [body[k][2:]]
        while parts[-1].endswith("\\") and k + 1 < len(body):
            k += 1
            parts.append(body[k])
        k += 1
        output = []
        while k < len(body) and not body[k].startswith("$ "):
            output.append(body[k])
            k += 1
        text = "\n".join(parts)
        status = _EXIT.search(parts[-1])
        commands.append(Command(text, output, int(status.group(1)) if status else 0, line_no))
    return commands


# ---- comparing output -----------------------------------------------------------

def normalize(text: str, root: Optional[str] = None) -> List[str]:
    """Masked lines without trailing whitespace or trailing blank lines (nor
    torch's own warnings, which depend on the machine: conftest)."""
    text = without_torch_logs(text)
    if root:
        text = text.replace(root, SHOWN_ROOT)
    out = []
    for line in text.splitlines():
        if root is not None:
            line = _SIGNAL_REPORT.sub(r"\1", line)
        line = mask_line(line)
        line = _PID.sub("pid PID", line)
        line = _PID_IN_LOG_NAME.sub("PID", line)
        line = _PID_IN_DUMP_NAME.sub("PID", line)
        line = _THREAD.sub("thread TID", line)
        line = _TIMING.sub("TIME ms", line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


# ---- running --------------------------------------------------------------------

class Shell:
    """One bash process; each command's output goes to its own file."""

    MARK = "__tutorial_command_done__"

    def __init__(self, cwd: str, env: dict, work: str):
        self.work = work
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.count = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, command: str, timeout: float = COMMAND_TIMEOUT):
        self.count += 1
        script = os.path.join(self.work, f"command-{self.count}.sh")
        output = os.path.join(self.work, f"command-{self.count}.out")
        with open(script, "w") as f:
            f.write(command + "\n")
        self.proc.stdin.write(f'{{ . "{script}"\n}} > "{output}" 2>&1 < /dev/null\n'
                              f'echo "{self.MARK} $?"\n')
        self.proc.stdin.flush()
        stray = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no end after {timeout} s: {command}") from None
            if line is None:
                raise AssertionError(f"the shell ended during: {command}\n{''.join(stray)}")
            if line.startswith(self.MARK):
                status = int(line.split()[1])
                break
            stray.append(line)
        with open(output, errors="replace") as f:
            return status, "".join(stray) + f.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def scratch_checkout(root: str) -> None:
    """examples/tutorial copied (without anything a previous run wrote),
    examples/custom_op linked, and .venv: a link to the running environment
    when it is a virtual environment, else an activate script that puts this
    interpreter first on PATH."""
    os.makedirs(os.path.join(root, "examples"))
    shutil.copytree(EXAMPLES, os.path.join(root, "examples", "tutorial"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.pt2", "*.log", "logs"))
    os.symlink(os.path.join(REPO, "examples", "custom_op"), os.path.join(root, "examples", "custom_op"))
    if os.path.isfile(os.path.join(sys.prefix, "bin", "activate")):
        os.symlink(sys.prefix, os.path.join(root, ".venv"))
    else:
        os.makedirs(os.path.join(root, ".venv", "bin"))
        with open(os.path.join(root, ".venv", "bin", "activate"), "w") as f:
            f.write(f'export PATH="{os.path.dirname(sys.executable)}:$PATH"\n')


def shell_env(inductor_cache: str, mylib_build: str) -> dict:
    env = clean_env(TORCHINDUCTOR_CACHE_DIR=inductor_cache, MYLIB_BUILD_DIR=mylib_build, PYTHONUNBUFFERED="1")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


def report(command: Command, status: int, expected: List[str], actual: List[str]) -> str:
    diff = "\n".join(difflib.unified_diff(expected, actual, "shown in tutorial.md", "printed", lineterm=""))
    return (f"tutorial.md:{command.line}: $ {command.text}\n"
            f"exit status {status} (shown: {command.exit})\n{diff or '(output matches)'}\n"
            f"--- printed (masked) ---\n" + "\n".join(actual))


# ---- the tests ------------------------------------------------------------------

def document() -> Document:
    with open(TUTORIAL) as f:
        return parse(f.read())


def test_every_block_is_run_or_quoted_from_the_examples():
    doc = document()
    assert not doc.other_blocks, (
        "fenced blocks the test neither runs nor checks (use ```console with '$ ' commands, "
        f"or ```python quoted from examples/tutorial): {doc.other_blocks}")
    sources = [open(os.path.join(EXAMPLES, f)).read() for f in sorted(os.listdir(EXAMPLES)) if f.endswith(".py")]
    for block in doc.python_blocks:
        assert any(block in source for source in sources), f"not in examples/tutorial/*.py:\n{block}"
    # every workflow of the tutorial is still there
    everything = "\n".join(c.text for c in doc.commands)
    for needle in ("AOTI_DEBUG_CHECK_INPUTS=1", "float64.pt", "AOTI_DEBUG_LOGLEVEL=5", "aoti-debug nan-origin",
                   "--library", "AOTI_DEBUG_KERNELS=", "aoti-debug build-runner", "%i", "workers.py"):
        assert needle in everything, f"no command of the tutorial uses {needle!r}"


def test_example_programs_have_docstrings():
    import ast
    for name in sorted(os.listdir(EXAMPLES)):
        if name.endswith(".py"):
            with open(os.path.join(EXAMPLES, name)) as f:
                assert ast.get_docstring(ast.parse(f.read())), f"examples/tutorial/{name} has no docstring"


# The shown output names Inductor's kernels and the banner's torch version:
# it is compared on the release it was recorded with (docs/testing.md).
RECORDED_WITH = "2.13.0"


def _torch_release() -> str:
    import torch
    return torch.__version__.split("+")[0]


@pytest.mark.slow
@pytest.mark.skipif(_torch_release() != RECORDED_WITH,
                    reason=f"the tutorial's output was recorded with torch {RECORDED_WITH}; "
                           "kernel names and the banner differ on other releases")
def test_tutorial_commands_print_what_it_shows(tmp_path, aoti_cache, mylib_so, membugs_so):
    from aoti_debug import runner
    runner.build_runner()                       # cached: the tutorial's build-runner only finds it
    root = str(tmp_path / "aoti-debug")
    scratch_checkout(root)
    work = tmp_path / "harness"
    work.mkdir()
    commands = document().commands
    assert len(commands) >= 20, f"only {len(commands)} commands found in {TUTORIAL}"
    shell = Shell(root, shell_env(aoti_cache, os.path.dirname(mylib_so)), str(work))
    try:
        for command in commands:
            status, printed = shell.run(command.text)
            expected, actual = normalize("\n".join(command.expected)), normalize(printed, root)
            assert status == command.exit and matches(expected, actual), report(command, status, expected, actual)
    finally:
        shell.close()


# ---- docs/reference.md ------------------------------------------------------------

REFERENCE = os.path.join(REPO, "docs", "reference.md")


def _reference() -> str:
    with open(REFERENCE) as f:
        return f.read()


def test_reference_documents_every_variable():
    from aoti_debug import runner
    from aoti_debug.settings import ALL_NAMES
    text = _reference()
    missing = [name for name in (*ALL_NAMES, runner.CACHE_ENV) if f"`{name}" not in text]
    assert not missing, f"docs/reference.md does not document {missing}"


def test_reference_documents_every_command_and_its_options():
    import argparse
    import importlib
    from aoti_debug.cli import COMMANDS
    rows = {}
    for line in _reference().splitlines():
        row = re.match(r"^\| `([a-z-]+)([^`]*)` \|", line)
        if row:
            rows[row.group(1)] = row.group(2)
    for name, (module_name, _help) in COMMANDS.items():
        assert name in rows, f"docs/reference.md has no row for `aoti-debug {name}`"
        parser = argparse.ArgumentParser()
        importlib.import_module(module_name).add_arguments(parser)
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                assert any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", rows[name])
                           for o in action.option_strings), \
                    f"docs/reference.md: the row of `{name}` does not show {action.option_strings[-1]}"


# ---- the harness itself -----------------------------------------------------------

SAMPLE = """\
Text.

```console
$ cd somewhere
$ printf 'a\\nb\\nc\\n'
a
...
c
$ false   # exit 1
```

```python
x = 1
```

```text
not allowed
```
"""


def test_parse_reads_commands_outputs_exit_statuses_and_blocks():
    doc = parse(SAMPLE)
    assert [(c.text, c.expected, c.exit, c.line) for c in doc.commands] == [
        ("cd somewhere", [], 0, 4), ("printf 'a\\nb\\nc\\n'", ["a", "...", "c"], 0, 5),
        ("false   # exit 1", [], 1, 9)]
    assert doc.python_blocks == ["x = 1\n"]
    assert doc.other_blocks == [(16, "text")]
    two_lines = parse("```console\n$ echo a \\\n  b\nout\n```\n").commands
    assert [(c.text, c.expected) for c in two_lines] == [("echo a \\\n  b", ["out"])]


def test_matches_exactly_except_where_abridged():
    assert matches(["a", "b"], ["a", "b"])
    assert not matches(["a", "b"], ["a", "b", "c"])
    assert not matches(["a", "b"], ["a", "x"])
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "  ...", "d"], ["a", "d"])
    assert matches(["..."], [])
    assert not matches(["a", "...", "d"], ["a", "b", "c"])
    assert not matches([], ["unexpected"])
    # launch ids are exact, whatever K: not numbers that agree to six digits
    assert matches(["launch ranker#2:100.1000 k"], ["launch ranker#2:100.1000 k"])
    assert not matches(["launch ranker#2:100.1000 k"], ["launch ranker#2:100.1001 k"])
    assert not matches(["(victims): ranker:500.1000 k"], ["(victims): ranker:500.1001 k"])
    assert not matches(["launch ranker:1.3 k"], ["launch 1.3 k"])


def test_normalize_masks_run_specific_details():
    printed = ("[2026-11-21 05:30:45.123456] [pid 4242] launch ranker:1.3 cpp_fused_log_1\n"
               "NaN/Inf origin: launch ranker:1.3 k (pid 99, worker_99.log:12)\n"
               "  source: /tmp/x/aoti-debug/examples/tutorial/ranker.py:33   \n"
               "ran 1 time, 1.465 ms per run\n"
               "/tmp/h/command-3.sh: line 1:  4242 Segmentation fault      (core dumped) python run.py\n\n\n")
    assert normalize(printed, "/tmp/x/aoti-debug") == [
        "[TIMESTAMP] [pid PID] launch ranker:1.3 cpp_fused_log_1",
        "NaN/Inf origin: launch ranker:1.3 k (pid PID, worker_PID.log:12)",
        "  source: ~/aoti-debug/examples/tutorial/ranker.py:33",
        "ran 1 time, TIME ms per run",
        "Segmentation fault"]
    # the shown side is masked the same way, but never rewritten otherwise
    assert normalize("[2026-01-01 00:00:00.000001] [pid 7] note - x\nSegmentation fault\n") == [
        "[TIMESTAMP] [pid PID] note - x", "Segmentation fault"]


def test_shell_keeps_state_and_reports_status_and_output(tmp_path):
    shell = Shell(str(tmp_path), clean_env(), str(tmp_path))
    try:
        assert shell.run("X=5; cd /") == (0, "")
        assert shell.run("echo $X; pwd; echo err >&2") == (0, "5\n/\nerr\n")
        assert shell.run("(exit 3)")[0] == 3
        status, printed = shell.run("python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'")
        assert status == 139 and normalize(printed, "/nowhere") == ["Segmentation fault"]
    finally:
        shell.close()
