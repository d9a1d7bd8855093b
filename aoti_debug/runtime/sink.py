"""Where records go (docs/log-format.md sections 4-6).

The normal path hands each record to the process registry in the compiled
core, which every artifact's copy of the C++ shim shares: one lock, one
banner per destination, one write(2) per record.  When the core cannot be
built, a Python writer with the same rules takes over.
"""

from __future__ import annotations

import errno
import itertools
import os
import platform as _platform
import signal
import stat
import sys
import threading
from typing import Dict, Optional, Tuple

from . import format as fmt
from .._version import __version__
from ..settings import process_rank


_torch_version = []   # torch.__version__, once torch is imported (it cannot change in a process)


def torch_version() -> str:
    if _torch_version:
        return _torch_version[0]
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except Exception:
            return "not installed"
    _torch_version[:] = [str(torch.__version__)]
    return _torch_version[0]


def platform_name() -> str:
    return f"{_platform.system()} {_platform.machine()}"


_core = None   # the binding once asked for; False when it is unusable


def native():
    """The compiled core's binding (aoti_debug.native.core) when it is usable, else None.
    Decided once per process (the core is built or loaded only once anyway)."""
    global _core
    if _core is None:
        try:
            from ..native import core as _native
            _core = _native if _native.lib() is not None else False
        except Exception:
            _core = False
    return _core or None


def tensor_block(t, level: int, depth: int, stats=None):
    """A Tensor block's lines (format.tensor_block's signature): a plain CPU
    tensor's by the compiled core, as the C++ shim writes it (byte-identical
    to format.tensor_block's, by the parity tests, in one call instead of a
    hundred Python ones); anything else, or one whose statistics `stats`
    (a stats.Memo) already holds, by format.py."""
    core = native()
    if (core is not None and type(t) in core.tensor_types() and t.device.type == "cpu"
            and (stats is None or stats.get(t) is None)):
        try:
            return core.render_tensor_block(t, level, 2 * depth)[:-1].split("\n")
        except Exception:
            pass
    return fmt.tensor_block(t, level, depth, stats)


def write(dest: str, text: str) -> None:
    """Write one whole record; never raises."""
    core = native()
    if core is not None:
        try:
            core.sink_write(dest, text, torch_version())
            return
        except Exception:
            pass
    _fallback.write(dest, text)


def write_stderr(text: str) -> None:
    """Lines for the user on stderr, in one write; never raises."""
    try:
        write_full(2, text.encode("utf-8", "backslashreplace"), guard=True)
    except Exception:
        pass


# What a write raises instead of only failing: SIGPIPE (EPIPE) and SIGXFSZ (EFBIG)
_HELD = {signal.SIGPIPE: errno.EPIPE, signal.SIGXFSZ: errno.EFBIG}


def write_full(fd: int, data: bytes, guard: bool) -> Tuple[int, Optional[OSError]]:
    """Write all of `data` unless a write fails: (bytes written, the error or None).

    `guard`: the write may raise SIGPIPE (a pipe or socket whose reader went away)
    or SIGXFSZ (a file past the process's file-size limit).  It must then fail
    with EPIPE or EFBIG, not kill a process that set the signal back to its
    default action: both are held in this thread around the write and the one
    the write raised is taken back, as the C++ HeldSignals does
    (detail/sink.h); the dispositions and a signal already pending are left
    as they were."""
    if guard:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        pending = signal.sigpending() & before
    done, error = 0, None
    try:
        while done < len(data):
            n = os.write(fd, data[done:])
            if n == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except OSError as exc:
        error = exc
    finally:
        if guard:
            for sig, code in _HELD.items():
                if error is not None and error.errno == code and sig not in pending:
                    signal.sigtimedwait({sig}, 0)   # directed at this thread: dequeued first
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_HELD) - before)
    return done, error


_local_calls = itertools.count(1)   # next() on a count is atomic under the GIL
_local_names: Dict[str, int] = {}
_names_lock = threading.Lock()


def next_call_number() -> int:
    """The next call number N, from the registry's counter when the compiled
    core is there: C++ ops (AOTI_DEBUG_SCOPE) in this process count with it."""
    core = native()
    if core is not None:
        try:
            return core.next_call_number()
        except Exception:
            pass
    return next(_local_calls)


def instance_name(name: str) -> str:
    """The record name of a newly loaded model: ``name``, then ``name#2``...
    counted with every artifact's runtime in the process (docs/log-format.md)."""
    core = native()
    if core is not None:
        try:
            return core.instance_name(name)
        except Exception:
            pass
    with _names_lock:
        count = _local_names[name] = _local_names.get(name, 0) + 1
    return name if count == 1 else f"{name}#{count}"


def resolve(dest: str, pid: int) -> str:
    return dest.replace("%i", str(pid))


class _Dest:
    __slots__ = ("fd", "path", "bannered", "lost", "torn", "error", "pipe")

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path, self.bannered = fd, path, False
        self.lost, self.torn, self.error = 0, False, ""
        self.pipe = fd <= 2 or _may_raise_signal(fd)


