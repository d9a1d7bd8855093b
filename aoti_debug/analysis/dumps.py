"""Level-10 dump folders (docs/dumps.md) read as the records a level-5 log holds.

Each manifest line becomes the record the runtime logged at that moment:
`run`, `launch`, `launch-end`, `run-end` for an AOTI run folder; `call`,
`return`, `raise` for a Python `-calls` folder.  The records are written with
the logger's own formatter (aoti_debug.runtime.format, statistics included) and read
back with records.parse, so nan-origin, diff and report see a dump exactly as
they see a log.  Every tensor keeps a reference to its file (`Tensor.dump`),
so that diff can compare the values themselves; a file that cannot be read
gives a tensor that says so (`Tensor.unreadable`): its finiteness and values
are unknown, never a finding.

The manifest is checked line by line (manifest.py) and tensor files are read
with torch.load(weights_only=True) from regular files only (untrusted.py); a
loaded value may nest containers at most MAX_DEPTH deep and a tensor may have
at most MAX_ELEMENTS elements (an expanded tensor counts its repeats), so a
crafted file cannot make the statistics run for hours.  Only ZIP files are
read (torch's legacy format allocates the sizes a file declares before
reading it).  Before anything is inflated, the sizes the ZIP's central
directory declares are checked
(`_check_sizes`): no record may be larger than the file (both writers store
records uncompressed, so only a ZIP bomb is), and each tensor's record must
hold the bytes its metadata says.  A tensor must have its values (on the
CPU after map_location; a `meta` tensor has none).  torch is imported only
when a tensor file is read.
"""

from __future__ import annotations

import io
import os
import warnings
import zipfile
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import manifest, records
from .manifest import MANIFEST
from .untrusted import InputError, open_regular, printable, reason

Ref = Tuple[str, Tuple[Any, ...]]           # (file, keys from the file's object down to the tensor)
MAX_DEPTH = 64                              # nesting of lists, tuples and dicts in one file
MAX_ELEMENTS = 2**32                        # elements of one dumped tensor
NOT_ZIP = ("cannot be read as a torch.save file (not a ZIP archive: only the format torch.save and "
           "aoti-debug's runtimes write is read, not torch's legacy one)")


def manifest_lines(folder: str) -> List[Tuple[int, Dict[str, Any]]]:
    """(line number, entry) of every line, checked (manifest.py); a torn last line is skipped."""
    return manifest.read(folder)


def read_manifest(folder: str) -> List[Dict[str, Any]]:
    return [entry for _, entry in manifest_lines(folder)]


def load(path: str) -> Any:
    """What a dumped file holds; InputError (naming the file) for anything but a readable
    torch.save file of tensors and plain values."""
    try:
        import torch
    except ImportError:
        raise records.LogInputError(f"{path}: reading dumped tensors needs torch") from None
    with open_regular(path) as f, warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch's advice on a damaged file: the error says it
        try:
            _check_sizes(path, f, torch)
            f.seek(0)
            value = torch.load(f, weights_only=True, map_location="cpu")
        except InputError:
            raise
        except Exception as exc:        # torch.load raises whatever its parts raise on bad bytes
            why = reason(exc, after="WeightsUnpickler error:")   # past the advice on weights_only
            raise InputError(f"{path}: cannot be read as a torch.save file ({why})") from None
    _check_value(path, value, torch)
    return value


