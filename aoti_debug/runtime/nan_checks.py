"""NaN/Inf checks for torch.compile's instrumented wrapper.

The Python twin of NanChecks in cpp_runtime/include/aoti_debug/detail/
checks.h, with the same messages (docs/checks.md): after every launch each
output it wrote is checked; a launch whose inputs were finite and whose
output is not is the origin, later ones that read non-finite data are
victims.  `warn` writes a `note - nan-check` per failing output and a summary
at the end of the run; `raise` raises at the origin (or, when every failing
launch only propagated what it was given, at the end of the run).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from . import poison, state
from . import stats as stats_mod
from ..plan import launch_module, where
from ..settings import NanCheck

_ORDER = {"off": 0, "warn": 1, "raise": 2}


def effective(compiled: NanCheck, requested: Optional[NanCheck]) -> NanCheck:
    """What a run may do: at most what was compiled in (None: nothing requested)."""
    if requested is None:
        return compiled
    action = min(compiled.action, requested.action, key=_ORDER.__getitem__)
    return NanCheck(action, action != "off" and compiled.count_inf and requested.count_inf)


def asks_for_more(compiled: NanCheck, requested: NanCheck) -> bool:
    return (_ORDER[requested.action] > _ORDER[compiled.action]
            or (requested.count_inf and not compiled.count_inf))


_ZERO, _NAN, _INF = 1, 2, 4


def _scale_found(c) -> int:
    """What a bad scale held (stats.scale_counts' counts), as bits: never 0."""
    return (_ZERO if c.zeros else 0) | (_NAN if c.nans else 0) | (_INF if c.infs else 0) or _ZERO


def _scale_words(found: int) -> str:
    """The summary's name for the bad scales of a run: `zero scales`, `zero/NaN scales`."""
    return "/".join(w for bit, w in ((_ZERO, "zero"), (_NAN, "NaN"), (_INF, "Inf")) if found & bit) + " scales"


_FLOAT8, _FLOAT4 = 1, 2


def _sat_words(found: int) -> str:
    """The summary's name for saturated outputs: `saturated float8`, `saturated float8/float4`."""
    return "saturated " + "/".join(w for bit, w in ((_FLOAT8, "float8"), (_FLOAT4, "float4")) if found & bit)


class NanCheckError(RuntimeError):
    """Raised into the model's caller by `raise` (a RuntimeError, as from AOTI)."""


def _tensor(value: Any) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "dtype")


