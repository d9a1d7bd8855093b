"""Tensor statistics of docs/log-format.md section 3.

CPU tensors go through the compiled single-pass core that the C++ shim
shares (cpp_runtime/include/aoti_debug/detail/stats.h).  CUDA tensors are
reduced on their device with torch ops (no copy to the host), and are
skipped while a CUDA graph is being captured, so no sync happens there.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
from typing import Optional

SKIP_EMPTY = "empty tensor"
SKIP_CAPTURE = "CUDA graph capture in progress"
SKIP_DEVICE = "device not supported"
SKIP_COPY = "could not be copied from the device"


@dataclasses.dataclass
class Stats:
    """One tensor's statistics (format.stats_lines writes them); from the
    compiled core (CPU) or from torch ops (compute_with_torch)."""

    kind: str = "none"                # float | int | bool | complex | none
    min: float = float("nan")         # complex: abs_min
    max: float = float("nan")         # complex: abs_max
    mean: float = float("nan")        # complex: abs_mean
    imin: int = 0                     # integer dtypes
    imax: int = 0
    nan_count: int = 0
    inf_count: int = 0
    true_count: int = 0
    false_count: int = 0
    first_nan: int = -1
    first_inf: int = -1
    skipped: Optional[str] = None
    numel: int = 0
    unsigned: bool = False            # int kind of an unsigned dtype
    hash: Optional[int] = None        # content hash (section 3.1), 64 bits
    sat_count: Optional[int] = None   # narrow float formats: elements at the largest finite magnitude
    first_sat: int = -1               # the first of them


def kind_of(dtype) -> str:
    import torch
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    if dtype.is_floating_point:
        return "float"
    if dtype in _INT_DTYPES():
        return "int"
    return "none"


def _UNSIGNED():
    import torch
    return {torch.uint8, torch.uint16, torch.uint32, torch.uint64}


def _INT_DTYPES():
    import torch
    return {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
            torch.uint16, torch.uint32, torch.uint64}


def saturation_limit(dtype) -> Optional[float]:
    """The largest finite magnitude of a dtype whose statistics count saturated
    values (sat_count: the float8 kinds), else None."""
    from ..native.core import SATURATION_LIMITS
    return SATURATION_LIMITS.get(str(dtype).replace("torch.", ""))


@dataclasses.dataclass
class ScaleCounts:
    """What a tensor a kernel uses as a scale holds that the record and the NaN check
    name (detail::scale_counts and ScaleFaults are the C++ shim's)."""
    zeros: int
    subnormals: int     # finite, non-zero, under the format's smallest normal
    nans: int
    infs: int
    first: int          # the logical index of the first zero, NaN or Inf; -1: none


def scale_counts(t) -> Optional[ScaleCounts]:
    """A scale's counts, for a tensor of a floating format (float4 aside) with
    elements, on the CPU or a device (on_device: torch ops there, one transfer);
    None where they are not counted: another device, a CUDA graph being captured
    (as the C++ shim, which copies a device scale to the host for them)."""
    import torch
    if (t.numel() == 0 or not t.dtype.is_floating_point
            or t.dtype == getattr(torch, "float4_e2m1fn_x2", None)):
        return None
    if on_device(t):
        return None if _capturing() else _device_scale_counts(t)
    if t.device.type != "cpu":
        return None
    v = t.detach().to(torch.float64).reshape(-1)
    a = v.abs()
    zero, nan, inf = a == 0, v.isnan(), v.isinf()
    bad = zero | nan | inf
    subnormal = torch.isfinite(a) & ~zero & (a < torch.finfo(t.dtype).smallest_normal)
    return ScaleCounts(int(zero.sum()), int(subnormal.sum()), int(nan.sum()), int(inf.sum()),
                       int(bad.to(torch.uint8).argmax()) if bool(bad.any()) else -1)


def _device_scale_counts(t) -> ScaleCounts:
    """scale_counts' figures by torch ops on the tensor's device, in one transfer."""
    import torch
    flat = t.detach().reshape(-1)
    v = flat.to(torch.float32) if flat.element_size() == 1 else flat   # float8 widened exactly
    a = v.abs()
    zero, nan, inf = a == 0, v.isnan(), v.isinf()
    bad = zero | nan | inf
    subnormal = torch.isfinite(a) & ~zero & (a < torch.finfo(t.dtype).smallest_normal)
    first = torch.where(bad.any(), bad.to(torch.uint8).argmax(), -1)
    got = transfer([x.to(torch.int64).reshape(()) for x in (zero.sum(), subnormal.sum(), nan.sum(), inf.sum(), first)])
    return ScaleCounts(*got)


def on_device(t) -> bool:
    """Is ``t`` reduced on its device by torch ops (compute_with_torch)?  The
    tests widen it to CPU tensors to run the device path here."""
    return t.device.type == "cuda"


def device_path_on() -> bool:
    """Can a tensor take the device path now (a CUDA context exists)?  Records
    and checks skip gathering device tensors otherwise (a CPU run pays
    nothing for it); the tests turn it on with on_device."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def host_view(t):
    """A device tensor as a host view of its storage span (from the view's first
    element to its last), in one blocking copy, as detail::host_view makes it:
    (the view, None), or (None, why not) -- a CUDA tensor only (on_device: the
    tests widen it), never while a CUDA graph is being captured."""
    import torch
    if not (on_device(t) or t.device.type == "cuda"):
        return None, SKIP_DEVICE
    if _capturing():
        return None, SKIP_CAPTURE
    t = t.detach()
    span = 0 if t.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    # float4 has no copy kernel: its bytes travel as uint8
    raw = t.view(torch.uint8) if t.dtype == torch.float4_e2m1fn_x2 else t
    try:
        host = raw.as_strided((span,), (1,), raw.storage_offset()).to("cpu", copy=True)
    except RuntimeError:   # a device error: the record says so, the run goes on
        return None, SKIP_COPY
    return host.view(t.dtype).as_strided(t.shape, t.stride(), 0), None


def _capturing() -> bool:
    """Is a CUDA graph being captured (device.py's hooks: tests inject theirs)?"""
    from . import device
    hooks = device.hooks()
    return hooks is not None and hooks.capturing()


def compute(t, hash: bool = False) -> Stats:
    """Statistics of ``t``; with ``hash`` its content hash too (records print it)."""
    if t.numel() == 0:
        return Stats(kind=kind_of(t.dtype), skipped=SKIP_EMPTY)
    if on_device(t):
        if _capturing():
            return Stats(kind=kind_of(t.dtype), skipped=SKIP_CAPTURE)
        return compute_with_torch(t, hash)
    if t.device.type != "cpu":
        return Stats(kind=kind_of(t.dtype), skipped=SKIP_DEVICE)
    try:
        from ..native import core as _native
        if _native.lib() is not None:
            return compute_native(t, hash=hash)
    except ImportError:
        pass
    return compute_with_torch(t, hash)


def holds_bad(s: Stats, count_inf: bool, count_sat: bool = False) -> bool:
    """What the NaN/Inf check fails on: NaN, with ``count_inf`` Inf too, with
    ``count_sat`` saturated values too (AOTI_DEBUG_NAN_CHECK_SAT)."""
    return s.nan_count > 0 or (count_inf and s.inf_count > 0) or (count_sat and bool(s.sat_count))


def finite(t, count_inf: bool, memo: Optional["Memo"] = None, count_sat: bool = False) -> bool:
    """No NaN (and, with ``count_inf``, no Inf) in ``t``?  The NaN/Inf check's
    clean path: on the CPU one scan of the raw bits by the compiled core, no
    statistics; a device tensor by its statistics (from ``memo`` when it
    holds them, as it does a CPU tensor's when the launch-end record computed
    its statistics in the compiled core).  What cannot be read here (other devices, CUDA graph
    capture, empty tensors) counts as finite, as in compute()'s skips.  With
    ``count_sat`` a saturated float8 or float4 value counts as bad too: the raw-bit scan
    does not see those, so such a tensor gets its statistics."""
    if t.numel() == 0:
        return True
    s = memo.get(t) if memo is not None else None
    if s is not None:
        return bool(s.skipped) or not holds_bad(s, count_inf, count_sat)
    count_sat = count_sat and saturation_limit(t.dtype) is not None
    if not on_device(t) and not count_sat:
        if t.device.type != "cpu":
            return True
        try:
            from ..native import core as _native
            if _native.lib() is not None:
                return _native.all_finite(t, count_inf)
        except ImportError:
            pass
    s = (memo or compute)(t)
    return bool(s.skipped) or not holds_bad(s, count_inf, count_sat)


def compute_native(t, max_threads: int = 0, isa_limit: int = 0, hash: bool = False) -> Stats:
    """By the compiled core alone (NativeUnavailable without it); the thread
    and ISA limits exist for tests: results never depend on them."""
    from ..native import core as _native
    return Stats(**_native.compute_stats(t, max_threads, isa_limit, hash))


class Memo:
    """The statistics of one record's tensors, for the record and the NaN/Inf
    check after it: the device ones fetched together before the record is
    formatted (compute_many: one transfer, not one per tensor), each tensor
    read once.  Called as compute() is; kept by identity, with the tensor."""

    def __init__(self, tensors=(), hash: bool = True) -> None:
        self.hash = hash
        self._kept = {}
        self._core = {}   # id -> (tensor, the core's Stats array, index): converted when asked
        self.prefetch(tensors)

    def keep_core(self, values, got) -> None:
        """What a record rendered by the compiled core computed: value k's
        statistics at got[k] (native.core.write_record), kind -1 where none."""
        for k, v in enumerate(values):
            if got[k].kind >= 0:
                self._core[id(v)] = (v, got, k)

    def prefetch(self, tensors) -> None:
        want = [t for t in tensors if id(t) not in self._kept and t.numel() and on_device(t)]
        if not want or _capturing():
            return
        for t, s in zip(want, compute_many(want, self.hash)):
            self._kept[id(t)] = (t, s)

    def get(self, t) -> Optional[Stats]:
        kept = self._kept.get(id(t))
        if kept is None and self._core:
            core = self._core.pop(id(t), None)
            if core is not None and core[0] is t:
                from ..native import core as _native
                kept = self._kept[id(t)] = (t, Stats(**_native.stats_fields(core[1][core[2]])))
        return kept[1] if kept is not None and kept[0] is t else None

    def __call__(self, t, hash: bool = False) -> Stats:
        s = self.get(t)
        return s if s is not None and (s.hash is not None or not hash) else compute(t, hash)


def compute_with_torch(t, hash: bool = False) -> Stats:
    """The same definitions with torch ops, on the tensor's own device.

    Used for CUDA and when the compiled core cannot be built.  Every scalar
    is reduced on the device and they come back in one small transfer (one
    wait): no op whose result size depends on the data (nonzero, boolean
    indexing), no `.item()` per scalar.  The mean's summation order is
    torch's, so its last digit may differ from the core's.
    """
    return compute_many([t], hash)[0]


def compute_many(tensors, hash: bool = False) -> list:
    """compute_with_torch of each tensor, the scalars of all of them (on one
    device) gathered and brought back in one transfer."""
    done, by_device = [None] * len(tensors), {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    for group in by_device.values():
        parts, finishers = [], []
        for i in group:
            finishers.append((i, len(parts), _queue(tensors[i], hash, parts)))
        got = transfer(parts) if parts else []
        for i, first, finish in finishers:
            done[i] = finish(got[first:])
    return done


def transfer(parts) -> list:
    """The one transfer: 0-d int64 tensors on one device, as Python ints."""
    import torch
    return torch.stack(parts).tolist()


def _queue(t, hash: bool, parts: list):
    """Queues the reductions of ``t`` onto ``parts`` (0-d int64 tensors: an
    integer, or a double's bits); returns the function that makes its Stats
    from the fetched words, starting at its first."""
    import torch
    kind = kind_of(t.dtype)
    if kind == "none":
        return lambda got: Stats(skipped=SKIP_DEVICE)
    flat = t.reshape(-1)
    numel = count = flat.numel()
    unsigned64 = t.dtype == getattr(torch, "uint64", None)
    want_int = lambda x: parts.append(x.to(torch.int64).reshape(()))
    want_double = lambda x: parts.append(x.to(torch.float64).reshape(()).view(torch.int64))
    if hash:
        want_int(_hash_total(flat))
    if kind == "bool":
        want_int(flat.sum())
    elif kind == "int":
        if unsigned64:   # reduced as int64 with the top bit flipped, which keeps the order
            top = _signed(1 << 63)
            biased = flat.view(torch.int64) ^ top
            want_int(biased.amin() ^ top), want_int(biased.amax() ^ top)
            want_double((biased.to(torch.float64) - float(top)).sum() / numel)
        else:
            wide = flat.to(torch.int64) if t.dtype in (getattr(torch, "uint16", None),
                                                        getattr(torch, "uint32", None)) else flat
            want_int(wide.amin()), want_int(wide.amax()), want_double(wide.sum(dtype=torch.float64) / numel)
    else:
        if kind == "complex":
            nan = torch.isnan(flat.real) | torch.isnan(flat.imag)
            inf = (torch.isinf(flat.real) | torch.isinf(flat.imag)) & ~nan
            values = torch.hypot(flat.real.to(torch.float64), flat.imag.to(torch.float64))
        elif t.dtype == getattr(torch, "float4_e2m1fn_x2", None):   # 2n values, which torch cannot convert
            values = e2m1_values(flat)
            nan = inf = torch.zeros_like(values, dtype=torch.bool)
        else:   # float8 kinds widened (exactly) for the reductions they lack
            values = flat.to(torch.float32) if flat.element_size() == 1 else flat
            nan, inf = torch.isnan(values), torch.isinf(values)
        count = values.numel()   # float4_e2m1fn_x2: two a byte
        nans, infs = nan.sum(), inf.sum()
        want_int(nans), want_int(infs)
        # the first index of each, or -1: argmax finds the first True
        want_int(torch.where(nans > 0, nan.to(torch.uint8).argmax(), -1))
        want_int(torch.where(infs > 0, inf.to(torch.uint8).argmax(), -1))
        want_double(torch.where(nan, float("inf"), values).amin())
        want_double(torch.where(nan, float("-inf"), values).amax())
        want_double(torch.where(nan, 0, values).sum(dtype=torch.float64) / (count - nans).clamp(min=1))
    limit = saturation_limit(t.dtype) if kind == "float" else None
    if limit is not None:
        at = values.abs() == limit
        sats = at.sum()
        want_int(sats), want_int(torch.where(sats > 0, at.to(torch.uint8).argmax(), -1))
    unsigned, itemsize = t.dtype in _UNSIGNED(), flat.element_size()

    def finish(got: list) -> Stats:
        digest = _hash_finish(got[0], numel, itemsize) if hash else None
        got = got[1:] if hash else got
        if kind == "bool":
            return Stats(kind=kind, true_count=got[0], false_count=numel - got[0], hash=digest)
        if kind == "int":
            wrap = (1 << 64) if unsigned64 else 0
            return Stats(kind=kind, imin=got[0] + wrap * (got[0] < 0), imax=got[1] + wrap * (got[1] < 0),
                         mean=_double(got[2]), hash=digest, unsigned=unsigned)
        s = Stats(kind=kind, nan_count=got[0], inf_count=got[1], first_nan=got[2], first_inf=got[3], hash=digest)
        if s.nan_count < count:
            s.min, s.max, s.mean = _double(got[4]), _double(got[5]), _double(got[6])
        if limit is not None:
            s.sat_count, s.first_sat = got[7], got[8]
        return s
    return finish


def e2m1_values(flat):
    """The 2n values of a 1-d float4_e2m1fn_x2 tensor as float32, on its device, in
    value order: byte k holds value 2k in its low nibble, 2k + 1 in its high one
    (torch's packing, common_quantized.pack_uint4).  A nibble is sign (bit 3),
    exponent (bits 2-1, bias 1) and mantissa (bit 0), as detail::e2m1_value; the
    values are decoded by arithmetic (exact in float32), no table copied to the device."""
    import torch
    raw = flat.view(torch.uint8).unsqueeze(-1)
    codes = torch.cat([raw & 0x0F, raw >> 4], dim=-1).reshape(-1)   # cat: the one stack is transfer's
    e = ((codes >> 1) & 3).to(torch.float32)
    m = (codes & 1).to(torch.float32)
    magnitude = torch.where(e == 0, m * 0.5, (1 + m * 0.5) * torch.exp2(e - 1))
    return torch.where((codes & 8) != 0, -magnitude, magnitude)


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


_HASH_KEY = 0x9E3779B97F4A7C15
_HASH_NUMEL = 0xC2B2AE3D27D4EB4F
_M64 = (1 << 64) - 1


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def _fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M64
    return x ^ (x >> 33)


def content_hash_with_torch(t) -> int:
    """Section 3.1's content hash by torch ops on the tensor's own device (the
    compiled core computes it alongside the statistics)."""
    flat = t.reshape(-1)
    return _hash_finish(int(_hash_total(flat)), flat.numel(), flat.element_size())


def _hash_total(flat):
    """The hash's sum over the tensor's 8-byte words, a 0-d int64 tensor on its
    device: int64 arithmetic wraps, which is the sum modulo 2**64 the
    definition asks for."""
    import torch
    raw = flat.contiguous().view(torch.uint8)
    pad = -raw.numel() % 8
    if pad:
        raw = torch.cat([raw, raw.new_zeros(pad)])
    w = raw.view(torch.int64)
    i = torch.arange(1, w.numel() + 1, dtype=torch.int64, device=w.device)
    x = w ^ (i * _signed(_HASH_KEY))
    lo, hi = x & 0xFFFFFFFF, (x >> 32) & 0xFFFFFFFF
    return (lo * hi + x).sum()


def _hash_finish(total: int, numel: int, itemsize: int) -> int:
    return _fmix64(((total & _M64) + numel * _HASH_NUMEL + itemsize) & _M64)
