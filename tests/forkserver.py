"""Fresh interpreters for test code that starts by importing torch, without
paying for the import each time.

Most of the suite's wall time went to `import torch` in the thousands of
short processes it starts (a package run, a compile, an analysis command:
2-3 s of CPU each before the first line of the test's own code).  A
fork server imports torch once; each such process is then forked from it,
given the test's environment, folder and output files, and runs the code as
`python -c` would: in a new `__main__`, with the start-up hook's .pth line
evaluated against the new environment, exiting through the interpreter's
own shutdown (atexit handlers, C++ static destructors) with the status a
fresh process would have.

Only code whose first statement (after `import sys; sys.path.insert(...)`)
imports torch is forked, and only when the environment differs from the
server's in variables that nothing reads while torch imports (aoti-debug's,
the cache folder, PYTHONPATH, ...): torch's, OpenMP's, ATen's and Python's
own variables (TORCH_TRACE, OMP_NUM_THREADS, ATEN_CPU_CAPABILITY, the locale, ...) take
a real process, and so does code that inspects `sys.modules`.
Set AOTID_TEST_FORK=0 to start every process fresh.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Dict, Optional

# read while torch imports (or by the interpreter itself): a difference takes a real process
_IMPORT_TIME = re.compile(r"^(TORCH(?!INDUCTOR_CACHE_DIR$)|PYTORCH|OMP_|GOMP|KMP_|MKL|OPENBLAS|ATEN_|CUDA|NVIDIA|"
                          r"TRITON|LD_|MALLOC|LC_|LANG|PYTHON(?!PATH$|UNBUFFERED$))")
# what the start-up hook (.pth) acts on: the server starts without them, so that it
# never activates there with settings no child asked for (a child's hook, run
# against its own environment, activates once, for good)
_HOOKED = re.compile(r"^(AOTI_|AOT_INDUCTOR_)")
_PREAMBLE = re.compile(r"^(?:#.*|import sys(?:; sys\.path\.insert\(0, .*\))?|)$")
_STARTS_WITH_TORCH = re.compile(r"^import torch\b")

_SERVER = r"""
import os, struct, sys, json, select, signal
import torch                                    # the import every forked process shares
rfd, wfd = int(sys.argv[1]), int(sys.argv[2])

def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = os.read(rfd, n - len(data))
        if not chunk:
            os._exit(0)                         # the test process is gone
        data += chunk
    return data

def serve():
    while True:
        req = json.loads(read_exact(struct.unpack("<I", read_exact(4))[0]))
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            os.close(wfd)
            return req
        pidfd = os.pidfd_open(pid)
        ready, _, _ = select.select([pidfd], [], [], req["timeout"])
        timed_out = not ready
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        reply = json.dumps({"status": os.waitstatus_to_exitcode(status), "timed_out": timed_out}).encode()
        os.write(wfd, struct.pack("<I", len(reply)) + reply)

req = serve()
# -- the forked child: become `python -c CODE` in the test's environment
signal.signal(signal.SIGINT, signal.default_int_handler)
os.chdir(req["cwd"])
os.environ.clear()
os.environ.update(req["env"])
for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY),
                        (2, req["stderr"], os.O_WRONLY)):
    new = os.open(path, flags)
    os.dup2(new, fd)
    os.close(new)
buffering = bool(os.environ.get("PYTHONUNBUFFERED"))
sys.stdin = open(0, "r", closefd=False)
sys.stdout = open(1, "w", closefd=False, buffering=1 if buffering else -1)
sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")
sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
sys.argv = ["-c"]
for line in req["pth"]:                         # the start-up hooks, against this environment
    exec(line, {})
import types
main = types.ModuleType("__main__")
main.__dict__["__builtins__"] = __builtins__
sys.modules["__main__"] = main
del req["env"], req["pth"]
exec(compile(req["code"], "<string>", "exec"), main.__dict__)
"""


def _pth_lines():
    """The lines of site-packages' .pth files that read the environment (the start-up
    hook): the others ran in the server as they would in any process."""
    import site
    lines = []
    for folder in site.getsitepackages():
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            with open(os.path.join(folder, name)) as f:
                lines += [line.rstrip("\n") for line in f
                          if line.startswith(("import ", "import\t")) and "os.environ" in line]
    return lines


class ForkServer:
    def __init__(self, base_env: Dict[str, str]) -> None:
        self.base_env = dict(base_env)
        self.pth = _pth_lines()
        self.lock = threading.Lock()
        self.proc: Optional[subprocess.Popen] = None

    def _start(self) -> None:
        to_server, self._wfd = os.pipe()
        self._rfd, from_server = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(to_server), str(from_server)],
                                     env={k: v for k, v in self.base_env.items() if not _HOOKED.match(k)},
                                     pass_fds=(to_server, from_server),
                                     stdin=subprocess.DEVNULL, cwd="/")
        os.close(to_server)
        os.close(from_server)

    def close(self) -> None:
        """Ends the server (the suite's own ends with the test process)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            os.close(self._wfd)
            os.close(self._rfd)
            self.proc = None

    def accepts(self, code: str, env: Dict[str, str]) -> bool:
        if os.environ.get("AOTID_TEST_FORK") == "0" or "sys.modules" in code:
            return False
        first = next((line.strip() for line in code.splitlines() if not _PREAMBLE.match(line.strip())), "")
        if not _STARTS_WITH_TORCH.match(first):
            return False
        names = set(env) | set(self.base_env)
        return not any(_IMPORT_TIME.match(n) and env.get(n) != self.base_env.get(n) for n in names)

    def run(self, code: str, env: Dict[str, str], cwd: Optional[str], timeout: float):
        """As subprocess.run([python, -c, code], capture_output=True, text=True, timeout=...)."""
        with self.lock, tempfile.TemporaryDirectory(prefix="aotid-fork-") as tmp:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            open(out, "w").close()
            open(err, "w").close()
            req = json.dumps({"code": code, "env": env, "cwd": os.path.abspath(cwd or os.getcwd()),
                              "stdout": out, "stderr": err, "timeout": timeout, "pth": self.pth}).encode()
            os.write(self._wfd, struct.pack("<I", len(req)) + req)
            reply = self._read_reply(timeout)
            stdout, stderr = _text(out), _text(err)
        args = [sys.executable, "-c", code]
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(args, timeout, stdout, stderr)
        return subprocess.CompletedProcess(args, reply["status"], stdout, stderr)

    def _read_reply(self, timeout: float) -> dict:
        def exact(n):
            data = b""
            while len(data) < n:
                ready, _, _ = select.select([self._rfd], [], [], timeout + 60)
                chunk = os.read(self._rfd, n - len(data)) if ready else b""
                if not chunk:
                    self.proc.kill()
                    raise RuntimeError("the tests' fork server stopped answering")
                data += chunk
            return data
        return json.loads(exact(struct.unpack("<I", exact(4))[0]))


def _text(path: str) -> str:
    """What subprocess's text mode gives: the locale's encoding, universal newlines."""
    import locale
    with open(path, "rb") as f:
        data = f.read()
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")
