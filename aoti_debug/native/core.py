"""Python binding of the C++ runtime (``cpp_runtime/``) through ctypes.

The Python logger uses the very code that artifacts compile in: the
statistics core (section 3 of docs/log-format.md), the destinations with
their banner and process-wide lock (so Python and C++ records share a file
without tearing), the launch in flight and the crash trailer.

``cpp_runtime/src/pycore.cpp`` is built on first use with the system C++
compiler into a cache folder (``$AOTI_DEBUG_CACHE_DIR`` or
``~/.cache/aoti_debug``), keyed by the sources, compiler, flags and machine;
the library is written to a temporary name and renamed into place, so several
processes may build at once.  If it cannot be built, ``lib()`` returns None
after one warning and the other functions raise ``NativeUnavailable``.

Importing this module imports neither torch nor the compiler.
"""

from __future__ import annotations

import array
import ctypes
import os
import struct
import sys
import threading
import warnings
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from . import build as _build

__all__ = [
    "NativeUnavailable", "lib", "include_dir", "runtime_dir", "compute_stats", "all_finite",
    "render_tensor_block", "render_scale_lines", "format_number", "sink_write", "write_note", "set_inflight",
    "clear_inflight", "install_crash_handler", "next_call_number", "instance_name", "read_settings",
    "glob_match", "dtype_code", "vector_width", "dequant_stats", "e2m1_value",
]


# c10::ScalarType codes by torch dtype name (torch/headeronly/core/ScalarType.h)
DTYPE_CODES: Dict[str, int] = {
    "uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5, "float32": 6,
    "float64": 7, "complex32": 8, "complex64": 9, "complex128": 10, "bool": 11, "qint8": 12,
    "quint8": 13, "qint32": 14, "bfloat16": 15, "quint4x2": 16, "quint2x4": 17, "bits1x8": 18,
    "bits2x4": 19, "bits4x2": 20, "bits8": 21, "bits16": 22, "float8_e5m2": 23,
    "float8_e4m3fn": 24, "float8_e5m2fnuz": 25, "float8_e4m3fnuz": 26, "uint16": 27,
    "uint32": 28, "uint64": 29, "uint1": 30, "uint2": 31, "uint3": 32, "uint4": 33, "uint5": 34,
    "uint6": 35, "uint7": 36, "int1": 37, "int2": 38, "int3": 39, "int4": 40, "int5": 41,
    "int6": 42, "int7": 43, "float8_e8m0fnu": 44, "float4_e2m1fn_x2": 45,
}
# c10::DeviceType codes by torch.device.type
DEVICE_CODES: Dict[str, int] = {
    "cpu": 0, "cuda": 1, "mkldnn": 2, "opengl": 3, "opencl": 4, "ideep": 5, "hip": 6, "fpga": 7,
    "maia": 8, "xla": 9, "vulkan": 10, "metal": 11, "xpu": 12, "mps": 13, "meta": 14, "hpu": 15,
    "ve": 16, "lazy": 17, "ipu": 18, "mtia": 19, "privateuseone": 20,
}
# The narrow floating formats whose statistics count the values at their largest
# finite magnitude (sat_count; detail/dtypes.h's float_facts and counts_saturation):
# that magnitude, torch.finfo's max (float4_e2m1fn_x2, which torch.finfo lacks: of
# each of its two e2m1 values).
SATURATION_LIMITS: Dict[str, float] = {
    "float8_e5m2": 57344.0, "float8_e4m3fn": 448.0, "float8_e5m2fnuz": 57344.0,
    "float8_e4m3fnuz": 240.0, "float8_e8m0fnu": 2.0 ** 127, "float4_e2m1fn_x2": 6.0,
}
_SATURATING_CODES = frozenset(DTYPE_CODES[name] for name in SATURATION_LIMITS)
STATS_KINDS = {0: "none", 1: "float", 2: "int", 3: "uint", 4: "bool", 5: "complex"}  # detail::StatsKind


class NativeUnavailable(RuntimeError):
    """The C++ runtime library could not be built or loaded."""


class _StatsC(ctypes.Structure):
    # mirrors aoti_debug::Stats (detail/stats.h)
    _fields_ = [
        ("kind", ctypes.c_int32), ("dtype", ctypes.c_int32), ("numel", ctypes.c_int64),
        ("min", ctypes.c_double), ("max", ctypes.c_double), ("mean", ctypes.c_double),
        ("imin", ctypes.c_int64), ("imax", ctypes.c_int64),
        ("umin", ctypes.c_uint64), ("umax", ctypes.c_uint64),
        ("nan_count", ctypes.c_int64), ("inf_count", ctypes.c_int64),
        ("true_count", ctypes.c_int64), ("false_count", ctypes.c_int64),
        ("first_nan", ctypes.c_int64), ("first_inf", ctypes.c_int64),
        ("hash", ctypes.c_uint64), ("hashed", ctypes.c_int64), ("sat_count", ctypes.c_int64),
        ("first_sat", ctypes.c_int64),
    ]


