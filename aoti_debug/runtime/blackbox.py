"""The black box of torch.compile's wrapper: the Python twin of BlackBox in
cpp_runtime/include/aoti_debug/detail/blackbox.h (docs/dumps.md, "The black
box").

Every entry is written by the C++ writer through the binding
(native/core.py), so the wrapper's launches go into the process's one ring
beside those of its AOTI artifacts, in the same layout, under the same lock.
"""

from __future__ import annotations

import array
from typing import Any, Optional, Sequence

from . import sink, state


def open_ring(launches: int, level: int, torch_version: str) -> bool:
    """Opens the process's ring (or finds it open); False when it cannot be
    kept (a note says why, once)."""
    native = sink.native()
    if native is None:
        state.tell(level, "blackbox", "cannot keep the black box: the C++ runtime is unavailable; "
                   "the model runs without it", once=True)
        return False
    s = state.settings()
    return native.blackbox_open(launches, level, s.logdest, torch_version, s.dump_dir, s.blackbox_max_mb,
                                s.dump_max_size_gb, s.dump_max_count, s.rank, s.world)


def site_handle(site) -> int:
    """The C++ description of a launch site, made on its first launch."""
    if not site._box:
        site._box = sink.native().blackbox_site(site.kernel, site.nodes, site.source, site.lines, site.ops,
                                                site.args, site.constants, site.scales, site.dequants)
    return site._box


class BlackBox:
    """One per run while the black box is on (``Run.box``)."""

    __slots__ = ("model", "run", "level", "ref", "ref_at", "dumped", "native")

    def __init__(self, model: str, run: int, level: int) -> None:
        self.model = model.encode("utf-8", "replace")
        self.run, self.level = run, level
        self.ref = array.array("q", (0, 0, 0))   # the launch in flight's entry, written by the C++ side
        self.ref_at = self.ref.buffer_info()[0]
        self.dumped = False
        self.native = sink.native()

    def inputs(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """The run's model inputs."""
        self.native.blackbox_run(self.model, self.run, names, values)

    def before(self, launch: int, site, values: Sequence[Any]) -> None:
        """A launch's record and its in/inout arguments (`values` in site order,
        None for out-only ones)."""
        self.native.blackbox_launch(site._box or site_handle(site), self.model, self.run, launch, self.level,
                                    values, self.ref_at)

    def after(self) -> None:
        """The launch returned."""
        if self.ref[0]:
            self.native.blackbox_done(self.ref_at)
            self.ref[0] = 0

    def fired(self, what: str, launch: int, site: Optional[Any], values: Sequence[Any] = ()) -> None:
        """A check fired at `launch` (no site: outside a launch): the ring goes to
        a dump folder, once per run, with the failing launch's outputs."""
        if self.dumped:
            return
        self.dumped = True
        try:
            self.native.blackbox_fired(what, self.model, self.run, launch, self.level,
                                         site_handle(site) if site is not None else 0,
                                         values if site is not None else ())
        except Exception as exc:   # never hides the check that fired
            state.tell(self.level, "blackbox", f"cannot dump the black box: {type(exc).__name__}: {exc}")
