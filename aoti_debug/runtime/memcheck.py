"""The memory check for torch.compile's instrumented wrapper.

The Python twin of MemChecks in cpp_runtime/include/aoti_debug/detail/
memcheck.h, with the same messages (docs/checks.md, "Memory check"), on the
same guarding allocator (aoti_debug/native/memcheck.py): after every launch,
guards damaged since the last check, then outputs holding poison that none
of the launch's inputs held.  `warn` writes a `note - memcheck`, `raise`
raises from the model call.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from . import poison, state

ORDER = {"off": 0, "warn": 1, "raise": 2}


class MemcheckError(RuntimeError):
    """Raised into the model's caller by `raise` (a RuntimeError, as from AOTI)."""


def _tensor(value: Any) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "dtype")


def _cpu(value: Any) -> bool:
    return _tensor(value) and value.device.type == "cpu"


def _floating(value: Any) -> bool:
    return _cpu(value) and value.dtype.is_floating_point


def tensor_words(name: str, role: Optional[str], t: Any) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    return f"{name} ({role + ', ' if role else ''}{dtype}{tuple(t.shape)})"


def launch_words(model: str, run: int, launch: int, site) -> str:
    from ..plan import launch_module, where
    return (f"launch {model}:{run}.{launch} {site.kernel} (nodes={site.nodes or '-'} "
            f"source={where(site.source, launch_module(site.lines))})")


class MemChecks:
    """One per run of a wrapper compiled with the check, while it is on."""

    def __init__(self, action: str, model: str, run: int, level: int) -> None:
        from ..native import memcheck as native
        self.raise_ = action == "raise"
        self.model, self.run, self.level = model, run, level
        self.poisoned: List[int] = []   # outputs already reported, by data pointer
        self.fired = None               # the black box's BlackBox.fired, while it is on
        self.handle, why = native.api()
        self.on = self.handle is not None
        if not self.on:
            state.tell(level, "memcheck", f"the memory check is off: {why}", once=True)
            return
        self._take = native.take
        self.handle.aotid_mc_enter()

    def __del__(self) -> None:
        # the run is over, returned or raised: while no run is active nothing is guarded
        handle = getattr(self, "handle", None)
        if handle is not None:
            self.handle = None
            handle.aotid_mc_leave()

    def _report(self, msg: str, launch: int, site, values: Sequence[Any]) -> None:
        state.found("memcheck", msg, MemcheckError("aoti-debug memcheck: " + msg), self.raise_, self.level,
                    self.fired, launch, site, values)

    def before(self, launch: int, site) -> None:
        self.handle.aotid_mc_mark(self.run, launch, site.kernel.encode("utf-8", "replace"))

    def _damage(self, launch: int, site, names: Sequence[str], roles: Sequence[Optional[str]],
                values: Sequence[Any]) -> None:
        for d in self._take(self.handle):
            what = ""
            for name, role, v in zip(names, roles, values):
                p = v.data_ptr() if _cpu(v) else -1
                if d.data <= p < d.data + max(d.nbytes, 1):
                    what = tensor_words(name, role, v)
                    break
            what = what or f"a tensor of {d.nbytes} bytes"
            kernel = d.kernel.decode("utf-8", "replace")
            if site is not None and d.run == self.run and d.launch == launch:
                what += ", allocated by this launch"
            elif d.launch > 0:
                what += f", allocated during launch {d.run}.{d.launch} {kernel}"
            else:
                what += ", allocated by the wrapper"
            if d.freed:
                what += ", freed since"
            msg = launch_words(self.model, self.run, launch, site) if site is not None else \
                f"run {self.run} of model {self.model!r}"
            where = "right" if d.offset == 0 else f"{d.offset} byte{'' if d.offset == 1 else 's'}"
            msg += (f" wrote {'past the end of ' if d.after else 'before the start of '}{what}: "
                    f"{d.bytes} byte{'' if d.bytes == 1 else 's'} damaged, "
                    + (f"starting {where} after its end" if d.after else f"ending {where} before its start"))
            if self.handle.aotid_mc_concurrent() > 1:
                msg += (" (other runs were active in this process: the write may come from one of "
                        "their launches)")
            self._report(msg, launch, site, values)

    def after(self, launch: int, site, values: Sequence[Any]) -> None:
        names = [name for name, _ in site.args]
        roles = [role for _, role in site.args]
        self._damage(launch, site, names, roles, values)
        # outputs first: a clean launch reads each output once and never its inputs (weights)
        found = []   # (name, role, tensor, count, first) of outputs holding poison
        for (name, role), v in zip(site.args, values):
            if role != "in" and _floating(v) and bool(v.isnan().any()):
                count, first = poison.count(v)
                if count:
                    found.append((name, role, v, count, first))
        if not found or any(role == "in" and _floating(v) and bool(v.isnan().any()) and poison.count(v)[0]
                            for (_, role), v in zip(site.args, values)):
            return
        for name, role, v, count, first in found:
            if v.data_ptr() in self.poisoned:
                continue
            self.poisoned.append(v.data_ptr())
            msg = launch_words(self.model, self.run, launch, site)
            words = tensor_words(name, role, v)
            if count == v.numel() and role == "out":
                msg += (f" never wrote its output {words}: all {v.numel()} elements hold memcheck "
                        f"poison (memory nobody wrote)")
            else:
                msg += (f" read memory nobody wrote (or out of bounds): {count} of {v.numel()} elements "
                        f"of {words} hold memcheck poison (first at flat index {first}) and none of its "
                        f"inputs held any")
            self._report(msg, launch, site, values)

    def finish(self, launch: int, names: Sequence[str], values: Sequence[Any]) -> None:
        self._damage(launch, None, names, ["model output"] * len(names), values)
