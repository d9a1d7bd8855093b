"""Dequantized statistics (docs/log-format.md 3.3): the shared core's dequant_stats of
element * scale(element) over fp8 / block-scaled operands -- tensorwise, rowwise, MXFP8
(e8m0 scales, one per 32 along K, plain and in cuBLAS's 128x4 tiles) and NVFP4 (packed
float4_e2m1fn_x2, e4m3 scales per 16, times a float32 tensor scale) -- against the
product materialised in float64 by torch.  The products of these formats are exact in
double, and compute_stats of the materialised product sums in the documented order, so
every figure must be equal bit for bit (the order itself is checked against a Python
emulation on one case)."""

from __future__ import annotations

import math

import pytest
import torch

from aoti_debug.native import core as _native
from aoti_debug.runtime import stats as stats_mod

E4M3, E8M0, FP4 = torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


@pytest.fixture(scope="module")
def native():
    assert _native.lib() is not None
    return _native


_HELPERS = ("ceil_div", "to_blocked", "down_size", "pack_uint4", "_n_ones", "_f32_to_floatx_unpacked",
            "_floatx_unpacked_to_f32", "_bfloat16_to_float4_e2m1fn_x2")


def quantized():
    """torch's own packing and tiling helpers (torch/testing/_internal/common_quantized.py),
    taken from its source: importing the module needs test-only packages."""
    import ast
    import types
    from pathlib import Path
    path = Path(torch.__file__).parent / "testing" / "_internal" / "common_quantized.py"
    tree = ast.parse(path.read_text())
    keep = [node for node in tree.body
            if (isinstance(node, ast.FunctionDef) and node.name in _HELPERS)
            or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).isupper())]   # its constants
    ns = {"torch": torch, "Tensor": torch.Tensor, "math": math}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), ns)
    return types.SimpleNamespace(**{name: ns[name] for name in _HELPERS})


def gen(seed):
    return torch.Generator().manual_seed(seed)


def fp8(shape, seed, spread=100.0):
    return (torch.randn(*shape, generator=gen(seed)) * spread).to(E4M3)


def fp4_packed(rows, k, seed):
    """(rows, k // 2) float4_e2m1fn_x2, packed along k by torch's own helper."""
    cq = quantized()
    return cq._bfloat16_to_float4_e2m1fn_x2((torch.randn(rows, k, generator=gen(seed)) * 3).bfloat16())


def unpack_fp4(t, kdim):
    """float64 values of a float4_e2m1fn_x2 tensor, the packed dim `kdim` doubled: low
    nibble first, as torch's pack_uint4 puts it (decoded by torch.testing's own helper)."""
    cq = quantized()
    b = t.view(torch.uint8).to(torch.int64)
    nibbles = torch.stack([b & 15, b >> 4], dim=kdim + 1)
    shape = list(t.shape)
    shape[kdim] *= 2
    nibbles = nibbles.reshape(shape)
    return cq._floatx_unpacked_to_f32(nibbles.to(torch.uint8), 2, 1).double()


def reference(values, scale_of):
    """The materialised product's statistics by the core's plain compute_stats (the
    documented order) and its element count."""
    product = values * scale_of
    s = stats_mod.compute_native(product.contiguous())
    return dict(skipped=None, numel=product.numel(), min=s.min, max=s.max, mean=s.mean,
                nan_count=s.nan_count, inf_count=s.inf_count)


def same(got, want):
    """Bit for bit, NaN equal to NaN, -0.0 apart from 0.0."""
    assert got.keys() == want.keys()
    for key in got:
        a, b = got[key], want[key]
        if isinstance(a, float):
            assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), \
                (key, a, b)
        else:
            assert a == b, (key, a, b)


