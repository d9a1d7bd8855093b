"""The statistics core (cpp_runtime/include/aoti_debug/detail/stats.h) and the
number format, through aoti_debug.native.core, against independent references:
torch conversions to float64, Python's own arithmetic for the fixed summation
order, and Python's '%.6f' / '%.6e' for numbers."""

from __future__ import annotations

import math
import random
import struct

import pytest
import torch
from hypothesis import given, settings, strategies as st

from aoti_debug.native import core as _native
from aoti_debug.runtime.stats import compute_native
from aoti_debug.runtime.format import stats_lines

BLOCK = 65536


@pytest.fixture(scope="session")
def native():
    assert _native.lib() is not None, "the C++ runtime must build in the test environment"
    return _native


# ---------------------------------------------------------------- references

# e2m1's eight magnitudes by code 0..7 (OCP Microscaling Formats spec, FP4 E2M1: 0, the
# subnormal 0.5, then 1, 1.5, 2, 3, 4, 6); bit 3 of a nibble is the sign
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
FP4 = torch.float4_e2m1fn_x2


def e2m1_pair(byte):
    """A float4_e2m1fn_x2 byte's two values in logical order: the low nibble first
    (torch's packing, common_quantized.pack_uint4: byte = second << 4 | first)."""
    return [(-E2M1[n & 7] if n & 8 else E2M1[n & 7]) for n in (byte & 15, byte >> 4)]


def logical_values(t):
    """Elements in logical (row-major) order as Python numbers; complex -> magnitude
    (NaN when either part is NaN), floating -> float64 by torch's own conversion;
    float4_e2m1fn_x2 -> its two values a byte (e2m1_pair)."""
    flat = t.reshape(-1)  # copies a non-contiguous view in logical order
    if t.dtype == FP4:
        return [v for b in flat.view(torch.uint8).tolist() for v in e2m1_pair(b)]
    if t.dtype.is_complex:
        c = flat.to(torch.complex128)
        return [math.nan if (math.isnan(r) or math.isnan(i)) else math.hypot(r, i)
                for r, i in zip(c.real.tolist(), c.imag.tolist())]
    if t.dtype.is_floating_point:
        return flat.to(torch.float64).tolist()
    return flat.tolist()