def _may_raise_signal(fd: int) -> bool:
    """Whether writing an opened path can raise SIGPIPE (a FIFO or socket) or SIGXFSZ
    (any file, under a file-size limit); stdout and stderr always can, as the process
    may point them at a pipe at any time."""
    try:
        import resource
        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return True
        mode = os.fstat(fd).st_mode
    except (OSError, ImportError, ValueError):
        return True
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PythonWriter:
    """Used only when the compiled core is unavailable; the same rules as the
    C++ write_record (detail/sink.h), lost-record notes included."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dests: Dict[str, _Dest] = {}
        self._said: set = set()
        self._pid = -1

    def write(self, dest: str, text: str) -> None:
        try:
            with self._lock:
                pid = os.getpid()
                if pid != self._pid:      # forked: banners and fds are per process
                    self._dests, self._said, self._pid = {}, set(), pid
                d, note = self._dests.get(dest), ""
                if d is None:
                    d, note = self._open(dest, pid)
                    self._dests[dest] = d
                self._write(d, text, pid, note)
        except Exception:
            pass

    def _write(self, d: _Dest, text: str, pid: int, note: str = "") -> None:
        head = "" if d.bannered else fmt.banner(pid, __version__, torch_version(), platform_name(),
                                                 None, *process_rank(os.environ))
        head += note
        if d.lost:
            head = ("\n" if d.torn else "") + head + fmt.record(
                fmt.header("note", "-", "log", pid), ["  " + lost_note(d.lost, d.path, d.error)])
        data = fmt.restamp(head + text, fmt.timestamp()).encode("utf-8", "backslashreplace")
        done, exc = write_full(d.fd, data, d.pipe)
        if exc is not None:
            d.bannered = d.bannered or done > 0
            d.torn, d.lost, d.error = d.torn or done > 0, d.lost + 1, exc.strerror or str(exc)
            if d.path not in self._said:
                self._said.add(d.path)
                write_full(2, lost_line(d.path, d.error).encode(), guard=True)
            return
        d.bannered, d.lost, d.torn, d.error = True, 0, False, ""

    def _stderr(self) -> _Dest:
        return self._dests.setdefault("stderr", _Dest(2, "stderr"))

    def _open(self, dest: str, pid: int) -> Tuple[_Dest, str]:
        """The destination opened, and the note its first record is written after (a path
        that cannot be opened writes to stderr, after a note saying why)."""
        if dest == "stdout":
            return _Dest(1, dest), ""
        if dest == "stderr":
            return self._stderr(), ""
        path = resolve(dest, pid)
        parent = os.path.dirname(path)
        try:
            if parent:
                private_dirs(parent)
        except OSError:
            pass  # the open below reports the reason
        try:
            fd = open_own_log(path)
        except OSError as exc:
            return self._stderr(), fmt.record(
                fmt.header("note", "-", "settings", pid),
                [f"  AOTI_DEBUG_LOGDEST={dest!r} is not valid: cannot open {path} "
                 f"({exc.strerror}); keeping stderr"])
        return _Dest(fd, path), ""


def private_dirs(path: str) -> None:
    """mkdir -p where every folder made is 0700 (os.makedirs gives the mode to the last only)."""
    head = os.path.dirname(path)
    if head and head != path and not os.path.isdir(head):
        private_dirs(head)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass


def open_own_log(path: str) -> int:
    """The log `path` opened to append to, as the C++ runtime opens it (detail/sink.h,
    open_own_log): never through a symbolic link another user owns, never into a regular
    file another user owns (a link planted in a sticky, world-writable /tmp); a new file
    is 0600.  OSError with why."""
    try:
        st = os.lstat(path)
        link = stat.S_ISLNK(st.st_mode)
    except OSError:
        link = False
    if link and st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, "a symbolic link another user owns, which is not followed")
    # O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking
    # the model until one comes; writes block again as for a file
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
                 | (0 if link else os.O_NOFOLLOW), 0o600)
    try:
        own = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISREG(own.st_mode) and own.st_uid != os.geteuid():
        os.close(fd)
        raise OSError(errno.EPERM, "a file another user owns, which is not appended to")
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass
    return fd


def try_destination(dest: str, pid: int) -> Optional[str]:
    """Why the log destination cannot be opened as a run would open it (None
    when it can), leaving nothing behind: a file or folders made for the try
    are removed again."""
    if dest in ("stdout", "stderr"):
        return None
    path = resolve(dest, pid)
    made = []
    try:
        parent = os.path.dirname(path)
        missing = []
        while parent and not os.path.lexists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
        if os.path.lexists(path):
            if stat.S_ISFIFO(os.stat(path).st_mode):
                # opened and closed, a FIFO would end its reader's input; whether a reader is
                # there at run time cannot be known now (without one, a run writes to stderr)
                if not os.access(path, os.W_OK):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES))
                return None
            # O_NONBLOCK: a device that would wait to be opened does not hang the try
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644))
            made.append(path)
        return None
    except OSError as exc:
        return f"cannot open {path} ({exc.strerror})"
    finally:
        for p in reversed(made):
            try:
                (os.rmdir if os.path.isdir(p) else os.unlink)(p)
            except OSError:
                pass


def lost_line(path: str, error: str) -> str:
    """The one stderr line a failed log write leaves (once per destination)."""
    return f"aoti-debug: cannot write the log to {path} ({error}); records are lost until a write succeeds\n"


def lost_note(lost: int, path: str, error: str) -> str:
    """The body of the note the next successful write starts with."""
    return f"{lost} record{'' if lost == 1 else 's'} lost: writing {path} failed ({error})"


_fallback = _PythonWriter()