class _DequantStatsC(ctypes.Structure):
    # mirrors aoti_debug::DequantStats (detail/stats.h)
    _fields_ = [
        ("status", ctypes.c_int32), ("pad", ctypes.c_int32), ("numel", ctypes.c_int64),
        ("min", ctypes.c_double), ("max", ctypes.c_double), ("mean", ctypes.c_double),
        ("nan_count", ctypes.c_int64), ("inf_count", ctypes.c_int64),
    ]


# detail::DequantLayout and detail::DequantStatus
DEQUANT_LAYOUTS = {"tensorwise": 1, "rowwise": 2, "block": 3}
DEQUANT_STATUS = {0: None, 1: "empty tensor", 2: "device not supported", 3: "dtype not supported",
                  4: "scale shape not as compiled", 5: "out of memory"}


# ---------------------------------------------------------------- locating

runtime_dir = _build.runtime_dir
include_dir = _build.include_dir


# ---------------------------------------------------------------- building

BASE_FLAGS = ("-O3", _build.CXX_STD, "-shared", "-fPIC", "-fvisibility=hidden")


def build(force: bool = False) -> Path:
    """Builds (or finds in the cache) the library; raises NativeUnavailable."""
    try:
        return _build.build(Path("src") / "pycore.cpp", BASE_FLAGS, "libaotid_{key}.so", force=force)
    except _build.BuildError as exc:
        raise NativeUnavailable(str(exc)) from None


# ---------------------------------------------------------------- loading

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_tried = False

_i32, _i64, _u64, _dbl = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
_ptr, _str, _buf = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p
_i64p = ctypes.POINTER(ctypes.c_int64)

_SIGNATURES = {
    "aotid_version": (_str, []),
    "aotid_registry_abi": (_i32, []),
    "aotid_stats_size": (_i64, []),
    "aotid_vector_width": (_i32, []),
    "aotid_compute_stats": (_i32, [_ptr, _i32, _i64, _i64p, _i64p, _i32, _i32, _i32,
                                   ctypes.POINTER(_StatsC)]),
    "aotid_all_finite": (_i32, [_ptr, _i32, _i64, _i64p, _i64p, _i32]),
    "aotid_render_tensor_block": (_i64, [_ptr, _i32, _i64, _i64p, _i64p, _i32, _i32, _i32, _i32, _i32,
                                         _buf, _i64]),
    "aotid_render_scale_lines": (_i64, [_ptr, _i32, _i64, _i64p, _i64p, _i32, _i32, _str, _i32, _buf, _i64]),
    "aotid_format_number": (_i32, [_dbl, _buf]),
    "aotid_dequant_stats_size": (_i64, []),
    "aotid_e2m1_value": (_dbl, [_i32]),
    "aotid_dequant_stats": (_i32, [_i64p, _i32, ctypes.POINTER(_i32), ctypes.POINTER(_DequantStatsC)]),
    "aotid_sink_write": (_i32, [_str, _str, _i64, _str, _ptr]),
    "aotid_write_launch": (_i32, [_str, _str, _i64, _i64, _str, _str, _i64, _i32, _str, _ptr]),
    "aotid_write_note": (_i32, [_str, _str, _str, _i32, _i32, _str]),
    "aotid_next_call_number": (_i64, []),
    "aotid_instance_name": (_i64, [_str, _buf, _i64]),
    "aotid_set_inflight": (None, [_i64, _i64, _str, _str]),
    "aotid_clear_inflight": (None, []),
    "aotid_install_crash_handler": (None, []),
    "aotid_registry_attach": (_i32, []),
    "aotid_glob_match": (_i32, [_str, _str]),
    "aotid_read_settings": (_i64, [ctypes.POINTER(ctypes.c_char_p), _i32, _str, _str, _i32, _str,
                                   _i64, _buf, _i64]),
    "aotid_blackbox_recover": (_i64, [_str, _str, _buf, _i64]),
    "aotid_blackbox_dump": (_i64, [_str, _buf, _i64]),
    "aotid_blackbox_entries": (_i64, [_ptr, _i64, _buf, _i64]),
    "aotid_blackbox_open": (_i32, [_i64, _i32, _str, _str, _str, _i64, _dbl, _i64, _i64, _i64]),
    "aotid_blackbox_site": (_ptr, [_str, _str, _str, _str, _str, _i32, ctypes.POINTER(ctypes.c_char_p),
                                   ctypes.POINTER(_i32), ctypes.POINTER(_i32), ctypes.POINTER(ctypes.c_char_p),
                                   ctypes.POINTER(ctypes.c_char_p)]),
    "aotid_blackbox_site_free": (None, [_ptr]),
    "aotid_blackbox_run": (None, [_str, _i64, _i32, ctypes.POINTER(ctypes.c_char_p), _ptr, _ptr, _ptr]),
    "aotid_blackbox_launch": (None, [_ptr, _str, _i64, _i64, _i32, _i32, _ptr, _ptr, _ptr, _ptr]),
    "aotid_blackbox_done": (None, [_ptr, _ptr]),
    "aotid_blackbox_fired": (None, [_str, _str, _i64, _i64, _i32, _ptr, _i32, _ptr, _ptr]),
    "aotid_record_texts": (_ptr, [_str, _str, _str, _str]),
    "aotid_record_texts_free": (None, [_ptr]),
    "aotid_write_record": (_i32, [_ptr, _ptr, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                  ctypes.POINTER(_StatsC), _ptr]),
    # the launch extension's (native/launch_ext.py): called from C by address
    "aotid_py_record_abi": (_u64, []),
    "aotid_write_values": (_i32, [_ptr]),
}