def test_e2m1_value_is_torchs_decode(native):
    """detail::e2m1_value against torch.testing's float4 decode, all 16 nibbles."""
    cq = quantized()
    torch_values = cq._floatx_unpacked_to_f32(torch.arange(16, dtype=torch.uint8), 2, 1).tolist()
    got = [native.e2m1_value(n) for n in range(16)]
    assert got == E2M1 == torch_values
    assert [math.copysign(1, v) for v in got] == [1.0] * 8 + [-1.0] * 8


def test_tensorwise(native):
    a = fp8((48, 80), 1)
    s = torch.tensor(0.037)
    got = native.dequant_stats(a, s, None, "tensorwise", 0, False, 1)
    same(got, reference(a.double(), s.double()))
    assert got["numel"] == 48 * 80 and got["nan_count"] == 0


def test_rowwise_self_and_mat2_strided(native):
    """self (M,K) with (M,1) scales; mat2 (K,N) column-major (a transposed view) with
    (1,N) scales, one per column; a scale that is itself a strided view."""
    a = fp8((40, 64), 2)
    sa = torch.rand(40, 1, generator=gen(3)) + 0.01
    same(native.dequant_stats(a, sa, None, "rowwise", 0, False, 1), reference(a.double(), sa.double()))
    b = fp8((24, 64), 4).t()                        # (64, 24), strides (1, 64)
    sb = (torch.rand(1, 48, generator=gen(5)) + 0.01)[:, ::2]   # (1, 24), stride 2
    assert not b.is_contiguous() and not sb.is_contiguous()
    same(native.dequant_stats(b, sb, None, "rowwise", 0, False, 0), reference(b.double(), sb.double()))
    # a sliced, offset operand
    c = fp8((50, 70), 6)[5:45:2, 3:67]
    sc = torch.rand(20, 1, generator=gen(7))
    same(native.dequant_stats(c, sc, None, "rowwise", 0, False, 1), reference(c.double(), sc.double()))


def e8m0_scales(rows, kblocks, seed):
    exps = torch.randint(120, 134, (rows, kblocks), generator=gen(seed), dtype=torch.uint8)
    return exps.view(E8M0)


