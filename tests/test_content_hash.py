"""The content hash of docs/log-format.md section 3.1: the compiled core (every
instruction set and thread count), the torch-op twin, and a reference written
from the definition alone, in pure Python."""

from __future__ import annotations

import math
import struct

import pytest
import torch

from aoti_debug.native import core as _native
from aoti_debug.runtime.format import stats_lines
from aoti_debug.runtime.stats import compute, compute_native, content_hash_with_torch

M64 = (1 << 64) - 1


def reference_hash(t) -> int:
    """Section 3.1, word by word: the logical-order bytes, zero-padded to 8-byte words."""
    data = t.reshape(-1).contiguous().view(torch.uint8).tolist()
    data += [0] * (-len(data) % 8)
    total = 0
    for i in range(len(data) // 8):
        (w,) = struct.unpack("<Q", bytes(data[8 * i:8 * i + 8]))
        x = w ^ (((i + 1) * 0x9E3779B97F4A7C15) & M64)
        total = (total + (x & 0xFFFFFFFF) * (x >> 32) + x) & M64
    x = (total + t.numel() * 0xC2B2AE3D27D4EB4F + t.element_size()) & M64
    for mul in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        x ^= x >> 33
        x = (x * mul) & M64
    return x ^ (x >> 33)


def native_hashes(t):
    """{(threads, vector width): hash} over every path of the core."""
    return {(th, isa): compute_native(t, max_threads=th, isa_limit=isa, hash=True).hash
            for th in (1, 0) for isa in (2, 4, 8)}


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
          torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.uint64,
          torch.bool, torch.complex64, torch.complex128]


def sample(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 50
    if dtype == torch.bool:
        return x > 0
    if dtype.is_complex:
        return torch.complex(x, -x).to(dtype)
    if dtype == torch.uint64:
        return x.abs().to(torch.int64).to(torch.uint64)
    return x.to(dtype)


@pytest.fixture(scope="module", autouse=True)
def _core():
    assert _native.lib() is not None, "the C++ runtime must build in the test environment"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7), (2, 3, 11)], ids=str)
def test_small_tensors_match_the_definition(dtype, shape):
    t = sample(dtype, shape)
    want = reference_hash(t)
    assert set(native_hashes(t).values()) == {want}
    assert content_hash_with_torch(t) == want
    if t.dim() >= 2:  # the same values through strided views: the same hash
        v = t.transpose(0, 1).contiguous().transpose(0, 1)
        assert v.stride() != t.stride() and set(native_hashes(v).values()) == {want}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.float64], ids=str)
def test_large_views_hash_their_logical_order_on_every_path(dtype):
    # several statistics blocks (65536 elements), several threads, gathered views
    base = sample(dtype, (700, 301), seed=1)
    for view in (base, base.t(), base[:, ::3], base[::2].flip(0), base[:1].expand(400, 301)):
        want = content_hash_with_torch(view.contiguous())
        assert set(native_hashes(view).values()) == {want}, view.stride()
        assert content_hash_with_torch(view) == want
    assert reference_hash(base[:3]) == compute_native(base[:3], hash=True).hash


def test_any_changed_bit_or_moved_element_changes_the_hash():
    t = sample(torch.float32, (200001,), seed=2)
    h = compute_native(t, hash=True).hash
    seen = {h}
    for index in (0, 7, 65535, 65536, 200000):
        for bit in (0, 31):
            u = t.clone()
            u.view(torch.int32)[index] ^= 1 << bit
            seen.add(compute_native(u, hash=True).hash)
    swapped = t.clone()
    swapped[[3, 70000]] = t[[70000, 3]]
    seen.add(compute_native(swapped, hash=True).hash)
    zero, negzero = torch.zeros(4), torch.zeros(4)
    negzero[1] = -0.0
    seen |= {compute_native(zero, hash=True).hash, compute_native(negzero, hash=True).hash}
    assert len(seen) == 1 + 10 + 1 + 2


def test_the_same_bytes_hash_alike_and_the_shape_does_not_count():
    t = sample(torch.float32, (6, 4))
    assert compute_native(t, hash=True).hash == compute_native(t.reshape(4, 6), hash=True).hash \
        == compute_native(t.view(torch.int32), hash=True).hash
    # the element count and size do: the same 8 zero bytes as 2 float32 or 1 float64
    assert compute_native(torch.zeros(2), hash=True).hash != compute_native(
        torch.zeros(1, dtype=torch.float64), hash=True).hash


def test_hash_is_computed_only_when_asked():
    t = sample(torch.float32, (9,))
    assert compute_native(t).hash is None and compute(t).hash is None
    assert compute(t, hash=True).hash == reference_hash(t)
    assert compute(torch.empty(0), hash=True).hash is None


def test_the_record_line_is_the_same_from_both_runtimes():
    t = torch.tensor([[1.0, -2.0, math.nan], [math.inf, 0.5, -0.0]])
    block = _native.render_tensor_block(t, 5, 4).splitlines()
    want = f"hash={reference_hash(t):016x}"
    assert block[-2].strip() == want == stats_lines(compute(t, hash=True))[-1]
    assert stats_lines(compute(t, hash=True))[:-1] == [l.strip() for l in block[7:-2]]
    assert _native.render_tensor_block(torch.empty(0), 5, 4).splitlines()[-2].strip() == \
        "stats=skipped (empty tensor)"