def fixed_order_sum(vals):
    """docs/log-format.md section 3, literally: blocks of 65536, lane i % 8, fixed combine."""
    total = -0.0
    for b in range(0, len(vals), BLOCK):
        lanes = [-0.0] * 8
        for i, v in enumerate(vals[b:b + BLOCK]):
            if v != v:  # NaN: skipped (adding -0.0 changes nothing)
                continue
            lanes[i % 8] += float(v)
        total += ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + (
            (lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    return total


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or bits(a) == bits(b)


def check_floating(t, s):
    vals = logical_values(t)
    nans = [i for i, v in enumerate(vals) if v != v]
    infs = [i for i, v in enumerate(vals) if v == v and math.isinf(v)]
    rest = [v for v in vals if v == v]
    assert s.kind == ("complex" if t.dtype.is_complex else "float")
    assert s.numel * (2 if t.dtype == FP4 else 1) == len(vals)
    assert s.nan_count == len(nans)
    assert s.inf_count == len(infs)
    assert s.first_nan == (nans[0] if nans else -1)
    assert s.first_inf == (infs[0] if infs else -1)
    if t.dtype.itemsize == 1:   # the float8 kinds and float4: values at the largest finite magnitude
        top = 6.0 if t.dtype == FP4 else torch.finfo(t.dtype).max
        at = [i for i, v in enumerate(vals) if abs(v) == top]
        assert (s.sat_count, s.first_sat) == (len(at), at[0] if at else -1)
    else:
        assert (s.sat_count, s.first_sat) == (None, -1)
    if not rest:
        assert math.isnan(s.min) and math.isnan(s.max) and math.isnan(s.mean)
        return
    assert s.min == min(rest) and s.max == max(rest)
    # zeros: -0.0 is the smaller one (order-free)
    if s.min == 0:
        assert math.copysign(1, s.min) == (-1 if any(v == 0 and math.copysign(1, v) < 0 for v in rest) else 1)
    if s.max == 0:
        assert math.copysign(1, s.max) == (1 if any(v == 0 and math.copysign(1, v) > 0 for v in rest) else -1)
    assert same_float(s.mean, fixed_order_sum(vals) / len(rest))


def check_integer(t, s):
    vals = logical_values(t)
    assert s.kind == "int" and s.skipped is None
    assert s.numel == len(vals)
    assert s.imin == min(vals) and s.imax == max(vals)
    assert isinstance(s.imin, int) and isinstance(s.imax, int)
    assert same_float(s.mean, fixed_order_sum([float(v) for v in vals]) / len(vals))


def check(t, s):
    if t.dtype == torch.bool:
        vals = t.reshape(-1).tolist()
        assert (s.kind, s.true_count, s.false_count) == ("bool", sum(vals), len(vals) - sum(vals))
    elif t.dtype.is_floating_point or t.dtype.is_complex:
        check_floating(t, s)
    else:
        check_integer(t, s)


# ---------------------------------------------------------------- corpus

SPECIALS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-40, -1e-45, 3.0e38, -2.5, 1.0]


def floats(dtype, n=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 3
    x[: len(SPECIALS)] = torch.tensor(SPECIALS, dtype=torch.float64)
    x = x[torch.randperm(n, generator=g)]
    return x.to(dtype)


def all_patterns(dtype):
    if dtype.itemsize == 1:   # float4_e2m1fn_x2: every pair of values
        return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    return (torch.arange(65536, dtype=torch.int32) - 32768).to(torch.int16).view(dtype)


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz,
          torch.float8_e8m0fnu]


def fp4_bytes(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).view(FP4)


def int_tensor(dtype, n=2000, seed=1):
    info = torch.iinfo(dtype) if dtype not in (torch.uint16, torch.uint32, torch.uint64) else None
    rng = random.Random(seed)
    if dtype == torch.uint64:
        lo, hi = 0, 2**64 - 1
    elif dtype == torch.uint32:
        lo, hi = 0, 2**32 - 1
    elif dtype == torch.uint16:
        lo, hi = 0, 2**16 - 1
    else:
        lo, hi = info.min, info.max
    vals = [lo, hi] + [rng.randint(lo, hi) for _ in range(n - 2)]
    rng.shuffle(vals)
    if dtype == torch.uint64:  # torch cannot build uint64 above 2**63 from Python ints directly
        return torch.tensor([v - 2**64 if v >= 2**63 else v for v in vals],
                            dtype=torch.int64).view(torch.uint64)
    return torch.tensor(vals, dtype=dtype)


CASES = {
    "float32": lambda: floats(torch.float32),
    "float64": lambda: torch.cat([floats(torch.float64), torch.tensor([5e-324, -1.7976931348623157e308])]),
    "float16": lambda: floats(torch.float16),
    "bfloat16": lambda: floats(torch.bfloat16),
    "float16-all-patterns": lambda: all_patterns(torch.float16),
    "bfloat16-all-patterns": lambda: all_patterns(torch.bfloat16),
    **{f"{str(d)[6:]}-all-patterns": (lambda d=d: all_patterns(d)) for d in FLOAT8 + [FP4]},
    "float4_e2m1fn_x2-random": lambda: fp4_bytes((37, 11), 3),
    "float4_e2m1fn_x2-negative-zeros": lambda: torch.full((5,), 0x88, dtype=torch.uint8).view(FP4),
    **{str(d)[6:]: (lambda d=d: int_tensor(d)) for d in
       (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
        torch.uint64)},
    "int64-extremes": lambda: torch.tensor([-2**63, 2**63 - 1, 0, -1], dtype=torch.int64),
    "bool": lambda: torch.rand(777, generator=torch.Generator().manual_seed(2)) > 0.3,
    "bool-bytes-not-0-1": lambda: torch.tensor([0, 1, 2, 255, 0], dtype=torch.uint8).view(torch.bool),
    "complex64": lambda: torch.complex(floats(torch.float32, 500, 3), floats(torch.float32, 500, 4)),
    "complex128": lambda: torch.complex(floats(torch.float64, 500, 5), floats(torch.float64, 500, 6)),
    "complex-nan-inf-parts": lambda: torch.tensor(
        [complex(math.inf, math.nan), complex(math.inf, 1), complex(1, -math.inf), complex(3, 4),
         complex(math.nan, 0), complex(-0.0, 0.0)], dtype=torch.complex128),
    # both signs, NaN beside them, overflows a saturating cast clamped (e4m3fn: Inf too)
    "float8_e4m3fn-saturated": lambda: torch.tensor(
        [448.0, -448.0, math.nan, 500.0, -1e9, math.inf, 1.0, -0.0, 416.0]).to(torch.float8_e4m3fn),
    "float8_e5m2-saturated": lambda: torch.tensor(
        [57344.0, -57344.0, math.nan, 6e4, math.inf, -2.0, 49152.0]).to(torch.float8_e5m2),
    "all-nan": lambda: torch.full((5,), math.nan),
    "all-negative-zero": lambda: torch.full((9,), -0.0),
    "mixed-zeros": lambda: torch.tensor([0.0, -0.0, 0.0]),
    "inf-and-minus-inf": lambda: torch.tensor([math.inf, -math.inf, 1.0]),
    "sum-overflows": lambda: torch.full((16,), 1.7e308, dtype=torch.float64),
    "zero-d": lambda: torch.tensor(-3.5),
    "zero-d-int": lambda: torch.tensor(7, dtype=torch.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_match_reference(native, name):
    t = CASES[name]()
    check(t, compute_native(t))


@pytest.mark.parametrize("view", ["transpose", "step-slice", "storage-offset", "expanded",
                                  "permuted-3d", "zero-stride-scalar", "size-one-dims",
                                  "narrow-columns"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int32, torch.int64, torch.uint8, torch.bool,
                                   torch.complex64, torch.float8_e4m3fn, FP4])
def test_stats_strided_views(native, view, dtype):
    g = torch.Generator().manual_seed(7)
    base = (torch.randn(24, 35, generator=g) * 50)
    base[3, 4] = math.nan
    base[20, 1] = -math.inf
    if dtype == torch.bool:
        base = base > 0
    elif dtype == FP4:   # torch converts nothing to float4: its bytes
        base = fp4_bytes((24, 35), 8)
    elif dtype == torch.complex64:
        base = torch.complex(base, base.flip(0))
    elif dtype.itemsize == 1 and dtype.is_floating_point:   # past 448 for a quarter: saturated
        base = (base * 8).to(dtype)
    else:
        base = base.to(dtype) if dtype.is_floating_point else base.nan_to_num(0, 1e3, -1e3).to(dtype)
    t = {
        "transpose": lambda: base.t(),
        "step-slice": lambda: base[1::3, ::2],
        "storage-offset": lambda: base.reshape(-1)[37:500],
        "expanded": lambda: base[5].unsqueeze(0).expand(40, 35),
        "permuted-3d": lambda: base.reshape(4, 6, 35).permute(2, 0, 1),
        "zero-stride-scalar": lambda: base[2, 2].expand(3, 7),
        "size-one-dims": lambda: base[:, 3:4].unsqueeze(0).transpose(0, 2),
        "narrow-columns": lambda: base[:, 10:13],
    }[view]()
    assert not t.is_contiguous() or view in ("storage-offset", "size-one-dims")
    check(t, compute_native(t))


@pytest.mark.filterwarnings("ignore::UserWarning")  # qint8 / complex32 creation
def test_stats_empty_and_unsupported(native):
    s = compute_native(torch.empty(0, 3))
    assert (s.kind, s.numel, s.skipped) == ("float", 0, "empty tensor")
    assert compute_native(torch.empty(2, 0, dtype=torch.int64)).skipped == "empty tensor"
    with pytest.raises(ValueError):  # not a strided tensor
        compute_native(torch.ones(2).to_sparse())
    for t in (torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8),
              torch.ones(3, dtype=torch.complex32)):
        s = compute_native(t)
        assert (s.kind, s.numel, s.skipped) == ("none", t.numel(), "dtype not supported")
        assert stats_lines(s) == ["stats=skipped (dtype not supported)"]


def test_stats_neg_view_is_resolved(native):
    z = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64).conj().imag  # a neg view
    assert z.is_neg()
    s = compute_native(z)
    assert (s.min, s.max) == (-2.0, -0.5)


def big_case(dtype, numel, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(numel, generator=g).to(dtype)
    x[BLOCK * 2 + 5] = math.nan            # a careful block inside a multi-block group
    x[BLOCK * 4 + 17] = -math.inf
    x[BLOCK * 1: BLOCK * 2].clamp_(min=0)  # a block whose min is exactly 0 (zero-sign scan)
    x[BLOCK * 1 + 3] = -0.0
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_stats_multi_block_fixed_order(native, dtype):
    x = big_case(dtype, 5 * BLOCK + 123, 11)
    s = compute_native(x)
    check(x, s)
    assert s.first_nan == BLOCK * 2 + 5 and s.first_inf == BLOCK * 4 + 17
    # the same elements through the strided (gathered, converted) path
    wide = torch.zeros(x.numel(), 2, dtype=dtype)
    wide[:, 1] = x
    s2 = compute_native(wide[:, 1])
    assert s2 == s and bits(s2.mean) == bits(s.mean)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32,
                                   torch.int64, torch.uint8, torch.complex64])
