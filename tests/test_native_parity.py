"""Byte parity of the Tensor block between the C++ shim (rendered through
aoti_debug.native.core) and the Python logger (aoti_debug.runtime.format)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from aoti_debug.native import core as _native
from aoti_debug.runtime import format as pyfmt
from aoti_debug.runtime import sink


@pytest.fixture(scope="session")
def native():
    assert _native.lib() is not None
    return _native


def corpus():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 5, generator=g)
    x[1, 2], x[4, 0], x[0, 0] = math.nan, -math.inf, -0.0
    yield "float32", x
    yield "transposed", x.t()
    yield "sliced", x[1:, ::2]
    yield "expanded", x[0:1].expand(3, 5)
    yield "scalar", torch.tensor(2.5)
    yield "one-element", torch.tensor([7.0])
    yield "empty", torch.empty(0, 4)
    yield "size-one-dims", torch.ones(1, 3, 1)
    yield "float64", x.double() * 1e20
    yield "float16", x.half()
    yield "bfloat16", x.bfloat16()
    yield "float8_e4m3fn", x.clamp(-400, 400).nan_to_num(0).to(torch.float8_e4m3fn)
    yield "float8_e5m2", x.to(torch.float8_e5m2)
    # saturated values of both signs beside NaN, in a strided view (sat_count)
    yield "float8_e4m3fn-saturated", (x * 300).to(torch.float8_e4m3fn).t()[::2]
    yield "float8_e5m2-saturated", (x * 4e4).to(torch.float8_e5m2)[:, 1:]
    yield "float8_e4m3fnuz", (x * 100).nan_to_num(0, 240, -240).to(torch.float8_e4m3fnuz)
    yield "float8_e8m0fnu", torch.tensor([2.0 ** 127, 1.0, math.nan, 0.5]).to(torch.float8_e8m0fnu)
    # two e2m1 values a byte (sat_count: |x| == 6), contiguous and a strided view
    fp4 = torch.randint(0, 256, (6, 5), dtype=torch.uint8, generator=g).view(torch.float4_e2m1fn_x2)
    yield "float4_e2m1fn_x2", fp4
    yield "float4_e2m1fn_x2-strided", fp4.t()[1:, ::2]
    yield "int64", torch.tensor([[-2**63, 2**63 - 1], [0, 5]])
    yield "int32", (x.nan_to_num(0, 9, -9) * 100).int()
    yield "int8", torch.tensor([-128, 127, 3], dtype=torch.int8)
    yield "uint8", torch.tensor([0, 255, 9], dtype=torch.uint8)
    yield "uint64", torch.tensor([-1, 3], dtype=torch.int64).view(torch.uint64)
    yield "uint16", torch.tensor([1, 65535], dtype=torch.int32).to(torch.uint16)
    yield "bool", x > 0
    yield "complex64", torch.complex(x, x.flip(0))
    yield "complex128", torch.complex(x.double(), -x.double())
    yield "all-nan", torch.full((3,), math.nan)
    yield "tiny", torch.tensor([1e-30, -3e-5, 1e17])
    yield "meta", torch.empty(2, 3, device="meta")
    yield "qint8", torch.quantize_per_tensor(torch.ones(3), 0.5, 0, torch.qint8)
    yield "requires_grad", x.clone().requires_grad_()
    yield "parameter", torch.nn.Parameter(x[:2].clone())
    yield "negative view", torch.complex(x, x).conj().imag


with warnings.catch_warnings():  # qint8 and complex32 creation warn; the dtypes are the point
    warnings.simplefilter("ignore")
    CASES = dict(corpus())


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("level", [1, 3, 5])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_tensor_block_is_byte_identical(native, name, level, depth):
    t = CASES[name]
    python = "\n".join(pyfmt.tensor_block(t, level, depth)) + "\n"
    if name == "negative view":     # the core reads a resolved copy: refused, format.py writes it
        with pytest.raises(ValueError, match="negative view"):
            native.render_tensor_block(t, level, 2 * depth)
        return
    assert native.render_tensor_block(t, level, 2 * depth) == python


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_runtime_writes_each_block_as_the_python_format_does(native, name):
    """torch.compile's runtime has the core render plain CPU tensors' blocks and
    format.py the rest: either way the lines are format.py's."""
    t = CASES[name]
    for level, depth in ((3, 2), (5, 2), (5, 3)):
        assert sink.tensor_block(t, level, depth) == pyfmt.tensor_block(t, level, depth), (level, depth)


def test_doc_example_block(native):
    t = torch.tensor([[-1.0, 2.5, 0.0], [0.0, 0.0, 0.0]])
    assert native.render_tensor_block(t, 5, 4) == (
        "    Tensor(\n      shape=(2, 3)\n      stride=(3, 1)\n      dtype=torch.float32\n"
        "      device=cpu\n      requires_grad=False\n      is_contiguous=True\n"
        "      min=-1.000000\n      max=2.500000\n      mean=0.250000\n      nan_count=0\n"
        "      inf_count=0\n      hash=8d76fdcd3779af49\n    )\n")


