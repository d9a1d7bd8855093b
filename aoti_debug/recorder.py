"""Level-10 flight recorder for the Python runtime (docs/dumps.md).

Tensors are saved with torch.save (loadable with weights_only=True); a call
is announced in manifest.jsonl after its inputs are saved and before it runs,
and settled after, so a crash leaves its inputs and a line saying what was in
flight.  The limits are hard (manifest lines count): a file that would cross
one is not written, one warning is logged, and recording stops (logging goes
on at level 5).  So does a write that fails (a full disk, no permission).
Disk errors never reach the user's program.
"""

from __future__ import annotations

import errno
import io
import json
import os
import threading
import time
from typing import Any, Dict, List, Optional

from . import runtime

MANIFEST = "manifest.jsonl"


class Recorder:
    """One dump folder: <dump_dir>/<pid>-<label>."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._lock = threading.Lock()
        self._folder: Optional[str] = None
        self._pid = -1
        self._stopped = False
        self._count = 0

    # -- limits shared by every recorder of the process --------------------
    def _limits(self):
        s = runtime.settings()
        return s.dump_dir, int(s.dump_max_size_gb * 2**30), s.dump_max_count

    def folder(self) -> Optional[str]:
        pid = os.getpid()
        if self._folder is None or pid != self._pid:
            dump_dir = self._limits()[0]
            self._pid, self._stopped, self._count = pid, False, 0
            self._folder = os.path.join(dump_dir, f"{pid}-{self.label}")
            try:
                os.makedirs(self._folder, exist_ok=True)
            except OSError as exc:
                self._stop(f"cannot create dump folder {self._folder!r} ({exc.strerror or exc})")
        return None if self._stopped else self._folder

    def _stop(self, why: str) -> None:
        if not self._stopped:
            self._stopped = True
            runtime.note("flight-recorder", f"{why}; no more dumps, logging goes on at level 5")

    def begin(self) -> bool:
        """Claim one dump slot; False when recording has stopped or the count limit is reached."""
        with self._lock:
            if self.folder() is None:
                return False
            _, _, max_count = self._limits()
            if _ledger.count >= max_count:
                self._stop(f"AOTI_DEBUG_DUMP_MAX_COUNT={max_count} reached")
                return False
            _ledger.count += 1
            self._count += 1
            return True

    def line(self, entry: Dict[str, Any]) -> None:
        """One manifest line (nothing once recording has stopped)."""
        entry.setdefault("time", time.time())
        with self._lock:
            if self._folder is not None:
                self._write(MANIFEST, (json.dumps(entry, sort_keys=True) + "\n").encode(), append=True)

    def save(self, name: str, value: Any) -> Optional[Dict[str, Any]]:
        """Write one .pt file within the limits; returns its manifest entry or None."""
        import torch
        buffer = io.BytesIO()
        try:
            torch.save(value, buffer)
        except Exception as exc:
            return {"file": None, "error": f"not serialisable: {type(exc).__name__}: {exc}"}
        data = buffer.getvalue()
        with self._lock:
            if self.folder() is None or not self._write(name, data, append=False):
                return None
            return {"file": name, "bytes": len(data)}

    def _write(self, name: str, data: bytes, append: bool) -> bool:
        """Write (or append) `data` to a file of the folder within the size limit, under the
        lock; a file that cannot be written whole stops the recorder (a partial one is removed)."""
        if self._stopped:
            return False
        dump_dir, max_bytes, _ = self._limits()
        if _ledger.bytes_used(dump_dir) + len(data) > max_bytes:
            self._stop(f"AOTI_DEBUG_DUMP_MAX_SIZE_GB={max_bytes / 2**30:g} would be exceeded")
            return False
        path = os.path.join(self._folder, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
        try:
            fd = os.open(path, flags, 0o644)
            try:
                done = 0
                while done < len(data):   # a short write is followed by the error that caused it
                    written = os.write(fd, data[done:])
                    if written <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            finally:
                os.close(fd)
        except OSError as exc:
            self._stop(f"cannot write {path!r} ({exc.strerror or exc})")
            if not append:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            return False
        _ledger.used += len(data)
        return True


class _Ledger:
    """What this process has put into the dump directory (the limits are per directory)."""

    def __init__(self) -> None:
        self.count = 0
        self.used: Optional[int] = None

    def bytes_used(self, dump_dir: str) -> int:
        if self.used is None:  # count what earlier processes left, once
            self.used = sum(os.path.getsize(os.path.join(root, f))
                            for root, _, files in os.walk(dump_dir) for f in files)
        return self.used


_ledger = _Ledger()
_calls = Recorder("calls")


def begin_call(number: int, qualname: str, func, args, kwargs) -> Optional[Dict[str, Any]]:
    """Dump a log_api call's inputs before it runs, then announce it (a crash keeps both)."""
    if not _calls.begin():
        return None
    entry = {"kind": "call", "index": number, "name": qualname,
             "module": getattr(func, "__module__", None),
             "qualname": getattr(func, "__qualname__", None)}
    saved = _calls.save(f"call{number:06d}_inputs.pt", {"args": list(args), "kwargs": dict(kwargs)})
    entry["files"] = [saved] if saved else []
    _calls.line(dict(entry, event="before", status="running"))
    return entry


def end_call(entry: Dict[str, Any], result: Any = None, error: Optional[BaseException] = None) -> None:
    if error is not None:
        _calls.line(dict(entry, event="after", status="raised", error=f"{type(error).__name__}: {error}"))
        return
    saved = _calls.save(f"call{entry['index']:06d}_outputs.pt", result)
    files = entry["files"] + ([saved] if saved else [])
    complete = len(files) == 2 and all(f.get("file") for f in files)
    _calls.line(dict(entry, event="after", status="ok" if complete else "incomplete", files=files))