class NanChecks:
    """One per run; `Run.nan` is None when the check is off."""

    def __init__(self, check: NanCheck, run: int, level: int = 1, model: str = "model") -> None:
        self.raise_ = check.action == "raise"
        self.count_inf = check.count_inf
        self.count_sat = state.settings().nan_check_sat   # AOTI_DEBUG_NAN_CHECK_SAT (a run-time variable)
        self.run = run
        self.model = model   # the instance its messages name (`ranker#2:1.3`)
        self.level = level   # 0: warnings go to stderr, not into a log
        # Buffers known to hold NaN/Inf, by data pointer (not name: a reused
        # buffer keeps what its writer found): model inputs found bad, outputs
        # last written bad.  Clean ones are not kept: an input a launch only
        # reads is unchanged since it was written, so the bad path scans it.
        self.bad: set = set()
        self.failures: List[str] = []
        # the failing launches' kernels, one per launch: those that wrote NaN/Inf ("nan"),
        # those that wrote saturated float8 or float4 values and no NaN/Inf ("sat"), those that
        # read a bad scale ("scale"), which the summary counts apart
        self.kernels: Dict[str, List[str]] = {"nan": [], "sat": [], "scale": []}
        self.failed_launch: Dict[str, int] = {}
        self.scale_found = 0   # what the bad scales held: _ZERO | _NAN | _INF
        self.sat_found = 0     # the formats of the saturated outputs: _FLOAT8 | _FLOAT4
        self.fired = None   # the black box's BlackBox.fired, while it is on
        self.devices = stats_mod.device_path_on()   # device outputs fetched together (_fetched)

    def _stats(self, t, memo: Optional[stats_mod.Memo]) -> Optional[stats_mod.Stats]:
        if not _tensor(t) or t.device.type not in ("cpu", "cuda") or t.numel() == 0:
            return None
        s = (memo or stats_mod.compute)(t)
        return None if s.skipped else s

    def _bad(self, s: stats_mod.Stats) -> bool:
        return stats_mod.holds_bad(s, self.count_inf, self.count_sat)

    def _finite(self, t, memo: Optional[stats_mod.Memo] = None) -> bool:
        return not _tensor(t) or stats_mod.finite(t, self.count_inf, memo, self.count_sat)

    def _fetched(self, tensors, memo: Optional[stats_mod.Memo] = None) -> Optional[stats_mod.Memo]:
        """`memo` (a new one if None) with the device tensors among `tensors`
        read together: one transfer, not one per tensor.  In a run without a
        device (device_path_on when it began), `memo` as it is."""
        if not self.devices:
            return memo
        memo = memo if memo is not None else stats_mod.Memo(hash=False)
        memo.prefetch([t for t in tensors if _tensor(t)])
        return memo

    def inputs(self, values: Sequence[Any], memo: Optional[stats_mod.Memo] = None) -> None:
        """The model's inputs; `memo`: what the run record read."""
        memo = self._fetched(values, memo)
        for v in values:
            if _tensor(v) and not self._finite(v, memo):
                self.bad.add(v.data_ptr())

    @staticmethod
    def _outputs(site, values):
        """(k, label, tensor) of every output; an extern kernel returning several
        tensors (sort: values, indices) is one tuple here."""
        for k, ((name, role), v) in enumerate(zip(site.args, values)):
            if role == "in":
                continue
            parts = [(f"{name}[{i}]", t) for i, t in enumerate(v)] if isinstance(v, (tuple, list)) else [(name, v)]
            for label, t in parts:
                if _tensor(t):
                    yield k, label, t

    def after(self, launch: int, site, sources: Sequence[str], values: Sequence[Any],
              memo: Optional[stats_mod.Memo] = None) -> None:
        """`values`: every site argument after the launch; `sources[k]`: where
        output k was made, `file:line, module a.b.c` as the codegen formatted it
        (format.where; "" = the site's line); `memo`: what the launch-end record
        read.  The clean path scans each output once, its device outputs
        together (one transfer)."""
        if getattr(site, "scales", None):
            self._scales(launch, site, values)
        outputs = list(self._outputs(site, values))
        memo = self._fetched([t for _, _, t in outputs], memo)
        if not all(self._finite(t, memo) for _, _, t in outputs):
            return self._after_bad(launch, site, sources, values, outputs, memo)
        for _, _, t in outputs if self.bad else ():
            self.bad.discard(t.data_ptr())

    def _after_bad(self, launch, site, sources, values, outputs, memo) -> None:
        memo = self._fetched([v for (_, role), v in zip(site.args, values)
                              if role == "in" and _tensor(v) and v.data_ptr() not in self.bad], memo)
        tainted = []
        for (name, role), v in zip(site.args, values):
            if role == "out" or not _tensor(v):
                continue
            if v.data_ptr() in self.bad or (role == "in" and not self._finite(v, memo)):
                tainted.append(name)
        for k, label, t in outputs:
            s = self._stats(t, memo)
            if s is None:
                continue
            bad = self._bad(s)
            (self.bad.add if bad else self.bad.discard)(t.data_ptr())
            if bad:
                self._report(launch, site, label, sources[k] or site.source, s, tainted,
                             poison.at(t, self._first_bad(s)), values,
                             _FLOAT4 if str(t.dtype) == "torch.float4_e2m1fn_x2" else _FLOAT8)

    def _scales(self, launch: int, site, values: Sequence[Any]) -> None:
        """The scales the launch read (site.scales): one holding a zero, NaN or Inf is a
        finding of its own, named here, whatever the outputs hold (a zero scale leaves no
        NaN at all); a subnormal one is not (the record counts it)."""
        for k, scale in sorted(site.scales.items()):
            t = values[k] if k < len(values) else None
            c = stats_mod.scale_counts(t) if _tensor(t) else None   # CPU and device scales, as the C++ shim's
            if c is None or c.first < 0:
                continue
            name = site.args[k][0]
            msg = (f"launch {self.model}:{self.run}.{launch} {site.kernel} "
                   f"(source {where(site.source, launch_module(site.lines))}) read "
                   f"{scale} {name} holding {c.zeros} zero, {c.nans} NaN and {c.infs} Inf "
                   f"(first at flat index {c.first}); a bad scale is the origin "
                   "of what this launch writes, not its arithmetic")
            if k in site.constants:
                msg += f"; {name} is one of the artifact's constants"
            writer = getattr(site, "writers", {}).get(k)
            if writer:   # a scale computed in the model: where to look next
                msg += f"; {name} was last written by launch {self.model}:{self.run}.{writer[0]} {writer[1]}"
            self._fail(launch, site, msg, True, values, _scale_found(c))

    def _counts(self, s: stats_mod.Stats) -> str:
        out = f"{s.nan_count} NaN"
        if self.count_inf:
            out += (", " if self.count_sat else " and ") + f"{s.inf_count} Inf"
        return out + (f" and {s.sat_count or 0} saturated" if self.count_sat else "")

    def _first_bad(self, s: stats_mod.Stats) -> int:
        first = s.first_nan
        if self.count_inf and s.first_inf >= 0 and (first < 0 or s.first_inf < first):
            first = s.first_inf
        if self.count_sat and s.sat_count and s.first_sat >= 0 and (first < 0 or s.first_sat < first):
            first = s.first_sat
        return first

    def _report(self, launch: int, site, buffer: str, source: str, s, tainted: List[str],
                poisoned: bool = False, values: Sequence[Any] = (), fmt: int = 1) -> None:
        """`fmt`: the output's format, _FLOAT8 or _FLOAT4, which a finding of saturated values
        alone is counted under."""
        only_sat = not s.nan_count and not (self.count_inf and s.inf_count)
        if "\n" in source:   # a float8 output: its cast's line follows, named for saturation only
            head, _, cast = source.partition("\n")
            source = cast if only_sat else head
        msg = (f"launch {self.model}:{self.run}.{launch} {site.kernel} (source {source or '-'}) wrote "
               f"{self._counts(s)} into {buffer} (first at flat index {self._first_bad(s)}); ")
        if not tainted and self.count_sat:
            msg += ("its inputs were finite and unsaturated, so this launch is where they first appear"
                    if self.count_inf else
                    "its inputs held no NaN and no saturated value, so this launch is where they first appear")
        elif not tainted:
            msg += ("its inputs were finite, so this launch is where they first appear" if self.count_inf
                    else "its inputs held no NaN, so this launch is where NaN first appears")
        else:
            msg += ("its input " if len(tainted) == 1 else "its inputs ") + ", ".join(tainted)
            msg += " already held NaN/Inf" if self.count_inf else " already held NaN"
            msg += " or saturated values (look earlier)" if self.count_sat else " (look earlier)"
        if poisoned:
            msg += "; the first is memcheck poison: memory nobody wrote, not arithmetic"
        self._fail(launch, site, msg, not tainted, values, saturated=fmt if only_sat else 0)

    def _fail(self, launch: int, site, msg: str, origin: bool, values: Sequence[Any], scale: int = 0,
              saturated: int = 0) -> None:
        """A finding: told, raised at its origin under `raise`, else kept for the summary
        (`scale`: what a bad scale held, _scale_found; 0: an output's finding, NaN/Inf or,
        `saturated`, saturated values alone of a _FLOAT8 or _FLOAT4 format)."""
        raising = self.raise_ and origin
        if self.level >= 1 or not raising:   # at level 0 the exception alone says it
            state.tell(self.level, "nan-check", msg)
        if self.fired is not None:
            self.fired("nan-check", launch, site, values)
        if raising:
            raise NanCheckError("aoti-debug NaN check: " + msg)
        self.failures.append(msg)
        self.scale_found |= scale
        self.sat_found |= 0 if scale else saturated
        kind = "scale" if scale else "sat" if saturated else "nan"
        if self.failed_launch.get(kind) != launch:   # a launch with several bad outputs counts once
            self.failed_launch[kind] = launch
            self.kernels[kind].append(site.kernel)

    def finish(self) -> None:
        if not self.failures:
            return
        parts = []
        for what, kernels in (("NaN/Inf", self.kernels["nan"]), (_sat_words(self.sat_found), self.kernels["sat"]),
                              (_scale_words(self.scale_found), self.kernels["scale"])):
            if not kernels:
                continue
            n = len(kernels)
            per_kernel: Dict[str, int] = {}
            for k in kernels:
                per_kernel[k] = per_kernel.get(k, 0) + 1
            parts.append(f"{what} in {n} launch{'' if n == 1 else 'es'}:" + ",".join(
                f" {k} x{c}" for k, c in per_kernel.items()))
        summary = f"run {self.run}: " + "; ".join(parts)
        state.tell(self.level, "nan-check", summary)
        if self.raise_:
            raise NanCheckError("aoti-debug NaN check: " + self.failures[0])
