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

// The scalars of tensors' statistics, gathered on their device as int64
// words (a double by its bits) and copied to the host at once.
class Words {
 public:
  void add_int(const Tensor& t) { parts_.push_back(as(t, ScalarType::Long)); }
  void add_double(const Tensor& t) { parts_.push_back(bits(as(t, ScalarType::Double), ScalarType::Long)); }
  size_t size() const { return parts_.size(); }
  void drop_from(size_t k) { parts_.resize(k); }   // a tensor whose ops failed part way
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

// Where one tensor's figures sit among a fetch's words.
struct Planned {
  size_t first = 0;
  int64_t numel = 0;
  int32_t dtype = 0;
  int32_t kind = 0;
};

// Queues the reductions of the section-3 statistics of `t` (any device, any
// strides) onto `words`.  False for what it does not reduce (complex, 64-bit
// unsigned, float4_e2m1fn_x2, an empty tensor, a dtype without statistics): the
// caller decides (aoti-inl.h: a copy to the host and the core, which decodes
// float4's packed values; torch converts float4 to no other dtype).
inline bool plan(AtenTensorHandle handle, const TensorView& v, Words* words, Planned* p) {
  const int32_t kind = stats_kind(v.dtype);
  if (kind == kStatsNone || kind == kStatsComplex || v.dtype == kUInt64 || v.dtype == kFloat4_e2m1fn_x2)
    return false;
  AtenTensorHandle own = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(handle, &own));
  const Tensor t(own);
  const int64_t numel = t.numel();
  if (numel <= 0) return false;
  *p = Planned{words->size(), numel, v.dtype, kind};
  Tensor flat = torch::stable::reshape(t, {-1});
  hash_sums(flat, words);
  if (kind == kStatsBool) {
    words->add_int(total(flat, ScalarType::Long));
  } else if (kind == kStatsInt || kind == kStatsUInt) {
    // UInt16 and UInt32 lack the reductions: widened (exactly)
    Tensor wide = (v.dtype == kUInt16 || v.dtype == kUInt32) ? as(flat, ScalarType::Long) : flat;
    words->add_int(unary("aten::min", wide));
    words->add_int(unary("aten::max", wide));
    words->add_double(total(wide, ScalarType::Double));
  } else {   // floating; float8 kinds widened (exactly) for the reductions they lack
    Tensor values = dtype_info(v.dtype)->itemsize == 1 ? as(flat, ScalarType::Float) : flat;
    Tensor nan = unary("aten::isnan", values), inf = unary("aten::isinf", values);
    words->add_int(total(nan, ScalarType::Long));
    words->add_int(total(inf, ScalarType::Long));
    words->add_int(first_true(nan));
    words->add_int(first_true(inf));
    words->add_double(unary("aten::min", nan_to(values, __builtin_inf())));
    words->add_double(unary("aten::max", nan_to(values, -__builtin_inf())));
    words->add_double(total(nan_to(values, 0.0), ScalarType::Double));
    if (counts_saturation(v.dtype)) {   // sat_count: |x| at the format's largest finite value
      Tensor lim = torch::stable::new_zeros(values, {1}, ScalarType::Float);
      torch::stable::fill_(lim, float_facts(v.dtype)->max_finite);
      Tensor at = binary("aten::eq", unary("aten::abs", values), lim);
      words->add_int(total(at, ScalarType::Long));
      words->add_int(first_true(at));
    }
  }
  return true;
}

// The Stats of a planned tensor from the fetched words.
inline Stats finish(const Planned& p, const int64_t* got) {
  Stats s;
  std::memset(&s, 0, sizeof(s));
  s.dtype = p.dtype, s.kind = p.kind, s.numel = p.numel;
  s.first_nan = s.first_inf = s.first_sat = -1;
  s.min = s.max = s.mean = __builtin_nan("");
  s.hash = hash_finish(static_cast<uint64_t>(got[0]) + static_cast<uint64_t>(got[1]), p.numel,
                       dtype_info(p.dtype)->itemsize);
  s.hashed = 1;
  got += 2;
  if (p.kind == kStatsBool) {
    s.true_count = got[0], s.false_count = p.numel - got[0];
  } else if (p.kind == kStatsInt || p.kind == kStatsUInt) {
    s.imin = got[0], s.imax = got[1];
    s.umin = static_cast<uint64_t>(got[0]), s.umax = static_cast<uint64_t>(got[1]);
    s.mean = from_bits(got[2]) / static_cast<double>(p.numel);
  } else {
    s.nan_count = got[0], s.inf_count = got[1];
    s.first_nan = got[0] > 0 ? got[2] : -1;
    s.first_inf = got[1] > 0 ? got[3] : -1;
    if (s.nan_count < p.numel) {
      s.min = from_bits(got[4]), s.max = from_bits(got[5]);
      s.mean = from_bits(got[6]) / static_cast<double>(p.numel - s.nan_count);
    }
    if (counts_saturation(p.dtype)) s.sat_count = got[7], s.first_sat = got[7] > 0 ? got[8] : -1;
  }
  return s;
}

// The statistics of `n` tensors: those on one device reduced there and
// brought back in one transfer (a fetch per device among them).  ok[i] false:
// left to the caller (what plan() refuses, an op a device lacks, a failed fetch).
inline void reduce_many(const AtenTensorHandle* handles, const TensorView* const* views, size_t n, Stats* out,
                        bool* ok) {
  std::vector<uint8_t> seen(n, 0);
  std::vector<Planned> planned(n);
  for (size_t first = 0; first < n; ++first) {
    if (seen[first]) continue;
    const int32_t type = views[first]->device_type, index = views[first]->device_index;
    Words words;
    std::vector<size_t> group;
    for (size_t i = first; i < n; ++i) {
      if (seen[i] || views[i]->device_type != type || views[i]->device_index != index) continue;
      seen[i] = 1;
      ok[i] = false;
      const size_t mark = words.size();
      try {
        if (plan(handles[i], *views[i], &words, &planned[i])) group.push_back(i);
      } catch (...) {   // an op the device lacks for this dtype
        words.drop_from(mark);
      }
    }
    if (group.empty()) continue;
    std::vector<int64_t> got;
    try {
      got = words.fetch();   // the one transfer of this device's tensors
    } catch (...) {
      continue;
    }
    for (size_t i : group) out[i] = finish(planned[i], got.data() + planned[i].first), ok[i] = true;
  }
}

// One tensor's (the tests' entry): false when left to the caller.
inline bool reduce(AtenTensorHandle handle, const TensorView& v, Stats* out) {
  const TensorView* view = &v;
  bool ok = false;
  reduce_many(&handle, &view, 1, out, &ok);
  return ok;
}

}  // namespace device_ops
}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
