"""The AtenTensorHandle adapter (cpp_runtime/include/aoti_debug/aoti.h) against
the real AOTI C shim of the installed torch: a Tensor block rendered from a
handle equals the Python logger's block for the same tensor, and a device
tensor's statistics (run here on CPU tensors sent down the device path) are
the CPU core's, by libtorch's operators from torch 2.13 on (device_ops.h) and
by a copy to the host before."""

from __future__ import annotations

import ctypes
import math
import os
import subprocess

import pytest
import torch

from aoti_debug.native import core as _native
from aoti_debug.runtime import format as pyfmt

pytestmark = pytest.mark.torch_matrix

ADAPTER = r"""
#include <aoti_debug/aoti.h>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>
extern "C" __attribute__((visibility("default")))
long long render(void* h, int level, int indent, char* buf, long long cap) {
  const aoti_debug::Value v = aoti_debug::tensor(static_cast<AtenTensorHandle>(h));
  std::string out;
  if (v.kind == aoti_debug::Value::kTensor) aoti_debug::detail::append_tensor_block(out, v, level, indent);
  else aoti_debug::detail::append_inline(out, v);
  if (static_cast<long long>(out.size()) < cap) std::memcpy(buf, out.c_str(), out.size() + 1);
  return static_cast<long long>(out.size());
}
// Whether the device statistics by libtorch's operators are compiled (torch 2.13 on).
extern "C" __attribute__((visibility("default")))
int device_ops_compiled() { return AOTI_DEBUG_DEVICE_OPS; }

// What a CUDA tensor's Value calls for its statistics (Value::device_stats): several
// tensors at once, each by libtorch's operators or else by a copy to the host.
extern "C" __attribute__((visibility("default")))
void device_stats_entry(void** hs, long long n, aoti_debug::Stats* out, unsigned char* ok) {
  std::vector<aoti_debug::Value> values(static_cast<size_t>(n));
  std::vector<const aoti_debug::Value*> ptrs(static_cast<size_t>(n));
  bool done[64] = {};
  for (long long i = 0; i < n; ++i) {
    values[i] = aoti_debug::tensor(static_cast<AtenTensorHandle>(hs[i]));
    ptrs[i] = &values[i];
  }
  values[0].device_stats(ptrs.data(), static_cast<size_t>(n), out, done);
  for (long long i = 0; i < n; ++i) ok[i] = done[i];
}

// A level-10 dump's read of a device tensor's storage span (aoti.h), on any device.
extern "C" __attribute__((visibility("default")))
int device_read(void* h, void* dst, unsigned long long bytes) {
  const aoti_debug::Value v = aoti_debug::tensor(static_cast<AtenTensorHandle>(h));
  return aoti_debug::detail::aoti_device_read(v, dst, bytes) ? 1 : 0;
}

#if AOTI_DEBUG_DEVICE_OPS
// The device statistics path (detail/device_ops.h) on whatever device the tensor is:
// 1 with *out filled, 0 when it leaves the tensor to the copy path, -1 when it threw.
extern "C" __attribute__((visibility("default")))
int device_stats(void* h, aoti_debug::Stats* out) {
  const aoti_debug::Value v = aoti_debug::tensor(static_cast<AtenTensorHandle>(h));
  try {
    return aoti_debug::detail::device_ops::reduce(static_cast<AtenTensorHandle>(h), v.t, out) ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_stats: %s\n", e.what());
    return -1;
  }
}
// Several tensors at once (device_ops::reduce_many, one fetch): ok[i] 1 or 0.
extern "C" __attribute__((visibility("default")))
void device_stats_many(void** hs, long long n, aoti_debug::Stats* out, unsigned char* ok) {
  std::vector<AtenTensorHandle> handles(static_cast<size_t>(n));
  std::vector<aoti_debug::Value> values(static_cast<size_t>(n));
  std::vector<const aoti_debug::TensorView*> views(static_cast<size_t>(n));
  bool done[64] = {};
  for (long long i = 0; i < n; ++i) {
    handles[i] = static_cast<AtenTensorHandle>(hs[i]);
    values[i] = aoti_debug::tensor(handles[i]);
    views[i] = &values[i].t;
  }
  aoti_debug::detail::device_ops::reduce_many(handles.data(), views.data(), static_cast<size_t>(n), out, done);
  for (long long i = 0; i < n; ++i) ok[i] = done[i];
}
#endif
"""


@pytest.fixture(scope="session")
def adapter(tmp_path_factory):
    d = tmp_path_factory.mktemp("aoti")
    (d / "adapter.cpp").write_text(ADAPTER)
    torch_dir = os.path.dirname(torch.__file__)
    out = d / "libadapter.so"
    subprocess.run(["c++", "-O1", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall",
                    "-Wextra", "-Werror", "-I", _native.include_dir(), "-I",
                    os.path.join(torch_dir, "include"), str(d / "adapter.cpp"), "-o", str(out),
                    "-L", os.path.join(torch_dir, "lib"), "-ltorch_cpu", "-lc10",
                    "-Wl,-rpath," + os.path.join(torch_dir, "lib")], check=True)
    lib = ctypes.CDLL(str(out))
    lib.device_stats_entry.restype = None
    lib.device_stats_entry.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p]
    if lib.device_ops_compiled():
        lib.device_stats.restype = ctypes.c_int
        lib.device_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.device_stats_many.restype = None
        lib.device_stats_many.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p]
    lib.device_read.restype = ctypes.c_int
    lib.device_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
    lib.render.restype = ctypes.c_longlong
    lib.render.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_longlong]
    return lib