# A launch's calls (its records, the in-flight mark) go through a ctypes.PyDLL
# handle of the same library, which keeps the GIL through the call: a CDLL call
# releases it, and a busy Python thread then holds the launch back up to the
# switch interval (5 ms) a call (bench/bench_gil.py).  The core releases it
# itself where a record would wait or read long, through these hooks (sink.h's
# WaitHooks), as torch.compile's launch extension has it do.
_HELD = ("aotid_write_launch", "aotid_write_record", "aotid_set_inflight", "aotid_clear_inflight",
         "aotid_blackbox_run", "aotid_blackbox_launch", "aotid_blackbox_done", "aotid_sink_write",
         "aotid_next_call_number", "aotid_record_texts", "aotid_record_texts_free")
_held: Optional[ctypes.PyDLL] = None


class _WaitHooks(ctypes.Structure):
    _fields_ = [("release", ctypes.c_void_p), ("reacquire", ctypes.c_void_p)]


_GIL = _WaitHooks(ctypes.cast(ctypes.pythonapi.PyEval_SaveThread, ctypes.c_void_p).value,
                  ctypes.cast(ctypes.pythonapi.PyEval_RestoreThread, ctypes.c_void_p).value)
_GIL_AT = ctypes.addressof(_GIL)


def _held_only(name: str):
    """What the CDLL handle has in place of a _HELD function."""
    def refuse(*args, **kwargs):
        raise TypeError(f"{name} keeps the GIL through its call: call it through native.core._need_held() "
                        "(a ctypes.PyDLL handle), not through lib()")
    refuse.__name__ = name
    return refuse


def lib() -> Optional[ctypes.CDLL]:
    """The loaded library, built on first use; None (after one warning) if impossible."""
    global _lib, _held, _tried
    if _lib is not None or _tried:
        return _lib
    with _lock:
        if _lib is None and not _tried:
            try:
                path = str(build())
                handle, held = ctypes.CDLL(path), ctypes.PyDLL(path)
                for name, (res, args) in _SIGNATURES.items():
                    fn = getattr(held if name in _HELD else handle, name)
                    fn.restype, fn.argtypes = res, args
                    if name in _HELD:
                        # through the CDLL the GIL would be gone when the core's hooks release it
                        setattr(handle, name, _held_only(name))
                if handle.aotid_stats_size() != ctypes.sizeof(_StatsC):
                    raise NativeUnavailable("Stats layout differs between C++ and Python")
                if handle.aotid_dequant_stats_size() != ctypes.sizeof(_DequantStatsC):
                    raise NativeUnavailable("DequantStats layout differs between C++ and Python")
                _lib, _held = handle, held
            except (NativeUnavailable, OSError, FileNotFoundError, AttributeError) as exc:
                warnings.warn(f"aoti-debug: C++ runtime unavailable, {exc}", RuntimeWarning,
                              stacklevel=2)
            _tried = True
    return _lib


def _need() -> ctypes.CDLL:
    handle = lib()
    if handle is None:
        raise NativeUnavailable("the aoti-debug C++ runtime could not be built (see the warning)")
    return handle


def _need_held() -> ctypes.PyDLL:
    """The library's handle for the calls that keep the GIL (_HELD)."""
    _need()
    return _held


# ---------------------------------------------------------------- tensors

def dtype_code(dtype) -> int:
    """c10::ScalarType code of a torch.dtype."""
    name = str(dtype).replace("torch.", "")
    if name not in DTYPE_CODES:
        raise ValueError(f"unknown dtype {dtype}")
    return DTYPE_CODES[name]


