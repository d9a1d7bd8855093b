"""The AtenTensorHandle adapter (cpp_runtime/include/aoti_debug/aoti.h) against
the real AOTI C shim of the installed torch: a Tensor block rendered from a
handle equals the Python logger's block for the same tensor."""

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
#include <cstring>
extern "C" __attribute__((visibility("default")))
long long render(void* h, int level, int indent, char* buf, long long cap) {
  const aoti_debug::Value v = aoti_debug::tensor(static_cast<AtenTensorHandle>(h));
  std::string out;
  if (v.kind == aoti_debug::Value::kTensor) aoti_debug::detail::append_tensor_block(out, v, level, indent);
  else aoti_debug::detail::append_inline(out, v);
  if (static_cast<long long>(out.size()) < cap) std::memcpy(buf, out.c_str(), out.size() + 1);
  return static_cast<long long>(out.size());
}
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
