"""What `aoti-debug replay` may run from a dump folder.  A dump folder is data:
replay never executes code it names unless the user allowed it (docs/dumps.md,
"What replay runs").

- A recorded Python call runs only when it names a `torch.ops` operator
  (module `torch._ops.<ns>`, qualname `<ns>::<op>[.<overload>]`, as the
  recorder writes them) that computes (ops.refusal: nothing that reads or
  writes files, prints, or changes the process's state), or a function of a
  module the user named with `--allow-module` (or of one of its submodules).
  Anything else is refused before anything is imported.  An allowed module is
  imported; the function is looked up attribute by attribute, never through
  another module or a dunder, and must be defined in the module the manifest
  names.
- A recorded AOTI run is replayed with what the user gave (`--package`), or,
  when the user trusts the dump's code (`--trust-dump-code`), with the
  recorder's copy of the artifact in the dump directory (`so_copy`, a file
  beside the run folder), once its sha256 is the `so_sha256` the recorder
  wrote (the hash is in the same manifest: it proves the copy unchanged, not
  who made it).  The copy is loaded from a private copy made while hashing, so
  it cannot change between the check and the load.  The `.so` path a manifest
  names (`so`) is never loaded.

Every refusal is a `RefusedInput` (an InputError: exit status 2) naming the file
and line and why.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import types
from typing import Any, Dict, Iterable, Optional, Sequence

from .manifest import MANIFEST
from .untrusted import InputError, open_regular, shorten

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OPS_MODULE = "torch._ops."
_BLOCK = 2**20


class RefusedInput(InputError):
    """The dump folder names something replay does not run or load (exit status 2)."""


def module_name(text: str) -> bool:
    """A dotted module name: `mylib`, `mylib.ops`."""
    return all(_WORD.match(part) for part in text.split("."))


def allowed(module: str, allow: Iterable[str]) -> bool:
    return any(module == m or module.startswith(m + ".") for m in allow)


# ---------------------------------------------------------------- Python calls

def check_call(entry: Dict[str, Any], allow: Sequence[str], here: str) -> None:
    """Refuse, before anything is imported, a call that names neither a torch.ops operator
    nor a function of an allowed module."""
    module, qualname = entry.get("module"), entry.get("qualname")
    if not module or not qualname or "<" in qualname:
        return          # cannot be re-imported at all: FAIL "cannot re-import", nothing runs
    named = shorten(f"{module}.{qualname}", 120)
    op = _torch_op_parts(module, qualname)
    if op is not None:
        why = _op_refusal(*op)
        if why:
            raise RefusedInput(f"{here}: call {entry['index']} names {named}, which is not replayed: it {why} "
                               "(replay runs operators that compute, nothing that acts outside the computation)")
        return
    if module_name(module) and allowed(module, allow):
        bad = next((p for p in qualname.split(".") if not _WORD.match(p) or p.startswith("__")), None)
        if bad is None:
            return
        raise RefusedInput(f"{here}: call {entry['index']} names {named}, whose part "
                           f"{shorten(bad)!r} is not a plain attribute name; replay does not look it up")
    raise RefusedInput(
        f"{here}: call {entry['index']} names {named}; replay calls only torch.ops operators and "
        "functions of the modules named with --allow-module (a dump folder is data: it does not "
        "choose the code that runs)")


def resolve(entry: Dict[str, Any], here: str) -> Any:
    """The undecorated function of a call that check_call let through; RefusedInput when the
    name leads out of the allowed module, LookupError (or the import's own error) when the
    function cannot be found."""
    module, qualname = entry.get("module"), entry.get("qualname")
    if not module or not qualname or "<" in qualname:
        raise LookupError(f"cannot re-import {module}.{qualname}")
    op = _torch_op_parts(module, qualname)
    if op is not None:
        return _torch_op(*op)
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
        if isinstance(obj, types.ModuleType):
            raise RefusedInput(f"{here}: call {entry['index']} names {shorten(f'{module}.{qualname}', 120)}, "
                               f"which leads to module {obj.__name__}; replay calls only functions "
                               f"defined in an allowed module")
    while hasattr(obj, "__aoti_debug_wrapped__"):
        obj = obj.__aoti_debug_wrapped__
    defined = getattr(obj, "__module__", None)
    if defined != module:
        raise RefusedInput(f"{here}: call {entry['index']} names {shorten(f'{module}.{qualname}', 120)}, "
                           f"which is defined in {defined}, not in {module}; replay calls only functions "
                           "defined in an allowed module")
    return obj


def _torch_op_parts(module: str, qualname: str):
    """(namespace, op, overload or None) when the call names a torch.ops operator."""
    if not module.startswith(_OPS_MODULE):
        return None
    ns = module[len(_OPS_MODULE):]
    head, sep, rest = qualname.partition("::")
    parts = rest.split(".") if sep else []
    if head != ns or not 1 <= len(parts) <= 2:
        return None
    if not all(_WORD.match(p) and not p.startswith("__") for p in [ns, *parts]):
        return None
    return ns, parts[0], parts[1] if len(parts) == 2 else None


def _op_refusal(ns: str, op: str, overload: Optional[str]) -> str:
    """Why the operator may not be replayed (ops.refusal; a packet: any of its overloads,
    since the arguments choose one at the call), "" when it may or is not registered
    (then replay says it cannot re-import it)."""
    from .ops import refusal
    try:
        found = _torch_op(ns, op, overload)
    except (AttributeError, RuntimeError, LookupError):
        return ""
    overloads = [found] if overload is not None else [getattr(found, o) for o in found.overloads()]
    return next((why for why in map(refusal, overloads) if why), "")


def _torch_op(ns: str, op: str, overload: Optional[str]):
    import torch
    space = getattr(torch.ops, ns)
    if not isinstance(space, torch._ops._OpNamespace):
        raise LookupError(f"torch.ops.{ns} is not an operator namespace")
    found = getattr(space, op)
    if overload is not None:
        found = getattr(found, overload)
    if not isinstance(found, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        raise LookupError(f"{ns}::{op} is not an operator")
    return found


# ---------------------------------------------------------------- AOTI artifacts

TRUST_FLAG = "--trust-dump-code"


def recorded_artifact(folder: str, run: Dict[str, Any], number: int, trust: bool = False) -> str:
    """The recorder's copy of a run's artifact, once the user trusts the dump's code
    (`trust`) and its sha256 is the recorded one."""
    here = f"{os.path.join(folder, MANIFEST)}:{number}"
    copy, sha = run.get("so_copy"), run.get("so_sha256")
    if not copy:
        raise RefusedInput(f"{folder}: the run kept no copy of its artifact in the dump directory "
                           "(the .so a manifest names is never loaded); pass --package P.pt2")
    if not sha:
        raise RefusedInput(f"{here}: the run line gives no so_sha256 for its artifact copy {copy} "
                           "(written by an older aoti-debug), so the copy is not loaded; pass --package P.pt2")
    path = os.path.normpath(os.path.join(folder, copy))     # ../<file>: manifest.py checked the form
    if not os.path.lexists(path):
        raise RefusedInput(f"{path}: the run's artifact copy is missing; pass --package P.pt2")
    if not trust:
        raise RefusedInput(f"{path}: replaying {here} would run this library, code the dump directory "
                           f"holds; pass --package P.pt2 with an artifact you trust, or {TRUST_FLAG} "
                           "to run it")
    _check_hash(path, _hash(path), sha, here)
    return path


def private_copy(path: str, sha: str, here: str, target: str) -> str:
    """`path` copied to `target` while hashing: the file loaded is the file checked."""
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for block in _blocks(path):
            digest.update(block)
            out.write(block)
    _check_hash(path, digest.hexdigest(), sha, here)
    return target


def _check_hash(path: str, got: str, sha: str, here: str) -> None:
    if got != sha:
        raise RefusedInput(f"{path}: its sha256 is {got}, not the {sha} recorded in {here} (the file "
                           "changed after it was recorded), so it is not loaded; pass --package P.pt2 "
                           "to replay with an artifact you trust")


def _hash(path: str) -> str:
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
    return digest.hexdigest()


def _blocks(path: str):
    with open_regular(path) as f:
        while True:
            block = f.read(_BLOCK)
            if not block:
                return
            yield block