def _view_args(tensor, need_data: bool):
    import torch

    if tensor.layout != torch.strided:
        raise ValueError(f"only strided tensors are supported, not {tensor.layout}")
    if tensor.is_neg():
        tensor = tensor.resolve_neg()  # the sign is real; conj does not change |z|, NaN or Inf
    on_cpu = tensor.device.type == "cpu"
    if need_data and not on_cpu:
        raise ValueError(f"statistics need a CPU tensor, not {tensor.device}")
    ndim = tensor.dim()
    sizes = (ctypes.c_int64 * max(ndim, 1))(*tensor.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*tensor.stride())
    data = tensor.data_ptr() if on_cpu and tensor.numel() > 0 else None
    return tensor, data, dtype_code(tensor.dtype), ndim, sizes, strides


def all_finite(tensor, count_inf: bool) -> bool:
    """Does a CPU tensor hold no NaN (and, with ``count_inf``, no Inf)?  The
    NaN/Inf check's clean path: one scan of the raw bits, no statistics."""
    handle = _need()
    tensor, data, code, ndim, sizes, strides = _view_args(tensor, True)
    rc = handle.aotid_all_finite(data, code, ndim, sizes, strides, int(count_inf))
    del tensor  # kept alive until here: the core reads its memory
    if rc < 0:
        raise RuntimeError("aotid_all_finite failed")
    return rc == 1


def compute_stats(tensor, max_threads: int = 0, isa_limit: int = 0, hash: bool = False) -> dict:
    """Section-3 statistics of a CPU tensor (any strides), by the shared C++ core:
    the fields of a runtime.stats.Stats; with ``hash`` its content hash too (3.1).

    ``max_threads``/``isa_limit`` exist for tests: results never depend on them.
    """
    handle = _need()
    tensor, data, code, ndim, sizes, strides = _view_args(tensor, True)
    out = _StatsC()
    rc = handle.aotid_compute_stats(data, code, ndim, sizes, strides, int(hash), max_threads, isa_limit,
                                    ctypes.byref(out))
    del tensor  # kept alive until here: the core reads its memory
    if rc != 0:
        raise RuntimeError("aotid_compute_stats failed")
    return stats_fields(out)


def e2m1_value(nibble: int) -> float:
    """One float4_e2m1fn value from its 4 bits (detail::e2m1_value)."""
    return _need().aotid_e2m1_value(int(nibble) & 15)


def dequant_stats(operand, scale, global_scale, layout: str, block: int, swizzled: bool, kdim: int,
                  isa_limit: int = 0) -> dict:
    """docs/log-format.md 3.3: min, max, mean, nan_count, inf_count of each element of
    the 2-D CPU operand times its scale element (times `global_scale`, a one-element
    tensor, when given), by the shared core in one pass: `layout` tensorwise, rowwise
    (one per outer index) or block (`block` elements along the contraction dimension
    `kdim`, `swizzled` in cuBLAS's 128x4 tiles).  `skipped` names why there are none.
    ``isa_limit`` exists for tests: results never depend on it."""
    handle = _need()
    views = [_view_args(t, False) for t in (operand, scale) + ((global_scale,) if global_scale is not None else ())]
    words = (ctypes.c_int64 * 15)()
    for k, (_t, data, code, ndim, sizes, strides) in enumerate(views):
        if _t.device.type != "cpu":
            data = None
        words[5 * k:5 * k + 5] = [data or 0, code, ndim, ctypes.addressof(sizes), ctypes.addressof(strides)]
    spec = (_i32 * 5)(DEQUANT_LAYOUTS[layout], int(block), int(bool(swizzled)), int(kdim), int(isa_limit))
    out = _DequantStatsC()
    rc = handle.aotid_dequant_stats(words, int(global_scale is not None), spec, ctypes.byref(out))
    del views  # kept alive until here: the core reads their memory
    if rc != 0:
        raise RuntimeError("aotid_dequant_stats failed")
    return dict(skipped=DEQUANT_STATUS.get(out.status, "not computed"), numel=out.numel, min=out.min,
                max=out.max, mean=out.mean, nan_count=out.nan_count, inf_count=out.inf_count)


def stats_fields(out: "_StatsC") -> dict:
    """The fields of a runtime.stats.Stats from the core's aoti_debug::Stats."""
    kind = STATS_KINDS.get(out.kind, "none")
    fields = dict(kind="int" if kind == "uint" else kind, numel=out.numel,
                  unsigned=kind == "uint")
    if out.numel == 0:
        fields.update(skipped="empty tensor")
    elif kind == "none":
        fields.update(skipped="dtype not supported")
    elif kind in ("float", "complex"):
        fields.update(min=out.min, max=out.max, mean=out.mean, nan_count=out.nan_count,
                      inf_count=out.inf_count, first_nan=out.first_nan, first_inf=out.first_inf)
        if out.dtype in _SATURATING_CODES:
            fields.update(sat_count=out.sat_count, first_sat=out.first_sat)
    elif kind == "int":
        fields.update(imin=out.imin, imax=out.imax, mean=out.mean)
    elif kind == "uint":
        fields.update(imin=out.umin, imax=out.umax, mean=out.mean)
    elif kind == "bool":
        fields.update(true_count=out.true_count, false_count=out.false_count)
    if out.hashed and "skipped" not in fields:
        fields.update(hash=out.hash)
    return fields


