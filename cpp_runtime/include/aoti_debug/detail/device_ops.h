// Statistics of a tensor on any device, reduced by libtorch's own operators
// on that device through torch's stable C API (the dispatcher), and brought
// back to the host in one small transfer: never a copy of the tensor.  The
// same definitions as torch.compile's runtime (aoti_debug/runtime/stats.py,
// compute_with_torch), op for op.  Nothing here knows CUDA: on a CPU tensor it
// runs the same ops, which is how the tests run it (tests/test_native_aoti.py).
// Included by aoti.h where the runtime's bodies are compiled.
#pragma once

// torch's headers, not ours: their warnings are not ours to fail on (-Werror)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/stableivalue_conversions.h>
#include <torch/csrc/stable/tensor.h>
#pragma GCC diagnostic pop

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "dtypes.h"
#include "stats.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {
namespace device_ops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using torch::stable::detail::from;

template <size_t N>
inline Tensor call(const char* op, const char* overload, std::array<StableIValue, N> stack) {
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_10_0
  STABLE_TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(op, overload, stack.data(), TORCH_ABI_VERSION));
#else
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_call_dispatcher(op, overload, stack.data()));
#endif
  return torch::stable::detail::to<Tensor>(stack[0]);
}

inline Tensor unary(const char* op, const Tensor& t) { return call<1>(op, "", {from(t)}); }
inline Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  return call<2>(op, "Tensor", {from(a), from(b)});
}
// sum of every element, accumulated (and returned) as `dtype`
inline Tensor total(const Tensor& t, ScalarType dtype) {
  return call<2>("aten::sum", "", {from(t), from(std::optional<ScalarType>(dtype))});
}
inline Tensor as(const Tensor& t, ScalarType dtype) { return torch::stable::to(t, dtype); }
inline Tensor bits(const Tensor& t, ScalarType dtype) {   // the same bytes read as `dtype`
  return call<2>("aten::view", "dtype", {from(t), from(dtype)});
}
// NaN replaced by `nan`, infinities kept
inline Tensor nan_to(const Tensor& t, double nan) {
  const double inf = __builtin_inf();
  return call<4>("aten::nan_to_num", "", {from(t), from(std::optional<double>(nan)),
                                            from(std::optional<double>(inf)), from(std::optional<double>(-inf))});
}
inline Tensor first_true(const Tensor& flags) {            // index of the first true (0 when none)
  return call<3>("aten::argmax", "", {from(as(flags, ScalarType::Byte)), from(std::nullopt), from(false)});
}

// The scalars of one tensor's statistics, gathered on its device as int64
// words (a double by its bits) and copied to the host at once.
class Words {
 public:
  void add_int(const Tensor& t) { parts_.push_back(as(t, ScalarType::Long)); }
  void add_double(const Tensor& t) { parts_.push_back(bits(as(t, ScalarType::Double), ScalarType::Long)); }
  std::vector<int64_t> fetch() const {
    Tensor all = call<2>("aten::stack", "", {from(parts_), from(int64_t{0})});
    Tensor host = torch::stable::to(all, torch::stable::Device(torch::headeronly::DeviceType::CPU));
    std::vector<int64_t> out(parts_.size());
    void* data = nullptr;
    STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_data_ptr(host.get(), &data));
    std::memcpy(out.data(), data, out.size() * sizeof(int64_t));
    return out;
  }

 private:
  std::vector<Tensor> parts_;
};

inline double from_bits(int64_t w) {
  double d;
  std::memcpy(&d, &w, sizeof d);
  return d;
}

