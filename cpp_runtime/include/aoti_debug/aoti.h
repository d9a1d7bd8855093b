// Adapter from AOTI's stable C ABI (AtenTensorHandle) to the runtime, for
// the generated wrapper code.  See launch.h for the API it uses.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstring>
#include <vector>

#include "launch.h"

// Device statistics by libtorch's operators need the stable C API of the
// releases tested with it (2.13 on; aoti-inl.h then includes detail/device_ops.h);
// with an older torch a device tensor takes the copy path.
#if AOTI_DEBUG_ENABLE_STATS && AOTI_DEBUG_CORE_BODIES && __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
#define AOTI_DEBUG_DEVICE_OPS 1
#endif
#endif
#ifndef AOTI_DEBUG_DEVICE_OPS
#define AOTI_DEBUG_DEVICE_OPS 0
#endif

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

#if AOTI_DEBUG_ENABLE_STATS
// Statistics of device tensors (DeviceStatsFn): reduced on their device by
// libtorch's own operators, every figure of the call back in one small
// transfer (detail/device_ops.h); what those do not reduce (complex, uint64)
// or a failure there: a blocking copy into a contiguous CPU tensor through
// the shim, then the CPU core.  detail::device_stats and StatsMemo::prefetch
// ask first whether the run's stream is being captured.
AOTI_DEBUG_CORE_DECL void aoti_device_stats(const Value* const* vals, size_t n, Stats* out, bool* ok);
#endif

#if AOTI_DEBUG_ENABLE_DUMPS || AOTI_DEBUG_ENABLE_STATS
// A device tensor's storage span for a level-10 dump, or a scale's to count
// (DeviceReadFn): the span viewed as one row of elements from the view's
// first, copied into a CPU tensor through the shim (a blocking copy), then
// into `dst`.
AOTI_DEBUG_CORE_DECL bool aoti_device_read(const Value& v, void* dst, uint64_t bytes);
#endif

}  // namespace detail

// A tensor argument from an AtenTensorHandle (borrowed: keep the tensor alive
// while the Value is used).  A handle the shim cannot describe logs as None.
inline Value tensor(AtenTensorHandle h) {
  TensorView v{};
  void* data = nullptr;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  if (h == nullptr || aoti_torch_get_data_ptr(h, &data) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_dim(h, &v.ndim) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_sizes(h, &sizes) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_strides(h, &strides) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_dtype(h, &v.dtype) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_type(h, &v.device_type) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_index(h, &v.device_index) != AOTI_TORCH_SUCCESS)
    return Value();
  v.data = data;
  v.sizes = sizes;
  v.strides = strides;
  Value val(v);
  val.handle = h;
#if AOTI_DEBUG_ENABLE_STATS
  val.device_stats = &detail::aoti_device_stats;
#endif
#if AOTI_DEBUG_ENABLE_DUMPS || AOTI_DEBUG_ENABLE_STATS
  val.device_read = &detail::aoti_device_read;
#endif
  return val;
}

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "aoti-inl.h"
#endif
