// Adapter from at::Tensor, for hand-written C++ ops built against libtorch:
//   #include <aoti_debug/torch.h>
//   at::Tensor my_gelu(const at::Tensor& x) {
//     AOTI_DEBUG_SCOPE(scope, "mylib::gelu", aoti_debug::tensor(x));
//     at::Tensor y = ...;
//     AOTI_DEBUG_SCOPE_RETURN(scope, aoti_debug::tensor(y));
//     return y;
//   }
#pragma once

#include <ATen/core/Tensor.h>

#include <cstring>

#include "aoti_debug.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

#if AOTI_DEBUG_ENABLE_STATS
// One blocking copy to the host per tensor, then the CPU core.
inline void torch_device_stats(const Value* const* vals, size_t n, Stats* out, bool* ok) {
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor* t = static_cast<const at::Tensor*>(vals[i]->handle);
    ok[i] = t != nullptr;
    if (!ok[i]) continue;
    const at::Tensor host = t->detach().to(at::kCPU).contiguous();
    TensorView h = vals[i]->t;
    h.data = host.data_ptr();
    h.strides = host.strides().data();
    h.device_type = 0, h.device_index = -1;
    out[i] = compute_stats(h, true);
  }
}
#endif

#if AOTI_DEBUG_ENABLE_DUMPS
// The storage span of a device tensor's view, copied to the host (DeviceReadFn).
inline bool torch_device_read(const Value& v, void* dst, uint64_t bytes) {
  const at::Tensor* t = static_cast<const at::Tensor*>(v.handle);
  const int64_t itemsize = static_cast<int64_t>(t ? t->element_size() : 0);
  if (t == nullptr || itemsize == 0 || bytes % static_cast<uint64_t>(itemsize) != 0) return false;
  const int64_t span = static_cast<int64_t>(bytes) / itemsize;
  const at::Tensor host = t->detach().as_strided({span}, {1}, t->storage_offset()).to(at::kCPU).contiguous();
  std::memcpy(dst, host.data_ptr(), static_cast<size_t>(bytes));
  return true;
}
#endif

}  // namespace detail

// A tensor argument (borrowed: `t` must outlive the Value); undefined: None.
inline Value tensor(const at::Tensor& t) {
  if (!t.defined()) return Value();
  TensorView v{};
  v.data = t.has_storage() ? t.data_ptr() : nullptr;
  v.dtype = static_cast<int32_t>(t.scalar_type());
  v.ndim = t.dim();
  v.sizes = t.sizes().data();
  v.strides = t.strides().data();
  v.device_type = static_cast<int32_t>(t.device().type());
  v.device_index = t.device().has_index() ? t.device().index() : -1;
  Value val(v);
  val.b = t.requires_grad();
  val.handle = &t;
#if AOTI_DEBUG_ENABLE_STATS
  val.device_stats = &detail::torch_device_stats;
#endif
#if AOTI_DEBUG_ENABLE_DUMPS
  val.device_read = &detail::torch_device_read;
#endif
  return val;
}

AOTI_DEBUG_NAMESPACE_END
