"""The dump directory is shared (docs/dumps.md, "A shared dump directory"):
other processes write into it at the same time, and whoever else may write to
it may have put names there first.  The C++ recorder
(cpp_runtime/include/aoti_debug/detail/dumpdir.h) keeps the same rules, so
both honour one ledger:

- Folders and files are created, never opened: mkdir failing on EEXIST,
  O_CREAT | O_EXCL | O_NOFOLLOW, so a link planted at a name the recorder will
  use is never followed.  A name in the dump directory itself that is taken
  gives way to the next free one of <stem>.2<ext> .. <stem>.100<ext> (the
  caller says so in a note); in a folder the recorder created (mode 0700:
  nobody else can add to it) a taken name is an error.
- The limits hold for the directory, whatever writes into it: the ledger file
  .aoti-debug-ledger holds the bytes and dumps written so far, read and
  rewritten in place under flock().  It is created with the bytes already in
  the directory (what earlier processes left) and zero dumps.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from typing import Callable, List, Tuple

NAME_TRIES = 100                    # <stem><ext>, <stem>.2<ext> .. <stem>.100<ext>
LEDGER = ".aoti-debug-ledger"
_LEDGER_FORMAT = "bytes {:020d} count {:020d}\n"
_LEDGER_BYTES = 54
_LEDGER_LINE = re.compile(rb"bytes (\d{20}) count (\d{20})\n")


def nth_name(stem: str, ext: str, n: int) -> str:
    """The n-th name tried for stem + ext (n = 1: the name itself)."""
    return stem + ext if n <= 1 else f"{stem}.{n}{ext}"


def own_dir(path: str) -> None:
    """mkdir -p of the dump directory (0700), as dumpdir.h's mkdirs: OSError unless it ends as
    a directory the user owns, reached through no symbolic link another user owns (dumps
    hold the model's inputs and weights)."""
    from .sink import private_dirs
    private_dirs(path)          # a file there: the checks below say what is wrong
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) and st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, "a symbolic link another user owns, which is not followed")
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, "Not a directory")
    if st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, "owned by another user, who could read what is written there")


def make_folder(parent: str, stem: str) -> str:
    """Create a new folder parent/<stem>, or the first free alternative; its name.
    OSError (EEXIST when every name is taken)."""
    for n in range(1, NAME_TRIES + 1):
        name = nth_name(stem, "", n)
        try:
            os.mkdir(os.path.join(parent, name), 0o700)
            return name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.path.join(parent, stem))


def create_file(folder: str, name: str, alternatives: bool = False) -> Tuple[int, str]:
    """A new file folder/<name> (or, with `alternatives`, the first free alternative,
    the number going before the extension): (descriptor, name).  OSError."""
    stem, ext = os.path.splitext(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for n in range(1, (NAME_TRIES if alternatives else 1) + 1):
        chosen = nth_name(stem, ext, n)
        try:
            return os.open(os.path.join(folder, chosen), flags, 0o600), chosen
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.path.join(folder, name))


def append_to(folder: str, name: str) -> int:
    """folder/<name> opened for appending (the manifest), created if needed, never through a link."""
    return os.open(os.path.join(folder, name),
                   os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def dir_bytes(path: str, depth: int = 0) -> int:
    """Bytes of the regular files under `path` (links are not followed; 16 levels deep)."""
    if depth > 16:
        return 0
    total = 0
    try:
        entries: List[os.DirEntry] = list(os.scandir(path))
    except OSError:
        return 0
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            total += dir_bytes(entry.path, depth + 1)
        elif stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


class Counts:
    """What the ledger holds: bytes in the directory (AOTI_DEBUG_DUMP_MAX_SIZE_GB, the
    ledger's own included) and launches/calls dumped (AOTI_DEBUG_DUMP_MAX_COUNT)."""

    def __init__(self, used: int, count: int) -> None:
        self.bytes, self.count = used, count


def with_ledger(dump_dir: str, update: Callable[[Counts], bool]) -> str:
    """Run `update` (True: write the counts back) on the ledger of `dump_dir` under an
    exclusive flock(); "" or what went wrong, e.g. "cannot write 'dumps/.aoti-debug-ledger'
    (Too many levels of symbolic links)"."""
    path = os.path.join(dump_dir, LEDGER)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return f"cannot write {path!r} ({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        size = st.st_size
        if not stat.S_ISREG(st.st_mode):
            return f"cannot write {path!r} (not a regular file)"
        fcntl.flock(fd, fcntl.LOCK_EX)          # Python retries EINTR itself
        m = _LEDGER_LINE.fullmatch(os.pread(fd, _LEDGER_BYTES + 1, 0))
        fresh = m is None
        counts = (Counts(dir_bytes(dump_dir) - size + _LEDGER_BYTES, 0) if fresh
                  else Counts(int(m.group(1)), int(m.group(2))))
        if update(counts) or fresh:
            text = _LEDGER_FORMAT.format(max(counts.bytes, 0), max(counts.count, 0)).encode()
            if os.pwrite(fd, text, 0) != _LEDGER_BYTES:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if fresh and size > _LEDGER_BYTES:
                os.ftruncate(fd, _LEDGER_BYTES)
        return ""
    except OSError as exc:
        return f"cannot write {path!r} ({exc.strerror or exc})"
    finally:
        os.close(fd)                            # releases the lock


def reserve(dump_dir: str, size: int, max_bytes: float) -> Tuple[bool, str]:
    """Reserve `size` bytes against the size limit: (granted, what went wrong with the ledger)."""
    def update(c: Counts) -> bool:
        if c.bytes + size > max_bytes:
            return False
        c.bytes += size
        return True
    return _granted(dump_dir, update)


def give_back(dump_dir: str, size: int) -> None:
    """What a file that could not be written had reserved."""
    def update(c: Counts) -> bool:
        c.bytes = max(c.bytes - size, 0)
        return True
    with_ledger(dump_dir, update)


def claim(dump_dir: str, max_count: int) -> Tuple[bool, str]:
    """Claim one dump (a launch or a call) against the count limit: (granted, ledger error)."""
    def update(c: Counts) -> bool:
        if c.count >= max_count:
            return False
        c.count += 1
        return True
    return _granted(dump_dir, update)


def _granted(dump_dir: str, update: Callable[[Counts], bool]) -> Tuple[bool, str]:
    done: List[bool] = []
    error = with_ledger(dump_dir, lambda c: done.append(update(c)) or done[-1])
    return (not error and bool(done) and done[-1]), error
