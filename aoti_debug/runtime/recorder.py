"""Level-10 flight recorder for the Python runtime (docs/dumps.md).

Tensors are saved with torch.save (loadable with weights_only=True); a call
is announced in manifest.jsonl after its inputs are saved and before it runs,
and settled after, so a crash leaves its inputs and a line saying what was in
flight.  Folders and files are created exclusively, never through a link, and
the limits hold for every process writing into the directory (dumpdir.py).
The limits are hard (manifest lines count): a file that would cross one is
not written, one warning is logged, and recording stops (logging goes on at
level 5).  So does a write that fails (a full disk, no permission).  Disk
errors never reach the user's program.
"""

from __future__ import annotations

import errno
import io
import json
import os
import threading
import time
from typing import Any, Dict, Optional

from . import dumpdir, state

MANIFEST = "manifest.jsonl"

# pid of a process whose recording stopped: every recorder of it stops (each torch.compile
# run has its own folder and recorder), with one note, as the C++ runtime's registry flag does
_stopped_pid = -1


class Recorder:
    """One dump folder: <dump_dir>/<pid>-<label>, a new one (dumpdir.make_folder)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._lock = threading.Lock()
        self._folder: Optional[str] = None
        self._pid = -1
        self._stopped = False
        self._count = 0

    def _limits(self):
        s = state.settings()
        return s.dump_dir, int(s.dump_max_size_gb * 2**30), s.dump_max_count

    def folder(self) -> Optional[str]:
        pid = os.getpid()
        if _stopped_pid == pid:
            self._stopped = True        # said once, by the recorder that stopped
            return None
        if self._folder is None or pid != self._pid:
            dump_dir = self._limits()[0]
            self._pid, self._stopped, self._count = pid, False, 0
            stem = f"{pid}-{self.label}"
            self._folder = os.path.join(dump_dir, stem)
            try:
                dumpdir.own_dir(dump_dir)
                name = dumpdir.make_folder(dump_dir, stem)
            except OSError as exc:
                self._stop(f"cannot create dump folder {self._folder!r} ({exc.strerror or exc})")
            else:
                if name != stem:
                    _taken(self._folder, os.path.join(dump_dir, name))
                    self._folder = os.path.join(dump_dir, name)
        return None if self._stopped else self._folder

    def _stop(self, why: str) -> None:
        global _stopped_pid
        if not self._stopped:
            self._stopped = True
            if _stopped_pid != os.getpid():
                _stopped_pid = os.getpid()
                state.note("flight-recorder", f"{why}; no more dumps, logging goes on at level 5")

    def begin(self) -> bool:
        """Claim one dump slot; False when recording has stopped or the count limit is reached."""
        with self._lock:
            if self.folder() is None:
                return False
            dump_dir, _, max_count = self._limits()
            granted, error = dumpdir.claim(dump_dir, max_count)
            if not granted:
                self._stop(error or f"AOTI_DEBUG_DUMP_MAX_COUNT={max_count} reached")
                return False
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
        """Write `data` to a new file of the folder (or append it to the manifest) within the
        size limit, under the lock; a file that cannot be written whole stops the recorder
        (a partial one is removed)."""
        if self._stopped:
            return False
        dump_dir, max_bytes, _ = self._limits()
        granted, error = dumpdir.reserve(dump_dir, len(data), max_bytes)
        if not granted:
            self._stop(error or f"AOTI_DEBUG_DUMP_MAX_SIZE_GB={max_bytes / 2**30:g} would be exceeded")
            return False
        path = os.path.join(self._folder, name)
        created = False
        try:
            if append:
                fd = dumpdir.append_to(self._folder, name)
            else:
                fd, _ = dumpdir.create_file(self._folder, name)
                created = True
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
            dumpdir.give_back(dump_dir, len(data))
            self._stop(f"cannot write {path!r} ({exc.strerror or exc})")
            if created:                   # ours: it was created above
                try:
                    os.unlink(path)
                except OSError:
                    pass
            return False
        return True


def _taken(path: str, instead: str) -> None:
    state.note("flight-recorder", f"{path!r} already exists; writing {instead!r} instead")


_calls = Recorder("calls")


def begin_call(number: int, qualname: str, func, args, kwargs) -> Optional[Dict[str, Any]]:
    """Dump a log_api call's inputs before it runs, then announce it (a crash keeps both)."""
    if not _calls.begin():
        return None
    entry = {"kind": "call", "index": number, "name": qualname,
             "module": getattr(func, "__module__", None),
             # a torch.ops packet's __qualname__ is its pybind function's: its name is `ns::op`
             "qualname": getattr(func, "_qualified_op_name", None) or getattr(func, "__qualname__", None)}
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