// The content hash's sum over the tensor's 8-byte words (section 3.1), as
// two int64 sums whose total modulo 2**64 is the definition's.
inline void hash_sums(const Tensor& flat, Words* words) {
  Tensor raw = bits(torch::stable::contiguous(flat), ScalarType::Byte);
  const int64_t pad = (8 - raw.numel() % 8) % 8;
  if (pad != 0) raw = torch::stable::pad(raw, {0, pad});
  Tensor w = bits(raw, ScalarType::Long);
  // the hash's constants made on the tensor's device (no copy to it), each
  // from doubles that hold it exactly: KEY's high and low halves, 32, the low 32 bits
  Tensor consts = torch::stable::new_zeros(w, {4}, ScalarType::Long);
  const double halves[4] = {static_cast<double>(kHashKey >> 32), static_cast<double>(kHashKey & 0xFFFFFFFFu),
                            32.0, 4294967295.0};
  for (int64_t k = 0; k < 4; ++k) torch::stable::fill_(torch::stable::select(consts, 0, k), halves[k]);
  Tensor shift = torch::stable::select(consts, 0, 2), low = torch::stable::select(consts, 0, 3);
  Tensor key = binary("aten::bitwise_or",
                      binary("aten::bitwise_left_shift", torch::stable::select(consts, 0, 0), shift),
                      torch::stable::select(consts, 0, 1));
  Tensor index = call<3>("aten::cumsum", "", {from(call<6>("aten::ones_like", "",
                                                             {from(w), from(std::nullopt), from(std::nullopt),
                                                              from(std::nullopt), from(std::nullopt),
                                                              from(std::nullopt)})),
                                               from(int64_t{0}), from(std::optional<ScalarType>(ScalarType::Long))});
  Tensor x = binary("aten::bitwise_xor", w, binary("aten::mul", index, key));
  Tensor lo = binary("aten::bitwise_and", x, low);
  Tensor hi = binary("aten::bitwise_and", binary("aten::bitwise_right_shift", x, shift), low);
  words->add_int(total(binary("aten::mul", lo, hi), ScalarType::Long));
  words->add_int(total(x, ScalarType::Long));
}

// Section-3 statistics of `t` (any device, any strides) by its device's own
// operators.  Returns false for what it does not reduce (complex, 64-bit
// unsigned, an empty tensor, a dtype without statistics): the caller decides.
inline bool reduce(AtenTensorHandle handle, const TensorView& v, Stats* out) {
  const int32_t kind = stats_kind(v.dtype);
  if (kind == kStatsNone || kind == kStatsComplex || v.dtype == kUInt64) return false;
  AtenTensorHandle own = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(handle, &own));
  const Tensor t(own);
  const int64_t numel = t.numel();
  if (numel <= 0) return false;
  Tensor flat = torch::stable::reshape(t, {-1});
  Words words;
  hash_sums(flat, &words);
  if (kind == kStatsBool) {
    words.add_int(total(flat, ScalarType::Long));
  } else if (kind == kStatsInt || kind == kStatsUInt) {
    // UInt16 and UInt32 lack the reductions: widened (exactly)
    Tensor wide = (v.dtype == kUInt16 || v.dtype == kUInt32) ? as(flat, ScalarType::Long) : flat;
    words.add_int(unary("aten::min", wide));
    words.add_int(unary("aten::max", wide));
    words.add_double(total(wide, ScalarType::Double));
  } else {   // floating; float8 kinds widened (exactly) for the reductions they lack
    Tensor values = dtype_info(v.dtype)->itemsize == 1 ? as(flat, ScalarType::Float) : flat;
    Tensor nan = unary("aten::isnan", values), inf = unary("aten::isinf", values);
    words.add_int(total(nan, ScalarType::Long));
    words.add_int(total(inf, ScalarType::Long));
    words.add_int(first_true(nan));
    words.add_int(first_true(inf));
    words.add_double(unary("aten::min", nan_to(values, __builtin_inf())));
    words.add_double(unary("aten::max", nan_to(values, -__builtin_inf())));
    words.add_double(total(nan_to(values, 0.0), ScalarType::Double));
  }
  const std::vector<int64_t> got = words.fetch();   // the one transfer
  Stats s;
  std::memset(&s, 0, sizeof(s));
  s.dtype = v.dtype, s.kind = kind, s.numel = numel;
  s.first_nan = s.first_inf = -1;
  s.min = s.max = s.mean = __builtin_nan("");
  s.hash = hash_finish(static_cast<uint64_t>(got[0]) + static_cast<uint64_t>(got[1]), numel,
                       dtype_info(v.dtype)->itemsize);
  s.hashed = 1;
  if (kind == kStatsBool) {
    s.true_count = got[2], s.false_count = numel - got[2];
  } else if (kind == kStatsInt || kind == kStatsUInt) {
    s.imin = got[2], s.imax = got[3];
    s.umin = static_cast<uint64_t>(got[2]), s.umax = static_cast<uint64_t>(got[3]);
    s.mean = from_bits(got[4]) / static_cast<double>(numel);
  } else {
    s.nan_count = got[2], s.inf_count = got[3];
    s.first_nan = got[2] > 0 ? got[4] : -1;
    s.first_inf = got[3] > 0 ? got[5] : -1;
    if (s.nan_count < numel) {
      s.min = from_bits(got[6]), s.max = from_bits(got[7]);
      s.mean = from_bits(got[8]) / static_cast<double>(numel - s.nan_count);
    }
  }
  *out = s;
  return true;
}

}  // namespace device_ops
}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
