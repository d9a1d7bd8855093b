"""What the analysis commands are given is untrusted: a log or dump folder may be
damaged, cut short or crafted.  This module is the one place that opens such
files and the one error type for input that cannot be used.

- Only regular files are read: a FIFO, device or socket is refused before it is
  opened for reading (opening one could block; reading `/dev/zero` never ends),
  and so is a symbolic link (a dump folder naming `/etc/passwd` or another
  user's file must not make the commands read it).  Files are written the same
  way (`create`): never through a link.
- A line of a log or manifest may hold at most `LINE_LIMIT` bytes.
- Text taken from an input is printed with its control characters escaped
  (`printable`), so a kernel name cannot drive the terminal; so is a lone
  surrogate (from JSON's `\ud800`, or a file name that is not UTF-8), which
  no terminal encoding can write.

Every refusal is an `InputError` whose text is one line: the file (and line)
and what is wrong with it.  The commands print it and exit with status 2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from typing import BinaryIO, Iterator, Optional, Tuple

LINE_LIMIT = 16 * 2**20            # bytes in one line of a log or manifest.jsonl
_BLOCK = 2**20


class InputError(ValueError):
    """An input that cannot be used: str() is one line naming the file (and line) and the problem."""


def where(path: Optional[str], line: Optional[int] = None) -> str:
    """`path:line`, `path`, or `line N` for text that came from no file."""
    if path is None:
        return f"line {line}" if line is not None else "<text>"
    return f"{path}:{line}" if line is not None else path


# -- showing input text ---------------------------------------------------------

# C0 and C1 controls, DEL, line/paragraph separators and the bidirectional overrides:
# all of them can move the cursor, recolour or reorder what a terminal shows
# (and lone surrogates, which cannot be encoded at all)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character written as `\\x1b` / `\\u202e`: one inert line."""
    return _CONTROL.sub(_escape, text)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def shorten(text: str, limit: int = 60) -> str:
    """A value quoted in a message: printable, and cut to `limit` characters."""
    text = printable(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def reason(exc: BaseException, after: str = "") -> str:
    """`Type: first sentence of the message` (of the part after `after`, when the message
    holds it), for an exception raised by a library on bad data."""
    text = str(exc)
    if after and after in text:
        text = text.split(after, 1)[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0].split(". ")[0].rstrip(".") if lines else ""
    return shorten(f"{type(exc).__name__}: {first}" if first else type(exc).__name__, 160)


# -- opening files ----------------------------------------------------------------

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refused(path: str, mode: int, verb: str = "read") -> InputError:
    if stat.S_ISLNK(mode):
        return InputError(f"{path}: is a symbolic link, which is not followed (only regular files are "
                          f"{verb}: a file outside the folder must not be reached through a link)")
    return InputError(f"{path}: is {_kind(mode)}, not a regular file (only regular files are {verb})")


def open_regular(path: str) -> BinaryIO:
    """`path` opened for reading, if it is a regular file and not a symbolic link.

    The file is checked before it is opened (opening some devices has effects) and
    again after, on the descriptor, so that it cannot be swapped in between; the
    descriptor is opened non-blocking and without following a link, so neither a
    FIFO nor a link put there in the meantime is read.
    """
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISREG(mode):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise refused(path, stat.S_IFLNK) from None
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                os.close(fd)
                raise
            if stat.S_ISREG(mode):
                return os.fdopen(fd, "rb")
            os.close(fd)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    raise refused(path, mode)


def writable_targets(paths) -> None:
    """Refuse (InputError naming the first) when any of `paths` is there and is not a
    regular file: checked for all before anything is written, so a refusal writes
    nothing (create() checks each again as it opens it)."""
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise refused(path, mode, "written")


def create(path: str) -> BinaryIO:
    """`path` opened for writing, emptied: created, or a regular file that is there replaced;
    a symbolic link, FIFO or device there is refused (InputError naming it), never written
    through."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
                     | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(path, stat.S_IFLNK, "written") from None
        if exc.errno == errno.ENXIO:          # a FIFO without a reader
            raise refused(path, stat.S_IFIFO, "written") from None
        raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refused(path, mode, "written")
        os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
        raise
    return os.fdopen(fd, "wb")


@contextlib.contextmanager
def _reading(path: str) -> Iterator[None]:
    """A read that fails after the open (EIO from /proc/self/mem, a file on a lost
    network mount) is refused in one line, as a failed open is."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def lines(path: str) -> Iterator[Tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, whether a newline ended it) of every line."""
    with open_regular(path) as f, _reading(path):
        number = 0
        while True:
            line = f.readline(LINE_LIMIT + 1)
            if not line:
                return
            number += 1
            ended = line.endswith(b"\n")
            if ended:
                line = line[:-1]
            elif len(line) > LINE_LIMIT:
                raise _too_long(path, number)
            yield number, line, ended


def text_lines(path: str, at: int = 0, number: int = 0, block_size: int = _BLOCK) -> Iterator[Tuple[str, int, bool]]:
    """(text, byte offset, whether a newline ended it) of every line from byte `at` on (the
    line after line `number`), read a block at a time: bad UTF-8 replaced, a CRLF line end
    taken as a newline, no line over the limit."""
    with open_regular(path) as f, _reading(path):
        f.seek(at)
        offset, carry = at, b""
        while True:
            block = f.read(block_size)
            if not block:
                break
            parts = (carry + block).split(b"\n")
            carry = parts.pop()
            if len(carry) > LINE_LIMIT:
                raise _too_long(path, number + len(parts) + 1)
            for raw in parts:
                number += 1
                if len(raw) > LINE_LIMIT:
                    raise _too_long(path, number)
                yield (raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8", errors="replace"), offset, True
                offset += len(raw) + 1
        if carry:
            yield carry.decode("utf-8", errors="replace"), offset, False


def _too_long(path: str, number: int) -> InputError:
    return InputError(f"{path}:{number}: line longer than {LINE_LIMIT} bytes "
                      f"(the limit for one line of a log or manifest)")


def walk(path: str, depth: int):
    """Files in `path` and its sub-folders down to `depth` levels, sorted; a folder that
    cannot be listed is an error, not a hole in the result."""
    path = os.path.normpath(path)

    def refuse(exc: OSError) -> None:
        raise InputError(f"{exc.filename or path}: cannot be read ({exc.strerror or exc})")

    for root, dirs, files in os.walk(path, onerror=refuse):
        level = root[len(path):].count(os.sep)
        if level >= depth:
            dirs[:] = []
        dirs.sort()
        for name in sorted(files):
            yield os.path.join(root, name)
