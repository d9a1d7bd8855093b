"""Level-10 dump folders (docs/dumps.md) read as the records a level-5 log holds.

Each manifest line becomes the record the runtime logged at that moment:
`run`, `launch`, `launch-end`, `run-end` for an AOTI run folder; `call`,
`return`, `raise` for a Python `-calls` folder.  The records are written with
the logger's own formatter (aoti_debug.format, statistics included) and read
back with records.parse, so nan-origin, diff and report see a dump exactly as
they see a log.  Every tensor keeps a reference to its file (`Tensor.dump`),
so that diff can compare the values themselves.

torch is imported only when a tensor file is read.
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import records

MANIFEST = "manifest.jsonl"
Ref = Tuple[str, Tuple[Any, ...]]           # (file, keys from the file's object down to the tensor)


def manifest_lines(folder: str) -> List[Tuple[int, Dict[str, Any]]]:
    """(line number, entry) of every line; a torn last line (the process died
    while writing it) is skipped."""
    out = []
    with open(os.path.join(folder, MANIFEST), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                out.append((number, entry))
    return out


def read_manifest(folder: str) -> List[Dict[str, Any]]:
    return [entry for _, entry in manifest_lines(folder)]


def load(path: str) -> Any:
    try:
        import torch
    except ImportError:
        raise records.LogInputError(f"{path}: reading dumped tensors needs torch") from None
    return torch.load(path, weights_only=True, map_location="cpu")


def load_ref(ref: Ref) -> Any:
    """The value a `Tensor.dump` reference points to."""
    return _pick(load(ref[0]), ref[1])


def _pick(value: Any, keys: Tuple[Any, ...]) -> Any:
    for key in keys:
        value = value[key]
    return value


def read(path: str, folders: List[str]) -> records.Log:
    """The dump folders' records, merged in time order; no records when none is usable."""
    logs = [log for log in (_read_folder(f) for f in folders) if log.records]
    return records.merge(path, logs)


# -- one folder -------------------------------------------------------------------

NOT_DUMPED = "not dumped"
UNREADABLE = (OSError, LookupError, TypeError, RuntimeError, pickle.UnpicklingError)   # a damaged file


class _Writer:
    """Log text for one folder, with where each record and tensor came from."""

    def __init__(self, folder: str, pid: int) -> None:
        self.folder, self.pid = folder, pid
        self.parts: List[str] = []
        self.lines: List[int] = []                   # manifest line of each record
        self.refs: List[List[Optional[Ref]]] = []    # each record's tensors, in item order
        self._last: Tuple[str, Any] = ("", None)

    def record(self, line: int, entry: Dict[str, Any], kind: str, ident: Any, name: Any,
               body: List[str], refs: List[Optional[Ref]]) -> None:
        from .. import format as fmt
        self.parts.append(fmt.record(fmt.header(kind, str(ident), str(name), self.pid,
                                                float(entry.get("time") or 0)), body))
        self.lines.append(line)
        self.refs.append(refs)

    def item(self, label: str, file: Optional[str], keys: Tuple[Any, ...] = (),
             error: str = "") -> Tuple[List[str], List[Optional[Ref]]]:
        """Lines and tensor references of one argument saved in `file` (under `keys`)."""
        from .. import format as fmt
        if file:
            try:
                value = self.value(file, keys)
            except UNREADABLE as exc:
                file, error = None, f"{file} cannot be read ({type(exc).__name__}: {exc})"
        if not file:
            reason = f"{NOT_DUMPED}: {error}" if error else NOT_DUMPED
            return [f"  {label}:", "    Tensor(", f"      stats=skipped ({reason})", "    )"], [None]
        path = os.path.join(self.folder, file)
        refs: List[Optional[Ref]] = [(path, keys + sub) for sub in _tensor_keys(value)]
        return fmt.item(label, value, 5), refs

    def value(self, file: str, keys: Tuple[Any, ...] = ()) -> Any:
        """What `file` holds under `keys`; the last file read is kept (a run's or a call's
        inputs are one file)."""
        if self._last[0] != file:
            self._last = (file, load(os.path.join(self.folder, file)))
        return _pick(self._last[1], keys)

    def log(self) -> records.Log:
        log = records.parse("".join(self.parts), self.folder)
        for record, line, refs in zip(log.records, self.lines, self.refs):
            record.file, record.line = os.path.join(self.folder, MANIFEST), line
            tensors = [t for item in record.items for _, t in item.tensors()]
            if len(tensors) == len(refs):
                for tensor, ref in zip(tensors, refs):
                    tensor.dump = ref
        return log