def outside_storage(t) -> str:
    """Why a strided tensor's view reaches outside its storage ("" when it does not): a
    crafted file's view that a kernel indexing with its own strides would read past."""
    return view_outside(list(t.shape), list(t.stride()), t.storage_offset(),
                        t.untyped_storage().nbytes() // t.element_size())


def view_outside(shape: List[int], stride: List[int], offset: int, room: int) -> str:
    """Why a view (sizes, strides and offset in elements) reaches outside a storage of `room`
    elements ("" when it does not): a negative size, offset or stride, or an element past
    the storage's end.  A view of no element reaches nothing."""
    if offset < 0 or min(shape, default=0) < 0:
        return "has a negative size or offset"
    if min(stride, default=0) < 0:
        return "has a negative stride"
    if min(shape, default=1) == 0:
        return ""
    end = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1
    if end > room:
        return f"is a view of {end} elements over a storage of {room}"
    return ""


def _check_value(path: str, value: Any, torch) -> None:
    pending = [(value, 0)]
    while pending:
        v, depth = pending.pop()
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided:
                raise InputError(f"{path}: holds a {v.layout} tensor (only strided tensors are dumped)")
            if v.device.type != "cpu":      # map_location moved every real device's tensors here
                raise InputError(f"{path}: holds a tensor on device {printable(str(v.device))}, which has "
                                 "no values to read (a dump holds tensors with their values)")
            if v.numel() > MAX_ELEMENTS:
                raise InputError(f"{path}: holds a tensor of {v.numel()} elements "
                                 f"(at most {MAX_ELEMENTS} are read)")
        elif isinstance(v, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise InputError(f"{path}: nests containers more than {MAX_DEPTH} deep")
            pending += [(x, depth + 1) for x in (v.values() if isinstance(v, dict) else v)]


def _check_sizes(path: str, f, torch) -> None:
    """Refuse a torch.save ZIP whose records would inflate past the file's own size, or whose
    tensor records do not hold what its tensor metadata says they hold: checked on the central
    directory and data.pkl (itself within the file's size) before torch.load inflates anything."""
    size = os.fstat(f.fileno()).st_size
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        # torch.load's legacy format allocates whatever sizes its storages declare
        # before reading them: a file that is not a ZIP is never handed to it
        raise InputError(f"{path}: {NOT_ZIP}") from None
    records = {info.filename: info for info in archive.infolist()}
    for info in records.values():
        if info.file_size > size:
            raise InputError(f"{path}: its record {printable(info.filename)!r} declares {info.file_size} "
                             f"bytes, more than the file's {size} (refused before inflating: a file "
                             "torch.save or aoti-debug writes stores its records uncompressed)")
    pickles = [n for n in records if n.count("/") == 1 and n.endswith("/data.pkl")]
    if len(pickles) != 1:
        return                          # not a torch.save ZIP: torch.load says so
    prefix = pickles[0][:-len("data.pkl")]
    for key, nbytes in _storages(archive.read(pickles[0]), torch).items():
        info = records.get(f"{prefix}data/{key}")
        if info is None or info.file_size != nbytes:
            held = "is missing" if info is None else f"holds {info.file_size} bytes"
            raise InputError(f"{path}: its record {printable(prefix + 'data/' + key)!r} {held}, but the "
                             f"tensor metadata says {nbytes} (refused before inflating)")


def _storages(pickled: bytes, torch) -> Dict[str, int]:
    """Storage key -> bytes, of every storage data.pkl names: read by torch's weights-only
    unpickler, with storages on the meta device, so nothing is allocated."""
    from torch import _weights_only_unpickler
    from torch._utils import _element_size
    sizes: Dict[str, int] = {}

    def storage(saved_id):
        if not isinstance(saved_id, tuple) or len(saved_id) != 5 or saved_id[0] not in ("storage", b"storage"):
            raise InputError("a persistent id that is not a storage")
        _, kind, key, _, numel = saved_id
        dtype = torch.uint8 if kind is torch.UntypedStorage else kind.dtype
        key = key.decode("ascii") if isinstance(key, bytes) else str(key)
        sizes[key] = numel * _element_size(dtype)
        return torch.storage.TypedStorage(wrap_storage=torch.UntypedStorage(sizes[key], device="meta"),
                                          dtype=dtype, _internal=True)

    unpickler = _weights_only_unpickler.Unpickler(io.BytesIO(pickled), encoding="utf-8")
    unpickler.persistent_load = storage
    unpickler.load()
    return sizes


def load_ref(ref: Ref) -> Any:
    """The value a `Tensor.dump` reference points to."""
    return pick(ref[0], load(ref[0]), ref[1])


def pick(path: str, value: Any, keys: Tuple[Any, ...]) -> Any:
    """value[k0][k1]...; InputError when the file does not hold that."""
    for n, key in enumerate(keys):
        try:
            value = value[key]
        except (LookupError, TypeError):
            where = "".join(f"[{k!r}]" for k in keys[:n + 1])
            raise InputError(f"{path}: holds no element {printable(where)}") from None
    return value


def read(path: str, folders: List[str]) -> records.Log:
    """The dump folders' records, merged in time order; no records when none is usable."""
    logs = [log for log in (_read_folder(f) for f in folders) if log.records]
    return records.merge(path, logs)


# -- one folder -------------------------------------------------------------------

NOT_DUMPED = "not dumped"
Source = Union[Ref, str, None]              # where a tensor's values are, why they cannot be read, or neither


class _Writer:
    """Log text for one folder, with where each record and tensor came from."""

    def __init__(self, folder: str, pid: int) -> None:
        self.folder, self.pid = folder, pid
        self.model: Optional[str] = None             # the run's model instance, as launch ids name it
        self.parts: List[str] = []
        self.lines: List[int] = []                   # manifest line of each record
        self.sources: List[List[Source]] = []        # each record's tensors, in item order
        self._last: Tuple[str, Any] = ("", None)     # the last file read: its value or its InputError

    def record(self, line: int, entry: Dict[str, Any], kind: str, ident: Any, name: Any,
               body: List[str], sources: List[Source], facts: str = "") -> None:
        from ..runtime import format as fmt
        self.parts.append(fmt.record(fmt.header(kind, str(ident), str(name), self.pid,
                                                float(entry["time"]), facts), body))
        self.lines.append(line)
        self.sources.append(sources)

    def item(self, label: str, file: Optional[str], keys: Tuple[Any, ...] = (),
             error: str = "") -> Tuple[List[str], List[Source]]:
        """Lines and tensor sources of one argument saved in `file` (under `keys`)."""
        from ..runtime import format as fmt
        if not file:
            return skipped(label, f"{NOT_DUMPED}: {error}" if error else NOT_DUMPED, None)
        try:
            value = self.value(file, keys)
        except InputError as exc:
            return skipped(label, str(exc), str(exc))
        path = os.path.join(self.folder, file)
        return fmt.item(label, value, 5), [(path, keys + sub) for sub in _tensor_keys(value)]

    def value(self, file: str, keys: Tuple[Any, ...] = ()) -> Any:
        """What `file` holds under `keys`; the last file read is kept (a run's or a call's
        inputs are one file)."""
        path = os.path.join(self.folder, file)
        if self._last[0] != path:
            try:
                self._last = (path, load(path))
            except InputError as exc:
                self._last = (path, exc)
        if isinstance(self._last[1], InputError):
            raise self._last[1]
        return pick(path, self._last[1], keys)

    def log(self) -> records.Log:
        log = records.parse("".join(self.parts), self.folder)
        assert len(log.records) == len(self.sources), "a manifest line became no record or two"
        for record, line, sources in zip(log.records, self.lines, self.sources):
            record.file, record.line = os.path.join(self.folder, MANIFEST), line
            tensors = [t for item in record.items for _, t in item.tensors()]
            if record.damage or len(tensors) != len(sources):
                # a crafted value (a dict key with `]`, ...) that the record format cannot hold
                record.damage = f"{record.file}:{line}: a dumped value cannot be written as a log record"
                continue
            for tensor, source in zip(tensors, sources):
                if isinstance(source, str):
                    tensor.unreadable = source
                else:
                    tensor.dump = source
        return log


def skipped(label: str, why: str, source: Source) -> Tuple[List[str], List[Source]]:
    """The block of a tensor whose values are not at hand, and its source."""
    return [f"  {label}:", "    Tensor(", f"      stats=skipped ({printable(why)})", "    )"], [source]


def _tensor_keys(value: Any, keys: Tuple[Any, ...] = ()) -> Iterator[Tuple[Any, ...]]:
    """Keys of every tensor in `value`, in the order the formatter writes them."""
    from ..runtime import format as fmt
    if fmt.holds_tensor(value) and not isinstance(value, (list, tuple, dict)):
        yield keys
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensor_keys(v, keys + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensor_keys(v, keys + (i,))


def _pid(folder: str, entries: List[Tuple[int, Dict[str, Any]]]) -> int:
    head = records.decimal(os.path.basename(os.path.normpath(folder)).split("-", 1)[0])
    if head is not None:
        return head
    return next((e["pid"] for _, e in entries if "pid" in e), 0)


def _read_folder(folder: str) -> records.Log:
    entries = manifest_lines(folder)
    w = _Writer(folder, _pid(folder, entries))
    for line, e in entries:
        (_call if e["kind"] == "call" else _run)(w, line, e)
    return w.log()


def _run(w: _Writer, line: int, e: Dict[str, Any]) -> None:
    """A line of an AOTI run folder (C++ shim)."""
    from ..runtime import format as fmt
    event, run = e["event"], e["run"]
    if event == "run":
        body: List[str] = []
        sources: List[Source] = []
        saved = next((f["file"] for f in e["files"] if f["name"] == "inputs"), None)
        for i, name in enumerate(e["inputs"] if saved else []):
            lines, s = w.item(f"in {name}", saved, (i,))
            body, sources = body + lines, sources + s
        facts = fmt.header_facts(e["thread"], e.get("rank"), e.get("world")) if "thread" in e else ""
        w.record(line, e, "run", run, e["model"], body, sources, facts)
        w.model = e["model"] if records.INSTANCE.fullmatch(str(e["model"])) else None
    elif event in ("before", "after"):
        body = []
        if event == "before":
            body.append(f"  origin: nodes={e['nodes'] or '-'} source={e['source'] or '-'}")
            body += e.get("lines", "").splitlines()
        sources = []
        for f in e["files"]:
            lines, s = w.item(f"{f['role']} {f['name']}", f["file"], error=f.get("error", ""))
            body, sources = body + lines, sources + s
        kind = "launch" if event == "before" else "launch-end"
        w.record(line, e, kind, f"{w.model}:{e['id']}" if w.model else e["id"], e["kernel"], body, sources)
    else:
        w.record(line, e, "run-end", run, e["model"], [], [])


def _call(w: _Writer, line: int, e: Dict[str, Any]) -> None:
    """A line of a Python `-calls` folder: arguments have no parameter names in a dump."""
    from ..runtime.logger import argument_items
    number, name, event = e["index"], e["name"], e["event"]
    saved = {f["file"].rsplit("_", 1)[-1]: f["file"] for f in e["files"] if f["file"]}
    body: List[str] = []
    sources: List[Source] = []
    if event == "before":
        file = saved.get("inputs.pt")
        try:
            args, kwargs = call_arguments(os.path.join(w.folder, file), w.value(file)) if file else ([], {})
        except InputError as exc:
            body, sources = skipped("arg[0] inputs", str(exc), str(exc))
        else:
            keys = [("args", i) for i in range(len(args))] + [("kwargs", k) for k in kwargs]
            for (label, _), k in zip(argument_items(None, args, kwargs), keys):
                lines, s = w.item(label, file, k)
                body, sources = body + lines, sources + s
        w.record(line, e, "call", number, name, body, sources)
    elif e["status"] == "raised":
        w.record(line, e, "raise", number, name, [f"  exception: {printable(e.get('error', ''))}"], [])
    else:
        lines, sources = w.item("output", saved.get("outputs.pt"), error=e.get("error", ""))
        w.record(line, e, "return", number, name, lines, sources)


def call_arguments(path: str, inputs: Any) -> Tuple[list, dict]:
    """(args, kwargs) of a call's `_inputs.pt`, which holds {"args": [...], "kwargs": {...}}."""
    args = inputs.get("args") if isinstance(inputs, dict) else None
    kwargs = inputs.get("kwargs") if isinstance(inputs, dict) else None
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict) or not all(
            manifest.NAME[0](k) for k in kwargs):
        raise InputError(f'{path}: does not hold {{"args": [...], "kwargs": {{...}}}} '
                         "(keyword names: strings without `:` or control characters)")
    return list(args), kwargs