def render_tensor_block(tensor, level: int, indent: int) -> str:
    """The Tensor block exactly as the C++ shim writes it ("Tensor(" at
    `indent` spaces); torch.compile's runtime writes its plain CPU tensors'
    blocks so (runtime/sink.py, tensor_block)."""
    handle = _need()
    if tensor.is_neg():   # its values are a resolved copy, whose layout the block would show
        raise ValueError("a negative view's block is not rendered by the core")
    requires_grad = int(tensor.requires_grad)
    tensor, data, code, ndim, sizes, strides = _view_args(tensor, False)
    dev = tensor.device
    dev_code = DEVICE_CODES.get(dev.type, -1)
    dev_index = dev.index if dev.index is not None else -1
    buf = _block_buffer()
    while True:
        n = handle.aotid_render_tensor_block(data, code, ndim, sizes, strides, dev_code, dev_index,
                                             requires_grad, level, indent, buf, len(buf))
        if n < 0:
            raise RuntimeError("aotid_render_tensor_block failed")
        if n < len(buf):
            return ctypes.string_at(buf, n).decode("utf-8")
        buf = _block_buffer(n + 1)


def render_scale_lines(tensor, scale: str, indent: int) -> str:
    """The lines a scale argument's Tensor block adds at level 5 as the C++ shim
    writes them (format.scale_lines is the Python runtime's)."""
    handle = _need()
    tensor, data, code, ndim, sizes, strides = _view_args(tensor, False)
    dev = tensor.device
    buf = _block_buffer()
    n = handle.aotid_render_scale_lines(data, code, ndim, sizes, strides, DEVICE_CODES.get(dev.type, -1),
                                        dev.index if dev.index is not None else -1, scale.encode(),
                                        indent, buf, len(buf))
    if n < 0 or n >= len(buf):
        raise RuntimeError("aotid_render_scale_lines failed")
    return ctypes.string_at(buf, n).decode("utf-8")


_blocks = threading.local()


def _block_buffer(size: int = 4096):
    """This thread's buffer for rendered blocks (one allocation, not one per block)."""
    buf = getattr(_blocks, "buf", None)
    if buf is None or len(buf) < size:
        buf = _blocks.buf = ctypes.create_string_buffer(size)
    return buf


# ---------------------------------------------------------------- text

def format_number(x: float) -> str:
    """Section-2 number format (the C++ implementation)."""
    buf = ctypes.create_string_buffer(48)
    _need().aotid_format_number(float(x), buf)
    return buf.value.decode("ascii")


def _torch_version(given: Optional[str]) -> bytes:
    if given is None:
        torch = sys.modules.get("torch")
        given = getattr(torch, "__version__", "unknown") if torch is not None else "unknown"
    return str(given).encode("utf-8")


def sink_write(dest: str, text: str, torch_version: Optional[str] = None) -> None:
    """Writes complete record text to ``dest`` (stdout, stderr, or a path; %i = pid)
    with one write(2) under the process lock, after the destination's banner when
    this process first writes there (banner: ``torch_version``, default torch.__version__)."""
    data = text.encode("utf-8", "backslashreplace")     # a lone surrogate (os.fsdecode) never loses a record
    _need_held().aotid_sink_write(dest.encode("utf-8"), data, len(data), _torch_version(torch_version), _GIL_AT)


def write_launch(dest: str, model: str, run: int, launch: int, kernel: str, body: str, mark: bool,
                 torch_version: Optional[str] = None) -> None:
    """The ``launch model:R.K kernel`` record with ``body`` (whole lines), headed
    by the C++ runtime, in one write(2); then, with ``mark``, the launch marked
    in flight on this thread (as set_inflight)."""
    data = body.encode("utf-8", "backslashreplace")
    _need_held().aotid_write_launch(dest.encode("utf-8"), model.encode("utf-8"), run, launch,
                                    kernel.encode("utf-8"), data, len(data), 1 if mark else 0,
                                    _torch_version(torch_version), _GIL_AT)


def write_note(dest: str, topic: str, lines: str, once: bool = True, level: int = 1,
               torch_version: Optional[str] = None) -> None:
    """A ``note - topic`` record, one body line per line; at level 0 no record
    but ``aoti-debug <topic>: <line>`` lines on stderr; ``once``: first time per process."""
    _need().aotid_write_note(dest.encode("utf-8"), topic.encode("utf-8"), lines.encode("utf-8"),
                             1 if once else 0, int(level), _torch_version(torch_version))