def test_mxfp8_block_1x32_plain_and_swizzled(native):
    """e4m3 values, one e8m0 scale per 32 along K; the scale matrix (outer, K/32) plain and
    in torch's to_blocked layout (rows padded to 128, columns to 4); self and mat2 (its
    scale matrix (N, K/32), as torch takes scale_b), over more than one 65536-block."""
    cq = quantized()
    m, k, n = 300, 256, 136
    a = fp8((m, k), 8)
    sa = e8m0_scales(m, k // 32, 9)
    want = reference(a.double(), sa.double().repeat_interleave(32, dim=1))
    assert want["numel"] > 65536
    same(native.dequant_stats(a, sa, None, "block", 32, False, 1), want)
    same(native.dequant_stats(a, cq.to_blocked(sa), None, "block", 32, True, 1), want)
    b = fp8((n, k), 10).t()                         # mat2 (K, N), column-major
    sb = e8m0_scales(n, k // 32, 11)
    want_b = reference(b.double(), sb.double().repeat_interleave(32, dim=1).t())
    same(native.dequant_stats(b, cq.to_blocked(sb), None, "block", 32, True, 0), want_b)
    same(native.dequant_stats(b, sb, None, "block", 32, False, 0), want_b)


def test_block_scales_padded_tiles_and_strided_scales(native):
    """K/32 not a multiple of 4 (to_blocked pads each tile's columns), and a scale matrix
    that is a column-major view (read through its strides, not as stored)."""
    cq = quantized()
    m, k = 140, 96                                  # 3 blocks along K
    a = fp8((m, k), 20)
    sa = e8m0_scales(m, k // 32, 21)
    want = reference(a.double(), sa.double().repeat_interleave(32, dim=1))
    same(native.dequant_stats(a, cq.to_blocked(sa), None, "block", 32, True, 1), want)
    strided = sa.t().contiguous().t()
    assert strided.stride() == (1, m)
    same(native.dequant_stats(a, strided, None, "block", 32, False, 1), want)


def test_nvfp4_block_1x16_times_a_tensor_scale(native):
    """Packed float4_e2m1fn_x2 (two a byte along K, low nibble first), e4m3 scales per 16
    unpacked elements, swizzled, times a float32 tensor-wide scale; self and mat2."""
    cq = quantized()
    m, k, n = 130, 64, 40
    a = fp4_packed(m, k, 12)                        # (130, 32) bytes
    sa = (torch.rand(m, k // 16, generator=gen(13)) * 4 + 0.1).to(E4M3)
    g = torch.tensor(0.0123)
    want = reference(unpack_fp4(a, 1), sa.double().repeat_interleave(16, dim=1) * g.double())
    assert want["numel"] == m * k
    same(native.dequant_stats(a, cq.to_blocked(sa), g, "block", 16, True, 1), want)
    same(native.dequant_stats(a, sa, g, "block", 16, False, 1), want)
    b = fp4_packed(n, k, 14).t()                    # mat2 (K/2, N) bytes
    sb = (torch.rand(n, k // 16, generator=gen(15)) * 4 + 0.1).to(E4M3)
    want_b = reference(unpack_fp4(b, 0), sb.double().repeat_interleave(16, dim=1).t() * g.double())
    same(native.dequant_stats(b, cq.to_blocked(sb), g, "block", 16, True, 0), want_b)


def test_nan_and_inf_in_scales_and_values(native):
    """A NaN scale makes its row NaN, an Inf scale its row ±Inf (0 * Inf: NaN); a NaN
    operand element stays NaN; min/max/mean over the rest."""
    a = fp8((6, 16), 16)
    a[2, 3] = float("nan")
    sa = torch.tensor([[1.0], [math.nan], [2.0], [math.inf], [0.5], [1e-3]])
    a[3, 0] = 0.0
    got = native.dequant_stats(a, sa, None, "rowwise", 0, False, 1)
    want = reference(a.double(), sa.double())
    same(got, want)
    assert got["nan_count"] == 16 + 1 + 1 and got["inf_count"] == 15


def test_mean_follows_the_documented_order():
    """The mean of a 70000-element product, emulated in Python in the documented order
    (blocks of 65536; lane i % 8; ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); block sums left to
    right), equals the core's bit for bit."""
    a = fp8((350, 200), 17, spread=300.0)
    s = torch.rand(350, 1, generator=gen(18)) * 1e3
    values = (a.double() * s.double()).reshape(-1).tolist()
    total = -0.0
    for start in range(0, len(values), 65536):
        lanes = [-0.0] * 8
        for i, v in enumerate(values[start:start + 65536]):
            lanes[i % 8] += v
        total += ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    got = _native.dequant_stats(a, s, None, "rowwise", 0, False, 1)
    assert got["mean"] == total / len(values)


def test_what_does_not_fit_is_skipped_with_the_reason(native):
    a = fp8((8, 64), 19)
    assert native.dequant_stats(a, torch.ones(7, 1), None, "rowwise", 0, False, 1)["skipped"] == \
        "scale shape not as compiled"
    assert native.dequant_stats(a, torch.ones(8, 3), None, "block", 32, True, 1)["skipped"] == \
        "scale shape not as compiled"
    assert native.dequant_stats(a[:0], torch.ones(()), None, "tensorwise", 0, False, 1)["skipped"] == \
        "empty tensor"
    assert native.dequant_stats(a.float(), torch.ones(()), None, "tensorwise", 0, False, 1)["skipped"] == \
        "dtype not supported"
    assert native.dequant_stats(a, torch.ones((), dtype=torch.int32), None, "tensorwise", 0, False, 1)[
        "skipped"] == "dtype not supported"


# -- the records: the C++ shim's rendering (the core, through the site handle) and
# format.py's, for one launch of _scaled_mm_v2 with NVFP4 and rowwise operands --------

PY_RECORD = """
import torch
from aoti_debug.runtime import launches, stats
mode = {mode!r}
if mode == "python":    # format.py writes the record, not the compiled core
    launches.Run._core_record = lambda self, *args, **kwargs: False
if mode == "device":    # CPU tensors take the device path (tests/test_device_injection.py); not
    # the float4 one, whose plain statistics that path has no torch op for: its scales suffice
    stats.on_device = lambda t: t.dtype != torch.float4_e2m1fn_x2
    stats.device_path_on = lambda: True
g = torch.Generator().manual_seed(20)
a = torch.randint(0, 256, (130, 32), generator=g, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
sa = (torch.rand(130 * 4, generator=g) * 4).to(torch.float8_e4m3fn)[:, None].reshape(130, 4)
glob = torch.tensor(0.5)
b = (torch.randn(24, 64, generator=g) * 50).to(torch.float8_e4m3fn).t()
sb = torch.rand(1, 24, generator=g)
sa[3, 1] = float("nan")
model = launches.Model("toy", 5)
site = launches.Site("aoti_torch_cpu__scaled_mm_v2", "_scaled_mm_v2", "model.py:7", "",
                     (("buf0", "in"), ("w", "in"), ("sa", "in"), ("sb", "in"), ("g", "in"), ("buf1", "out")),
                     scales={{2: "scale_a", 3: "scale_b", 4: "scale_a"}},
                     dequants={{0: "2 4 block 16 0 1 scale_a[0] (block 1x16) * scale_a[1] (tensorwise)",
                               1: "3 -1 rowwise 0 0 0 scale_b[0] (rowwise)"}})
run = model.begin_run(("x",), (a,))
run.launch += 1
run.before(site, (a, b, sa, sb, glob, None))
"""


@pytest.mark.parametrize("mode", ["python", "device"])
def test_records_of_both_runtimes_are_byte_identical(tmp_path, mode):
    """One launch whose operands are NVFP4 (packed, e4m3 block scales holding a NaN, a
    float32 tensor scale) and rowwise fp8: the record the compiled core renders (the C++
    shim's code, as the launch extension and AOTI use it) and the one format.py writes
    are the same bytes; with the device path (device tensors: the fp8 operand and every
    scale) too, the dequantized statistics from their host views."""
    from conftest import clean_env, run_python
    from test_native_launch import masked
    logs = {}
    for m in ("core", mode):
        log = tmp_path / f"{m}.txt"
        run_python(PY_RECORD.format(mode=m), env=clean_env(AOTI_DEBUG_LOGDEST=str(log)))
        logs[m] = masked(log)
    core = logs["core"]
    assert core.count("      scaled_by=") == 2 and core.count("      dequant_nan_count=") == 2
    assert "      scaled_by=scale_a[0] (block 1x16) * scale_a[1] (tensorwise)\n" \
           "      dequant_min=" in core and "      dequant_nan_count=16\n" in core
    assert logs[mode] == core


def test_every_vector_width_gives_the_same_bits(native):
    """The hot loop exists per instruction set (SSE2, AVX2, AVX-512, picked at run time): each
    width the CPU has gives the same figures, NaN/Inf blocks and zero-signed blocks included."""
    cq = quantized()
    a = fp8((260, 512), 21)
    a[7, 9] = float("nan")
    sa = e8m0_scales(260, 16, 22)
    got = [native.dequant_stats(a, cq.to_blocked(sa), None, "block", 32, True, 1, isa_limit=w) for w in (2, 4, 8)]
    assert got[0] == got[1] == got[2] and got[0]["nan_count"] == 1
    zeros = fp8((4, 32), 23).abs()
    zeros[0, 0] = 0.0
    got = [native.dequant_stats(zeros, torch.tensor(-1.0), None, "tensorwise", 0, False, 1, isa_limit=w)
           for w in (2, 4, 8)]
    assert got[0] == got[1] == got[2] and math.copysign(1, got[0]["max"]) == -1.0 and got[0]["max"] == 0.0