def test_stats_same_bits_for_any_threads_and_vector_width(native, dtype):
    numel = (1 << 22) + 3 * BLOCK + 1001  # above the parallel threshold
    x = big_case(torch.float32, numel, 12) * 100
    x = torch.complex(x, -x) if dtype.is_complex else (
        x.to(dtype) if dtype.is_floating_point else x.nan_to_num(0, 7, -7).to(dtype))
    results = {(th, isa): compute_native(x, max_threads=th, isa_limit=isa)
               for th in (1, 0, 3) for isa in (2, 4, 8)}
    first = next(iter(results.values()))
    for key, s in results.items():
        assert s == first, key
        assert bits(s.mean) == bits(first.mean), key
    if dtype.is_floating_point or dtype.is_complex:
        assert (first.nan_count, first.inf_count) == (1, 1)
        assert (first.first_nan, first.first_inf) == (BLOCK * 2 + 5, BLOCK * 4 + 17)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_stats_sat_count_same_for_any_threads_and_vector_width(native, dtype):
    """Saturated values counted once each whichever thread reads their block, also through a
    strided view and beside a block that holds NaN (redone by the careful pass)."""
    numel = (1 << 22) + 3 * BLOCK + 1001  # above the parallel threshold
    x = big_case(torch.float32, numel, 13) * (150 if dtype == torch.float8_e4m3fn else 2e4)
    x = x.to(dtype)
    top = torch.finfo(dtype).max
    x.view(torch.uint8)[: numel // 2 + 7] = 0     # the first one where a later thread reads
    at = x.to(torch.float32).abs() == top
    want, first = int(at.sum()), int(at.to(torch.uint8).argmax())
    assert 1000 < want < numel // 20 and first > numel // 2
    results = {(th, isa): compute_native(x, max_threads=th, isa_limit=isa)
               for th in (1, 0, 3) for isa in (2, 8)}
    assert {(s.sat_count, s.first_sat) for s in results.values()} == {(want, first)}
    assert {repr(s) for s in results.values()} == {repr(results[(1, 2)])}   # repr: a NaN mean is equal
    wide = torch.zeros(numel, 2, dtype=torch.uint8)
    wide[:, 0] = x.view(torch.uint8)
    strided = wide.view(dtype)[:, 0]
    assert not strided.is_contiguous()
    assert repr(compute_native(strided)) == repr(results[(1, 2)])


def test_stats_float4_decodes_every_byte(native):
    """Each of the 256 bytes alone: its two values (low nibble first) are the min, max
    and mean the core gives, its saturated values (|x| == 6) counted and located."""
    for byte in range(256):
        first, second = e2m1_pair(byte)
        s = compute_native(torch.tensor([byte], dtype=torch.uint8).view(FP4))
        lo, hi = sorted([first, second])
        if lo == hi == 0:   # zeros: -0.0 the smaller, +0.0 the larger (section 3)
            signs = {math.copysign(1, first), math.copysign(1, second)}
            lo, hi = (-0.0 if -1 in signs else 0.0), (0.0 if 1 in signs else -0.0)
        at = [i for i, v in enumerate((first, second)) if abs(v) == 6.0]
        assert (bits(s.min), bits(s.max), bits(s.mean)) == (bits(lo), bits(hi), bits((first + second) / 2)), byte
        assert (s.nan_count, s.inf_count, s.sat_count, s.first_sat) == (0, 0, len(at), at[0] if at else -1), byte


def test_stats_float4_record_lines(native):
    """The lines of a float4_e2m1fn_x2 block: bytes 0x71 (values 0.5, 6), 0xf8 (-0, -6),
    0x2a (-1, 1), 0x43 (1.5, 2): 8 values, mean 4/8."""
    t = torch.tensor([0x71, 0xF8, 0x2A, 0x43], dtype=torch.uint8).view(FP4)
    assert stats_lines(compute_native(t))[:6] == [
        "min=-6.000000", "max=6.000000", "mean=0.500000", "nan_count=0", "inf_count=0", "sat_count=2"]
    assert compute_native(t).first_sat == 1


def test_stats_float4_same_bits_for_any_threads_and_vector_width(native):
    """Above the parallel threshold (blocks of 65536 bytes, 131072 values) every thread
    count and vector width gives one result, the reference's: the first saturated
    value where a later thread reads, a strided view the same."""
    numel = (1 << 22) + 3 * BLOCK + 1001
    raw = fp4_bytes((numel,), 21).view(torch.uint8) & 0x66    # magnitudes 0..3: nothing saturated
    raw[BLOCK + 5] = 0x80                                      # a -0.0 in a block of its own kind
    raw[numel // 2 + 7] = 0x70                                 # the first 6.0: value 2k + 1
    raw[numel - 3] = 0x0F                                      # -6.0: value 2k
    x = raw.view(FP4)
    results = {(th, isa): compute_native(x, max_threads=th, isa_limit=isa)
               for th in (1, 0, 3) for isa in (2, 4, 8)}
    assert {repr(s) for s in results.values()} == {repr(results[(1, 2)])}
    s = results[(1, 2)]
    # the reference in whole numbers of 0.5 (E2M1 doubled), summed exactly in int64
    halves = torch.tensor([int(2 * v) for v in E2M1] + [-int(2 * v) for v in E2M1])
    total = int(halves[raw.to(torch.int64) & 15].sum() + halves[raw.to(torch.int64) >> 4].sum())
    assert (s.min, s.max, s.sat_count, s.first_sat) == (-6.0, 6.0, 2, 2 * (numel // 2 + 7) + 1)
    assert bits(s.mean) == bits(total / 2 / (2 * numel))   # every partial sum is exact
    wide = torch.zeros(numel, 2, dtype=torch.uint8)
    wide[:, 1] = raw
    strided = wide.view(FP4)[:, 1]
    assert not strided.is_contiguous()
    assert repr(compute_native(strided, max_threads=3)) == repr(s)


def test_stats_vector_width_reported(native):
    assert native.vector_width() in (2, 4, 8)


# ---------------------------------------------------------------- number format

def python_rule(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0 or 1e-4 <= abs(x) < 1e16:
        return "%.6f" % x
    return "%.6e" % x


def number_corpus():
    edges = [0.0, -0.0, 1e-4, -1e-4, math.nextafter(1e-4, 0), math.nextafter(1e-4, 1),
             1e16, -1e16, math.nextafter(1e16, 0), math.nextafter(1e16, math.inf), 5e-324,
             -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
             0.5, 2.5, 0.0000005, 0.0000015, 0.0000025, 1.0000005, 123456.7890125, 3.402823e38,
             1e-5, 9.9999995e-5, 0.00009999995, 999999.9999995, math.nan, -math.nan, math.inf,
             -math.inf, 1.0, -1.0, 1e15 + 0.5, 4503599627370496.5, 0.1, 0.2, 0.3]
    rng = random.Random(42)
    rand = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-320, 308) for _ in range(4000)]
    halves = [(k + 0.5) / 1e6 for k in range(0, 2000, 7)]  # exact-tie candidates for %.6f
    # exact binary ties of %.6f: odd multiples of 2^-7 end in ...5 at the 7th decimal
    halves += [sign * (2.0 ** p + a / 128) for a in range(1, 400, 2) for p in (0, 10, 30, 46)
               for sign in (1, -1)]
    halves += [a / 128 for a in range(1, 2000, 2)] + [a / 2 ** 20 for a in range(105, 20000, 97)]
    floats32 = [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(2000)]
    # exact ties of %.6e: 8 significant digits ending in 5, times 10^9 (a multiple of 2^9, so
    # exactly a double up to 2^62), and one ulp either side of each
    ties = [float((10 * a + 5) * 10 ** 9) for a in range(1000000, 10000000, 99991)]
    ties += [math.nextafter(t, d) for t in ties for d in (0, math.inf)]
    ties += [-t for t in ties]
    # subnormals, the largest doubles, and just around the powers of ten where the exponent turns
    extremes = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(52)))[0] for _ in range(500)]
    extremes += [struct.unpack("<d", struct.pack("<Q", (0x7FE << 52) | rng.getrandbits(52)))[0] for _ in range(200)]
    powers = [10.0 ** p for p in range(-323, 309)]
    powers += [math.nextafter(v, d) for v in powers for d in (0, math.inf)]
    powers += [v * (1 - 5e-8) for v in powers] + [v * (1 - 4.9e-8) for v in powers]
    return edges + rand + halves + floats32 + ties + extremes + powers