def next_call_number() -> int:
    """The next call number N, shared with every C++ runtime in the process."""
    return _need_held().aotid_next_call_number()


def instance_name(name: str) -> str:
    """The record name of a newly loaded model: ``name``, then ``name#2``, ``name#3``...
    counted with every C++ runtime in the process."""
    buf = ctypes.create_string_buffer(len(name.encode("utf-8")) + 32)
    n = _need().aotid_instance_name(name.encode("utf-8"), buf, len(buf))
    return buf.value.decode("utf-8") if n >= 0 else name


def set_inflight(run: int, launch: int, name: str, model: str = "") -> None:
    """Marks launch ``run.launch`` of ``name`` as running on this thread (crash trailer);
    ``run < 0`` marks call number ``launch``."""
    _need_held().aotid_set_inflight(run, launch, name.encode("utf-8"), model.encode("utf-8"))


def clear_inflight() -> None:
    _need_held().aotid_clear_inflight()


def install_crash_handler() -> None:
    """Installs the crash-trailer handlers (once per process, shared with artifacts)."""
    _need().aotid_install_crash_handler()


def vector_width() -> int:
    """Doubles per vector the statistics core uses on this CPU (2, 4 or 8)."""
    return _need().aotid_vector_width()


# ---------------------------------------------------------------- settings

def glob_match(pattern: str, text: str) -> bool:
    """The C++ kernel-filter glob (case-insensitive fnmatch)."""
    return _need().aotid_glob_match(pattern.encode("utf-8"), text.encode("utf-8")) == 1


def read_settings(environ: Mapping[str, str], level: int = 0, kernels: str = "",
                  nan_check: str = "off", check_inputs: bool = False, memcheck: str = "off",
                  blackbox: int = 0) -> Tuple[List[str], Dict[str, str]]:
    """How the C++ shim reads ``environ`` for an artifact compiled with the given
    values: (problem lines with their "; keeping ..." tail, resolved fields as text)."""
    handle = _need()
    entries = [f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in environ.items()]
    arr = (ctypes.c_char_p * (len(entries) + 1))(*entries, None)
    cap = 8192
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = handle.aotid_read_settings(arr, level, kernels.encode("utf-8"),
                                       nan_check.encode("utf-8"), 1 if check_inputs else 0,
                                       memcheck.encode("utf-8"), blackbox, buf, cap)
        if n < 0:
            raise RuntimeError("aotid_read_settings failed")
        if n < cap:
            break
        cap = n + 1
    text = buf.raw[:n].decode("utf-8", "surrogateescape")
    head, _, tail = text.partition("--\n")
    problems = [line for line in head.split("\n") if line]
    values = dict(line.split("=", 1) for line in tail.split("\n") if line)
    return problems, values


# ---------------------------------------------------------------- the black box

def _text_call(fn, *args) -> Tuple[str, str]:
    """(status, text) of a black-box entry point answering "status\\ntext"."""
    cap = 1 << 16
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = fn(*args, buf, cap)
        if n < 0:
            raise RuntimeError(f"{fn.__name__} failed")
        if n < cap:
            break
        cap = n + 1
    status, _, text = buf.raw[:n].decode("utf-8", "surrogateescape").partition("\n")
    return status, text


def blackbox_recover(ring: str, out_dir: str) -> Tuple[str, str]:
    """The ring file of a process that has ended, written as a dump folder under
    ``out_dir``: ("ok", what it holds), ("live", why it was left alone) or ("error", why)."""
    return _text_call(_need().aotid_blackbox_recover, os.fsencode(ring), os.fsencode(out_dir))


def blackbox_dump() -> Tuple[str, str]:
    """This process's ring as a dump folder now: ("ok", what it holds) or ("error", why)."""
    return _text_call(_need().aotid_blackbox_dump, b"python")


def blackbox_entries(data: bytes) -> Tuple[str, List[str]]:
    """The whole entries of a ring image, as the C++ reader sees them:
    ("ok", lines) or ("error", [why]) (aotid_blackbox_entries)."""
    raw = ctypes.create_string_buffer(data, len(data)) if data else None
    status, text = _text_call(_need().aotid_blackbox_entries, ctypes.cast(raw, ctypes.c_void_p), len(data))
    return status, [line for line in text.split("\n") if line]


# ---------------------------------------------------------------- the Python logger's black box
#
# torch.compile's wrapper keeps its launches in the process's one ring through
# these (aoti_debug/runtime/blackbox.py); the C++ writer does the work.

def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


_DOUBLE = struct.Struct("d")
_INT64 = struct.Struct("q")


_NOTHING = (0, 0, 0, 0, 0, 0, 0, 0)
_tensor_types: Tuple[type, type] = ()      # (torch.Tensor, torch.nn.Parameter), on first use