def test_saturated_float8_block(native):
    """sat_count: the elements at the format's largest finite magnitude (e4m3fn: 448), both
    signs, NaN beside them; written by both runtimes, only for the narrow formats."""
    t = torch.tensor([[448.0, 1.0], [math.nan, -600.0], [-448.0, 0.5]]).to(torch.float8_e4m3fn).t()
    block = native.render_tensor_block(t, 5, 4)
    assert block == "\n".join(pyfmt.tensor_block(t, 5, 2)) + "\n"
    assert block.splitlines()[7:] == [
        "      min=-448.000000", "      max=448.000000", "      mean=-89.300000", "      nan_count=1",
        "      inf_count=0", "      sat_count=3", "      hash=2d6ad92cf7208ed7", "    )"]
    assert "sat_count" not in native.render_tensor_block(torch.tensor([448.0, 65504.0]).half(), 5, 4)


def test_float4_block(native):
    """float4_e2m1fn_x2's block: the lines of the narrow formats over its 2n values, low
    nibble first (0x71: 0.5 then 6; 0xf8: -0 then -6; 0x2a: -1 then 1; 0x43: 1.5 then 2);
    the hash over its 4 bytes.  Both runtimes."""
    t = torch.tensor([[0x71, 0xF8], [0x2A, 0x43]], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    block = native.render_tensor_block(t, 5, 4)
    assert block == "\n".join(pyfmt.tensor_block(t, 5, 2)) + "\n"
    assert block.splitlines()[1:] == [
        "      shape=(2, 2)", "      stride=(2, 1)", "      dtype=torch.float4_e2m1fn_x2", "      device=cpu",
        "      requires_grad=False", "      is_contiguous=True",
        "      min=-6.000000", "      max=6.000000", "      mean=0.500000", "      nan_count=0",
        "      inf_count=0", "      sat_count=2", "      hash=bee9976d8c555a01", "    )"]
    # the hash is of the bytes: the uint8 view of the same bytes hashes alike
    assert "      hash=bee9976d8c555a01" in native.render_tensor_block(t.view(torch.uint8), 5, 4)


def _render_in_place(sizes, strides, view, level, indent, requires_grad=False):
    """The core's block for `view` described through the given ctypes arrays
    (the caller refills them between calls: one address, other metadata)."""
    import ctypes
    sizes[:view.dim()] = list(view.shape)
    strides[:view.dim()] = list(view.stride())
    buf = ctypes.create_string_buffer(8192)
    n = _native._need().aotid_render_tensor_block(view.data_ptr(), _native.dtype_code(view.dtype), view.dim(),
                                                  sizes, strides, 0, -1, int(requires_grad), level, indent,
                                                  buf, len(buf))
    assert 0 <= n < len(buf)
    return buf.raw[:n].decode()


def test_block_heads_follow_the_metadata_not_its_address(native):
    """The core keeps each thread's Tensor block heads (shape to is_contiguous)
    by the view's whole metadata: one sizes/strides array refilled between
    blocks (a freed buffer's array handed to the next), requires_grad, the
    indent, more shapes than its slots, views too deep or too wide to keep:
    every block is still format.py's."""
    import ctypes
    base = torch.arange(4096, dtype=torch.float32) / 7
    sizes, strides = (ctypes.c_int64 * 8)(), (ctypes.c_int64 * 8)()
    shapes = [(2, 3), (3, 2), (6,), (1, 6), (6, 1), (2, 1, 3)]
    shapes += [(k, 4096 // k // 2) for k in range(1, 300, 3)]  # more than the cache's slots
    shapes += [(1,) * 7, (2, 2, 2, 2, 2, 2, 2)]               # deeper than it keeps
    for round_ in range(2):  # the second round finds the heads the first kept
        for shape in shapes:
            t = base[:math.prod(shape)].view(shape)
            views = [t, t.t() if t.dim() == 2 else t]
            for v in views:
                for level, depth, grad in ((3, 2, False), (5, 2, False), (5, 3, False), (5, 2, True)):
                    expected = "\n".join(pyfmt.tensor_block(v.detach().requires_grad_(grad), level, depth)) + "\n"
                    got = _render_in_place(sizes, strides, v, level, 2 * depth, grad)
                    assert got == expected, (round_, shape, v.stride(), level, depth, grad)
    # a head longer than a slot holds (strides of 16 digits): formatted each time
    wide = base[:1].as_strided((1,) * 6, (10**15,) * 6)
    for level in (3, 5, 5):
        expected = "\n".join(pyfmt.tensor_block(wide, level, 2)) + "\n"
        assert len(expected.split("      min=")[0]) > 240
        assert _render_in_place(sizes, strides, wide, level, 4) == expected