def test_number_format_matches_python_rule(native):
    bad = [(x, native.format_number(x), python_rule(x)) for x in number_corpus()
           if native.format_number(x) != python_rule(x)]
    assert bad == []


@settings(max_examples=3000, deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_number_format_matches_python_for_any_bit_pattern(bits):
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert _native.format_number(x) == python_rule(x)


def test_number_format_examples(native):
    assert [native.format_number(x) for x in (-0.0, 1e-5, 3.4028234663852886e38, 0.25, -1.0)] == [
        "-0.000000", "1.000000e-05", "3.402823e+38", "0.250000", "-1.000000"]


def test_stats_lines_match_cpp_block(native):
    t = torch.tensor([[1.0, -2.0, math.nan], [math.inf, 0.5, -0.0]])
    block = native.render_tensor_block(t, 5, 4)
    lines = [line.strip() for line in block.splitlines()[7:-1]]
    assert lines == stats_lines(compute_native(t, hash=True)) == [
        "min=-2.000000", "max=inf", "mean=inf", "nan_count=1", "inf_count=1", "hash=3420a5710cff08ae"]


# ---------------------------------------------------------------- the NaN/Inf check's scan

def _reference_finite(t, count_inf):
    t = t.resolve_neg()
    if t.dtype.is_complex:
        parts = torch.view_as_real(t.resolve_conj())
        return not (bool(parts.isnan().any()) or (count_inf and bool(parts.isinf().any())))
    if not (t.dtype.is_floating_point):
        return True
    wide = t.to(torch.float64) if t.dtype.itemsize == 1 else t
    return not (bool(wide.isnan().any()) or (count_inf and bool(wide.isinf().any())))


SCAN_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e5m2,
               torch.complex64, torch.int32, torch.bool]


