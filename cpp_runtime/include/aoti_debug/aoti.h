// Adapter from AOTI's stable C ABI (AtenTensorHandle) to the runtime, for
// the generated wrapper code.  See launch.h for the API it uses.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstring>
#include <vector>

#include "launch.h"

// Device statistics by libtorch's operators need the stable C API of the
// releases tested with it (2.13 on); with an older torch a device tensor
// takes the copy path.
#if AOTI_DEBUG_ENABLE_STATS && AOTI_DEBUG_CORE_BODIES && __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
#define AOTI_DEBUG_DEVICE_OPS 1
#include "detail/device_ops.h"
#endif
#endif
#ifndef AOTI_DEBUG_DEVICE_OPS
#define AOTI_DEBUG_DEVICE_OPS 0
#endif

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

#if (AOTI_DEBUG_ENABLE_STATS || AOTI_DEBUG_ENABLE_DUMPS) && AOTI_DEBUG_CORE_BODIES
// The handle tensor() kept, for the adapters below that call back into the shim.
inline AtenTensorHandle handle_of(const Value& v) {
  return const_cast<AtenTensorHandle>(static_cast<const AtenTensorOpaque*>(v.handle));
}
#endif

#if AOTI_DEBUG_ENABLE_STATS
// Statistics of device tensors (DeviceStatsFn): reduced on their device by
// libtorch's own operators, every figure of the call back in one small
// transfer (detail/device_ops.h); what those do not reduce (complex, uint64)
// or a failure there: a blocking copy into a contiguous CPU tensor through
// the shim, then the CPU core.  detail::device_stats and StatsMemo::prefetch
// ask first whether the run's stream is being captured.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void aoti_device_stats(const Value* const* vals, size_t n, Stats* out, bool* ok);
#else
// One tensor by a copy to the host.
inline bool copied_stats(const Value& v, Stats* out) {
  AtenTensorHandle src = handle_of(v);
  if (src == nullptr) return false;
  std::vector<int64_t> strides(static_cast<size_t>(v.t.ndim));
  int64_t step = 1;
  for (int64_t d = v.t.ndim - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = step;
    step *= v.t.sizes[d] > 1 ? v.t.sizes[d] : 1;
  }
  AtenTensorHandle host = nullptr;
  if (aoti_torch_empty_strided(v.t.ndim, v.t.sizes, strides.data(), v.t.dtype,
                               aoti_torch_device_type_cpu(), 0, &host) != AOTI_TORCH_SUCCESS)
    return false;
  bool ok = aoti_torch_copy_(host, src, 0) == AOTI_TORCH_SUCCESS;
  void* data = nullptr;
  ok = ok && aoti_torch_get_data_ptr(host, &data) == AOTI_TORCH_SUCCESS;
  if (ok) {
    TensorView h = v.t;
    h.data = data;
    h.strides = strides.data();
    h.device_type = 0, h.device_index = -1;
    *out = compute_stats(h, true);
  }
  aoti_torch_delete_tensor_object(host);
  return ok;
}

AOTI_DEBUG_CORE_FN void aoti_device_stats(const Value* const* vals, size_t n, Stats* out, bool* ok) {
  for (size_t i = 0; i < n; ++i) ok[i] = false;
#if AOTI_DEBUG_DEVICE_OPS
  std::vector<AtenTensorHandle> handles(n);
  std::vector<const TensorView*> views(n);
  for (size_t i = 0; i < n; ++i) handles[i] = handle_of(*vals[i]), views[i] = &vals[i]->t;
  device_ops::reduce_many(handles.data(), views.data(), n, out, ok);
#endif
  for (size_t i = 0; i < n; ++i)
    if (!ok[i]) ok[i] = copied_stats(*vals[i], &out[i]);
}
#endif  // AOTI_DEBUG_CORE_BODIES
#endif

#if AOTI_DEBUG_ENABLE_DUMPS
// A device tensor's storage span for a level-10 dump (DeviceReadFn): the
// span viewed as one row of elements from the view's first, copied into a
// CPU tensor through the shim (a blocking copy), then into `dst`.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN bool aoti_device_read(const Value& v, void* dst, uint64_t bytes);
#else
AOTI_DEBUG_CORE_FN bool aoti_device_read(const Value& v, void* dst, uint64_t bytes) {
  AtenTensorHandle src = handle_of(v);
  const DtypeInfo* info = dtype_info(v.t.dtype);
  if (src == nullptr || info == nullptr || bytes % static_cast<uint64_t>(info->itemsize) != 0) return false;
  const int64_t span = static_cast<int64_t>(bytes / static_cast<uint64_t>(info->itemsize)), one = 1;
  AtenTensorHandle row = nullptr, host = nullptr;
  bool ok = aoti_torch__reinterpret_tensor(src, 1, &span, &one, 0, &row) == AOTI_TORCH_SUCCESS &&
            aoti_torch_empty_strided(1, &span, &one, v.t.dtype, aoti_torch_device_type_cpu(), 0, &host) ==
                AOTI_TORCH_SUCCESS &&
            aoti_torch_copy_(host, row, 0) == AOTI_TORCH_SUCCESS;
  void* data = nullptr;
  ok = ok && aoti_torch_get_data_ptr(host, &data) == AOTI_TORCH_SUCCESS && data != nullptr;
  if (ok) std::memcpy(dst, data, static_cast<size_t>(bytes));
  if (row != nullptr) aoti_torch_delete_tensor_object(row);
  if (host != nullptr) aoti_torch_delete_tensor_object(host);
  return ok;
}
#endif  // AOTI_DEBUG_CORE_BODIES
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
#if AOTI_DEBUG_ENABLE_DUMPS
  val.device_read = &detail::aoti_device_read;
#endif
  return val;
}

AOTI_DEBUG_NAMESPACE_END
