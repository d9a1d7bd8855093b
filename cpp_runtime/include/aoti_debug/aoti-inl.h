// aoti.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  aoti.h includes it at its end wherever the bodies are compiled
// (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core object
// (src/core.cpp).
#pragma once

#include "aoti.h"

#if AOTI_DEBUG_DEVICE_OPS
#include "detail/device_ops.h"
#endif

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

#if AOTI_DEBUG_ENABLE_STATS || AOTI_DEBUG_ENABLE_DUMPS
// The handle tensor() kept, for the adapters below that call back into the shim.
inline AtenTensorHandle handle_of(const Value& v) {
  return const_cast<AtenTensorHandle>(static_cast<const AtenTensorOpaque*>(v.handle));
}
#endif

#if AOTI_DEBUG_ENABLE_STATS
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
#endif

#if AOTI_DEBUG_ENABLE_DUMPS || AOTI_DEBUG_ENABLE_STATS
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
#endif

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