@pytest.mark.parametrize("dtype", SCAN_DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 511, 512, 513, 4096 + 37])
def test_all_finite_finds_each_bad_value_wherever_it_is(native, dtype, n):
    """Every position (first, last, inside a scanned block, in the tail) and every
    kind of bad value; NaN-only checks let Inf through."""
    base = torch.ones(n, dtype=torch.float64).to(dtype)
    assert native.all_finite(base, True) and native.all_finite(base, False)
    if not (dtype.is_floating_point or dtype.is_complex):
        return
    specials = [math.nan, -math.nan, math.inf, -math.inf]
    for pos in sorted({0, n // 2, n - 1, min(n - 1, 511), min(n - 1, 512)}):
        for x in specials:
            t = base.clone()
            t[pos] = x
            for count_inf in (True, False):
                assert native.all_finite(t, count_inf) == _reference_finite(t, count_inf), (pos, x, count_inf)


def test_all_finite_float4_is_always_finite(native):
    """float4_e2m1fn_x2 spells no NaN and no Inf: every byte, strided too, is finite."""
    t = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(16, 16).view(FP4)
    assert [native.all_finite(v, inf) for v in (t, t.t()[::3]) for inf in (False, True)] == [True] * 4


def test_all_finite_large_values_are_finite(native):
    """Largest finite and smallest subnormal of each dtype: never taken for Inf."""
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        info = torch.finfo(dtype)
        t = torch.tensor([info.max, -info.max, info.tiny, -0.0, info.smallest_normal / 4], dtype=dtype)
        assert native.all_finite(t.repeat(200), True), dtype


@pytest.mark.parametrize("view", ["transposed", "stepped", "offset", "expanded", "column"])
def test_all_finite_strided_views_see_only_their_elements(native, view):
    """A NaN outside the view is not the view's; one inside is found."""
    base = torch.zeros(64, 64)
    make = {"transposed": lambda b: b.t(), "stepped": lambda b: b[::2, ::3],
            "offset": lambda b: b[1:, 1:], "expanded": lambda b: b[:1].expand(64, 64),
            "column": lambda b: b[:, 5]}[view]
    assert not make(base).is_contiguous()
    assert native.all_finite(make(base), True)
    # which elements of the base the view reads: mark each with its own index
    seen = set(make(torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)).reshape(-1).tolist())
    inside = next(i for i in range(64 * 64) if i in seen)
    outside = next((i for i in range(64 * 64) if i not in seen), None)
    for index, expected in ((inside, False), (outside, True)):
        if index is None:  # the view reads every element
            continue
        base.zero_()
        base.view(-1)[index] = math.nan
        assert native.all_finite(make(base), True) is expected, (view, index)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_all_finite_long_contiguous_rows_of_a_strided_view(native, dtype):
    """Rows long enough for the vector scan, inside a view that is not contiguous:
    a NaN in the last row's tail is found, one in the skipped columns is not."""
    base = torch.zeros(3, 1500, dtype=dtype)
    view = base[:, 5:1400]
    assert native.all_finite(view, True)
    base[2, 1399] = math.nan  # the view's last element
    assert not native.all_finite(view, True)
    base[2, 1399] = 0
    base[1, 1400] = math.nan  # just past the row
    assert native.all_finite(view, True)


def test_all_finite_parallel_scan_finds_a_nan_in_any_slice(native):
    """Tensors large enough to be split over threads: a NaN in the last slice is found."""
    n = (1 << 22) + 3
    t = torch.zeros(n)
    assert native.all_finite(t, True)
    for pos in (0, n // 2 + 1, n - 1):
        t[pos] = math.inf
        assert not native.all_finite(t, True) and native.all_finite(t, False)
        t[pos] = 0