def _tensor_keys(value: Any, keys: Tuple[Any, ...] = ()) -> Iterator[Tuple[Any, ...]]:
    """Keys of every tensor in `value`, in the order the formatter writes them."""
    from .. import format as fmt
    if fmt.holds_tensor(value) and not isinstance(value, (list, tuple, dict)):
        yield keys
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensor_keys(v, keys + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensor_keys(v, keys + (i,))


def _pid(folder: str, entries: List[Tuple[int, Dict[str, Any]]]) -> int:
    head = os.path.basename(os.path.normpath(folder)).split("-", 1)[0]
    if head.isdigit():
        return int(head)
    return next((int(e["pid"]) for _, e in entries if isinstance(e.get("pid"), int)), 0)


def _read_folder(folder: str) -> records.Log:
    try:
        entries = manifest_lines(folder)
    except OSError:
        return records.parse("", folder)
    w = _Writer(folder, _pid(folder, entries))
    for line, e in entries:
        if e.get("kind") == "call":
            _call(w, line, e)
        elif e.get("kind") in ("run", "launch", "run-end"):
            _run(w, line, e)
    return w.log()


def _files(entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [f for f in entry.get("files") or [] if isinstance(f, dict)]


def _run(w: _Writer, line: int, e: Dict[str, Any]) -> None:
    """A line of an AOTI run folder (C++ shim)."""
    event, run = e.get("event"), e.get("run")
    if event == "run":
        body: List[str] = []
        refs: List[Optional[Ref]] = []
        saved = next((f.get("file") for f in _files(e) if f.get("name") == "inputs"), None)
        for i, name in enumerate((e.get("inputs") or []) if saved else []):
            lines, r = w.item(f"in {name}", saved, (i,))
            body, refs = body + lines, refs + r
        w.record(line, e, "run", run, e.get("model"), body, refs)
    elif event in ("before", "after"):
        body = []
        if event == "before":
            body.append(f"  origin: nodes={e.get('nodes') or '-'} source={e.get('source') or '-'}")
            lines = e.get("lines")
            body += lines.splitlines() if isinstance(lines, str) else []
        refs = []
        for f in _files(e):
            lines, r = w.item(f"{f.get('role')} {f.get('name')}", f.get("file"), error=f.get("error", ""))
            body, refs = body + lines, refs + r
        kind = "launch" if event == "before" else "launch-end"
        w.record(line, e, kind, e.get("id") or f"{run}.{e.get('index')}", e.get("kernel"), body, refs)
    elif event == "run-end":
        w.record(line, e, "run-end", run, e.get("model"), [], [])


def _call(w: _Writer, line: int, e: Dict[str, Any]) -> None:
    """A line of a Python `-calls` folder: arguments have no parameter names in a dump."""
    from ..logger import argument_items
    number, name, event = e.get("index"), e.get("name"), e.get("event")
    saved = {str(f.get("file")).rsplit("_", 1)[-1]: f.get("file") for f in _files(e) if f.get("file")}
    body: List[str] = []
    refs: List[Optional[Ref]] = []
    if event == "before":
        file = saved.get("inputs.pt")
        try:
            args, kwargs = (w.value(file, ("args",)), w.value(file, ("kwargs",))) if file else ([], {})
        except UNREADABLE as exc:
            body, refs = w.item("arg[0] inputs", None, error=f"{file} cannot be read ({type(exc).__name__}: {exc})")
        else:
            keys = [("args", i) for i in range(len(args))] + [("kwargs", k) for k in kwargs]
            for (label, _), k in zip(argument_items(None, args, kwargs), keys):
                lines, r = w.item(label, file, k)
                body, refs = body + lines, refs + r
        w.record(line, e, "call", number, name, body, refs)
    elif event == "after" and e.get("status") == "raised":
        w.record(line, e, "raise", number, name, [f"  exception: {e.get('error', '')}"], [])
    elif event == "after":
        lines, refs = w.item("output", saved.get("outputs.pt"), error=e.get("error", ""))
        w.record(line, e, "return", number, name, lines, refs)