_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def render(adapter, t, level, indent):
    cap = torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(t)  # a new AtenTensorHandle
    try:
        buf = ctypes.create_string_buffer(1 << 16)
        n = adapter.render(_get(cap, None), level, indent, buf, len(buf))
        assert 0 <= n < len(buf)
        return buf.value.decode()
    finally:
        torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(cap)  # frees the handle


def tensors():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(5))
    x[2, 3] = math.nan
    return {"contiguous": x, "transposed": x.t(), "offset": x[1:, 2:], "bf16": x.bfloat16(),
            "int64": torch.arange(-3, 9).reshape(3, 4), "bool": x > 0, "scalar": torch.tensor(3.0),
            "empty": torch.empty(0, 2), "meta": torch.empty(2, 2, device="meta"),
            "complex": torch.complex(x, x)}


@pytest.mark.parametrize("name", sorted(tensors()))
@pytest.mark.parametrize("level", [3, 5])
def test_handle_block_matches_python_logger(adapter, name, level):
    t = tensors()[name]
    assert render(adapter, t, level, 4) == "\n".join(pyfmt.tensor_block(t, level, 2)) + "\n"


# torch's stable C API that device_ops.h calls came with 2.13 (aoti.h)
DEVICE_OPS = (2, 13) <= tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
needs_device_ops = pytest.mark.skipif(not DEVICE_OPS, reason=f"torch {torch.__version__}: device statistics by "
                                      "libtorch's operators need torch 2.13 on; before, the copy path (tested here)")


def stats_of_many(entry, tensors):
    """(Stats array, ok array) of an adapter entry that takes several tensors' handles at once."""
    caps = [torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(t) for t in tensors]
    try:
        handles = (ctypes.c_void_p * len(tensors))(*[_get(c, None) for c in caps])
        out = (_native._StatsC * len(tensors))()
        ok = (ctypes.c_ubyte * len(tensors))()
        entry(handles, len(tensors), out, ok)
    finally:
        for c in caps:
            torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(c)
    return out, ok


def test_device_ops_are_compiled_from_torch_2_13_on(adapter):
    assert adapter.device_ops_compiled() == int(DEVICE_OPS)


def device_stats(adapter, t):
    """(status, fields of the statistics) of detail/device_ops.h's reduction of `t`."""
    cap = torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(t)
    try:
        out = _native._StatsC()
        status = adapter.device_stats(_get(cap, None), ctypes.byref(out))
        return status, {name: getattr(out, name) for name, _ in _native._StatsC._fields_}
    finally:
        torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(cap)


def device_corpus():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(37, 29, generator=g)
    x[3, 4], x[20, 1], x[30, 2] = math.nan, math.inf, -math.inf
    yield "float32", x
    yield "transposed", x.t()
    yield "strided", x[1:, ::3]
    yield "bfloat16", x.bfloat16()
    yield "float16", x.half()
    yield "float64", x.double()
    yield "float8", torch.randn(50, generator=g).to(torch.float8_e4m3fn)
    yield "float8 saturated", (x * 300).to(torch.float8_e4m3fn)[::2, 1:]     # both signs, NaN beside
    yield "float8_e5m2 saturated", (x * 4e4).to(torch.float8_e5m2)
    yield "all-nan", torch.full((5,), math.nan)
    yield "finite", torch.randn(1000, generator=g)
    yield "odd bytes", torch.randn(7, generator=g).half()          # 14 bytes: the hash pads to 16
    yield "int64", torch.randint(-10**12, 10**12, (33,), generator=g)
    yield "int32", torch.randint(-1000, 1000, (5, 5), generator=g, dtype=torch.int32)
    yield "uint8", torch.randint(0, 255, (19,), generator=g, dtype=torch.uint8)
    yield "int8", torch.randint(-128, 127, (19,), generator=g, dtype=torch.int8)
    yield "uint16", torch.randint(0, 65535, (9,), generator=g, dtype=torch.int32).to(torch.uint16)
    yield "bool", x > 0
    yield "scalar", torch.tensor(-2.5)


DEVICE_CASES = dict(device_corpus())