def tensor_types() -> Tuple[type, type]:
    """(torch.Tensor, torch.nn.Parameter): the plain tensor types, which the
    core reads by their memory and layout (a subclass may not hold its values)."""
    global _tensor_types, _is_neg
    if not _tensor_types:
        import torch
        keys, negative = torch._C._dispatch_keys, torch._C.DispatchKey.Negative
        _is_neg = lambda t: keys(t).has(negative)  # noqa: E731
        _tensor_types = (torch.Tensor, torch.nn.Parameter)
    return _tensor_types


# tensor.is_neg() without letting the GIL go: the method releases it (torch's
# generated bindings do), and beside a busy Python thread each launch would then
# wait up to a switch interval to take it back (bench/bench_gil.py); set by tensor_types()
_is_neg = None
_dtype_codes: Dict[object, int] = {}        # torch.dtype -> code
_device_codes: Dict[object, Tuple[int, int]] = {}   # torch.device -> (type code, index)


def box_words(values) -> Tuple[array.array, array.array]:
    """The arguments as pycore.cpp's py_values() reads them (value_words), in two
    arrays: the values' words, and their sizes, strides and int lists."""
    words, dims = value_words(values, False)
    return array.array("q", words), array.array("q", dims or (0,))


_CPU = (0, -1)


def value_words(values, exact: bool) -> Optional[Tuple[list, list]]:
    """Eight words per value {kind, dtype, flags, bits of d, data, ndim, device
    type, device index}, and each tensor's sizes then strides (an int list's
    values) in a second list.  A tensor is passed by its memory and layout;
    anything else (a string, a list of tensors) as nothing: named, its value
    not kept.  A tensor's flags: 1 a parameter (torch.compile passes the
    weights as inputs), which the black box describes and does not copy, as it
    does an artifact's constants; 2 requires_grad, which records show.  With
    `exact`, None unless every value is one the core renders as format.py does
    (a plain CPU tensor, None, a bool, an int, a float): a record's values.
    The caller keeps `values` alive while the C++ side reads them.  Every
    launch pays for this: lookups are cached, nothing is imported."""
    tensor, parameter = tensor_types()
    words, dims = [], []
    for v in values:
        if isinstance(v, tensor):
            cpu = v.is_cpu
            if exact and (not cpu or (type(v) is not tensor and type(v) is not parameter) or _is_neg(v)):
                return None
            shape = v.shape
            dims += shape
            dims += v.stride()
            dtype = v.dtype
            code = _dtype_codes.get(dtype)
            if code is None:
                try:
                    code = _dtype_codes.setdefault(dtype, dtype_code(dtype))
                except ValueError:     # described by the C++ side as an unknown dtype
                    code = _dtype_codes.setdefault(dtype, -1)
            if exact and code < 0:
                return None
            where = _CPU if cpu else _device_codes.get(v.device)
            if where is None:
                device = v.device
                where = _device_codes.setdefault(device, (DEVICE_CODES.get(device.type, -1),
                                                          -1 if device.index is None else device.index))
            words += (6, code, (type(v) is parameter) | (v.requires_grad << 1), 0, v.data_ptr(), len(shape),
                      where[0], where[1])
        elif v is None:
            words += _NOTHING
        elif type(v) is bool:
            words += (1, 0, int(v), 0, 0, 0, 0, 0)
        elif type(v) is int:
            words += (2, 0, v, 0, 0, 0, 0, 0)
        elif type(v) is float:
            words += (3, 0, 0, _INT64.unpack(_DOUBLE.pack(v))[0], 0, 0, 0, 0)
        elif exact:
            return None
        elif isinstance(v, (list, tuple)) and all(type(x) is int for x in v):
            dims += v
            words += (5, 0, len(v), 0, 0, 0, 0, 0)
        else:
            words += _NOTHING
    return words, dims


def _addr(a: array.array) -> int:
    return a.buffer_info()[0]


def blackbox_open(launches: int, level: int, dest: str, torch_version: str, dump_dir: str, max_mb: int,
                  dump_max_size_gb: float, dump_max_count: int, rank: Optional[int], world: Optional[int]) -> bool:
    """Opens this process's ring (or finds it open); False: the note says why."""
    return _need().aotid_blackbox_open(launches, level, _utf8(dest), _utf8(torch_version), os.fsencode(dump_dir),
                                       max_mb, dump_max_size_gb, dump_max_count,
                                       -1 if rank is None else rank, -1 if world is None else world) == 1