@needs_device_ops
@pytest.mark.parametrize("name", sorted(DEVICE_CASES))
def test_device_statistics_by_torch_ops_equal_the_compiled_cores(adapter, name):
    """The C++ runtime's statistics of a device tensor, reduced by libtorch's operators where
    the tensor is (run here on CPU tensors: the same ops), against the CPU core's: every
    field exact but the mean (torch's summation order), to 1e-12."""
    t = DEVICE_CASES[name]
    status, got = device_stats(adapter, t)
    assert status == 1
    want = _native.compute_stats(t, hash=True)
    assert (want.get("sat_count", 0) > 0) == name.endswith("saturated")
    mean = got.pop("mean")
    assert got["hash"] == want["hash"] and got["numel"] == t.numel()
    for field in ("min", "max", "nan_count", "inf_count", "first_nan", "first_inf", "true_count", "false_count",
                  "sat_count", "first_sat"):
        if field in want:
            assert got[field] == want[field] or (math.isnan(got[field]) and math.isnan(want[field])), field
    if "imin" in want:
        assert (got["imin"], got["imax"]) == (want["imin"], want["imax"])
    if "mean" in want:
        assert mean == pytest.approx(want["mean"], rel=1e-12, abs=1e-300, nan_ok=True)


@needs_device_ops
def test_device_statistics_of_many_tensors_in_one_fetch_equal_each_ones(adapter):
    """A record's device tensors reduced together (one stack, one copy): each tensor's figures
    are its own, whatever sits before it among the fetched words (kinds of different word
    counts interleaved, what is left to the copy in between)."""
    names = sorted(DEVICE_CASES)
    order = [DEVICE_CASES[n] for n in names[::2] + names[1::2]]
    order.insert(3, torch.complex(torch.ones(3), torch.ones(3)))   # left to the copy
    out, ok = stats_of_many(adapter.device_stats_many, order)
    assert list(ok) == [0 if i == 3 else 1 for i in range(len(order))]
    for i, t in enumerate(order):
        if i == 3:
            continue
        status, want = device_stats(adapter, t)
        got = {name: getattr(out[i], name) for name, _ in _native._StatsC._fields_}
        assert status == 1
        assert all(got[f] == want[f] or (got[f] != got[f] and want[f] != want[f]) for f in want), i


@pytest.mark.parametrize("name", ["contiguous", "transposed", "offset", "bf16", "int64", "bool", "scalar",
                                  "complex"])
def test_a_dumps_device_read_copies_the_views_storage_span(adapter, name):
    """What a level-10 dump keeps of a CUDA tensor (aoti.h aoti_device_read, run here on CPU
    tensors through the same shim calls): the bytes of the smallest storage span covering the
    view, from its first element, as dump.h writes a CPU tensor's."""
    t = tensors()[name]
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    want = t.as_strided((span,), (1,), t.storage_offset()).contiguous().view(torch.uint8).numpy().tobytes()
    buf = ctypes.create_string_buffer(len(want))
    cap = torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(t)
    try:
        assert adapter.device_read(_get(cap, None), buf, len(want)) == 1
        assert buf.raw == want
        if t.element_size() > 1:   # not a whole number of elements: refused, nothing read
            assert adapter.device_read(_get(cap, None), buf, len(want) - 1) == 0
    finally:
        torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(cap)


@pytest.mark.parametrize("name, t", [("complex", torch.complex(torch.ones(3), torch.ones(3))),
                                     ("uint64", torch.tensor([1, 2], dtype=torch.int64).view(torch.uint64)),
                                     ("float4", torch.tensor([0x71, 0xF8], dtype=torch.uint8).view(
                                         torch.float4_e2m1fn_x2)),
                                     ("empty", torch.empty(0))])
@needs_device_ops
def test_device_statistics_leave_what_they_do_not_reduce_to_the_copy(adapter, name, t):
    assert device_stats(adapter, t)[0] == 0


def test_a_device_tensors_statistics_are_the_cores_on_every_release(adapter):
    """What a CUDA tensor's Value asks for its statistics, on every tested torch: every
    corpus tensor, complex and uint64 among them, in one call, each figure the CPU core's
    (the mean to 1e-12: torch's operators sum in another order; the copy path's exactly)."""
    order = [t for _, t in sorted(DEVICE_CASES.items())] + [
        torch.complex(torch.ones(3), torch.arange(3.0)), torch.tensor([1, 2], dtype=torch.int64).view(torch.uint64),
        # float4_e2m1fn_x2 (which torch converts to nothing): the copy and the core, every byte, transposed
        torch.arange(256, dtype=torch.int32).to(torch.uint8).view(16, 16).view(torch.float4_e2m1fn_x2).t()]
    out, ok = stats_of_many(adapter.device_stats_entry, order)
    assert list(ok) == [1] * len(order)
    for i, t in enumerate(order):
        got = {name: getattr(out[i], name) for name, _ in _native._StatsC._fields_}
        want = _native.compute_stats(t, hash=True)
        assert got["numel"] == t.numel() and got["hash"] == want["hash"], i
        unsigned = {"imin": "umin", "imax": "umax"} if want["unsigned"] else {}
        for field, value in want.items():
            if field in ("kind", "unsigned", "numel", "hash"):
                continue
            mine = got[unsigned.get(field, field)]
            if field == "mean":
                assert mine == pytest.approx(value, rel=1e-12, abs=1e-300, nan_ok=True), (i, field)
            else:
                assert mine == value or (mine != mine and value != value), (i, field)