def blackbox_site(kernel: str, nodes: str, source: str, lines: str, ops: str, args, constants,
                  scales=None, dequants=None) -> int:
    """A handle for a launch site (name, role) pairs; free it with blackbox_site_free.
    `scales`: {arg index: the op's scale argument it is passed as}; `dequants`: {arg
    index: how its scales apply (plan.dequant_spec)}."""
    n = len(args)
    scales, dequants = scales or {}, dequants or {}
    scale_names = (ctypes.c_char_p * max(n, 1))(*[_utf8(scales[k]) if k in scales else None for k in range(n)])
    dequant_specs = (ctypes.c_char_p * max(n, 1))(*[_utf8(dequants[k]) if k in dequants else None
                                                     for k in range(n)])
    names = (ctypes.c_char_p * max(n, 1))(*[_utf8(a) for a, _ in args])
    roles = (ctypes.c_int32 * max(n, 1))(*[("in", "out", "inout").index(r) for _, r in args])
    consts = (ctypes.c_int32 * max(n, 1))(*[int(k in constants) for k in range(n)])
    return _need().aotid_blackbox_site(_utf8(kernel), _utf8(nodes), _utf8(source), _utf8(lines), _utf8(ops),
                                       n, names, roles, consts, scale_names, dequant_specs) or 0


def blackbox_site_free(handle: int) -> None:
    _need().aotid_blackbox_site_free(handle)


def blackbox_run(model: bytes, run: int, names, values) -> None:
    words, dims = box_words(values)
    labels = (ctypes.c_char_p * max(len(values), 1))(*[_utf8(names[k] if k < len(names) and names[k] else "-")
                                                       for k in range(len(values))])
    _need_held().aotid_blackbox_run(model, run, len(values), labels, _addr(words), _addr(dims), _GIL_AT)


def blackbox_launch(site: int, model: bytes, run: int, launch: int, level: int, values, ref: int) -> None:
    """Before launch R.K: its entry {seq, pos, region} goes to the three words at
    address `ref`, for blackbox_done (seq 0: not kept)."""
    words, dims = box_words(values)
    _held.aotid_blackbox_launch(site, model, run, launch, level, len(values), _addr(words), _addr(dims), ref,
                                _GIL_AT)


def blackbox_done(ref: int) -> None:
    """The launch whose entry is at address `ref` (blackbox_launch) has returned."""
    _held.aotid_blackbox_done(ref, _GIL_AT)


def blackbox_fired(what: str, model: bytes, run: int, launch: int, level: int, site: int, values) -> None:
    """A check fired at launch R.K (site 0: outside a launch): the ring goes to a dump folder."""
    words, dims = box_words(values)
    _need().aotid_blackbox_fired(_utf8(what), model, run, launch, level, site or None, len(values), _addr(words),
                                 _addr(dims))


# ---------------------------------------------------------------- torch.compile's records

RECORD_KINDS = {"launch": 0, "launch-end": 1, "run": 2, "run-end": 3}


class _RunTexts(ctypes.c_char_p * 4):
    """A run's texts as the core keeps them (aotid_record_texts): this array
    is the first field of the core's object, which is freed with it."""

    def __del__(self):
        try:        # at interpreter exit the module may be half torn down: the process frees it
            if _held is not None:
                _held.aotid_record_texts_free(ctypes.addressof(self))
        except Exception:
            pass


def record_texts(dest: str, model: str, torch_version: str, facts: str = ""):
    """What write_record (and the launch extension) take as `texts`: a run's
    destination, model name, torch version and run-record facts, made once
    per run in the core, which keeps the destination and model name as the
    strings a record's functions take."""
    made = _need_held().aotid_record_texts(*[t.encode("utf-8", "backslashreplace")
                                             for t in (dest, model, torch_version, facts)])
    if not made:
        raise MemoryError("aotid_record_texts failed")
    return _RunTexts.from_address(made)


def write_record(kind: str, site: int, texts, run: int, launch: int, level: int, values, names=None,
                 mark: bool = False, stats: bool = False):
    """One record of torch.compile's wrapper, rendered by the C++ shim's own
    code and written in one call (aotid_write_record): `site` a blackbox_site
    handle for launches, `texts` from record_texts, `names` the labels of a
    run's values.  None, and nothing written, when a value is not one the core
    renders as format.py does (value_words' `exact`): the caller formats the
    record itself.  Else the values' statistics as the record computed them
    (level 5, `stats`): a ctypes array of aoti_debug::Stats, kind -1 where
    there are none; () without.  One array carries every number: each
    argument of a ctypes call costs more than the word it passes."""
    encoded = value_words(values, True)
    if encoded is None:
        return None
    words, dims = encoded
    n = len(values)
    head = array.array("q", [RECORD_KINDS[kind], run, launch, level, int(mark), n, 7 + len(words)] + words + dims)
    out = (_StatsC * n)() if stats and n else None
    labels = None
    if names is not None:
        labels = (ctypes.c_char_p * max(n, 1))(*[_utf8(names[k] if k < len(names) and names[k] else "-")
                                                 for k in range(n)])
    if _held.aotid_write_record(head.buffer_info()[0], site or None, texts, labels, out, _GIL_AT) != 0:
        raise RuntimeError("aotid_write_record failed")
    return out if out is not None else ()
