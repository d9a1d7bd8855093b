// The statistics floor of one model call (bench/bench_corpus.py): the
// runtime's own statistics core, with the content hash, as a level-5 record
// calls it (detail/format-inl.h: compute_stats(v, true)), once over every
// tensor the call's records describe.
//
//   stats_floor TENSORS RUNS
//
// TENSORS holds one tensor a line: "dtype ndim size... stride..." (dtype a
// c10::ScalarType code, sizes and strides in elements).  Each tensor gets a
// buffer of its own covering its strided span, filled with finite
// deterministic values.  Prints the median microseconds of one pass over all
// of them, then the tensors and the bytes one pass reads.
//
// Header-only (config.h's default): the core's bodies are compiled in here,
// as in any program that includes the runtime without AOTI_DEBUG_LINKED_CORE.
#include <aoti_debug/detail/stats.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ad = aoti_debug;
namespace adt = aoti_debug::detail;

namespace {

struct Tensor {
  int32_t dtype = 0;
  std::vector<int64_t> sizes, strides;
  std::vector<unsigned char> storage;
  const unsigned char* data = nullptr;  // the element at index 0 (negative strides: inside storage)
  int64_t numel = 0;
};

// Element i of a finite, deterministic pattern, as `size` bytes of dtype `code`.
void put(unsigned char* p, int32_t code, int64_t i) {
  const float f = static_cast<float>((i * 7919) % 2001 - 1000) / 64.0f;  // in [-15.7, 15.7]
  switch (code) {
    case adt::kFloat: std::memcpy(p, &f, 4); break;
    case adt::kDouble: { const double d = f; std::memcpy(p, &d, 8); break; }
    case adt::kComplexFloat: { const float c[2] = {f, -f / 2}; std::memcpy(p, c, 8); break; }
    case adt::kComplexDouble: { const double c[2] = {f, -f / 2}; std::memcpy(p, c, 16); break; }
    case adt::kBFloat16: { uint32_t b; std::memcpy(&b, &f, 4); const uint16_t h = b >> 16; std::memcpy(p, &h, 2); break; }
    case adt::kHalf: {  // sign, exponent 13..16 (0.25 to 4), any mantissa: finite
      const uint16_t h = static_cast<uint16_t>(((i & 1) << 15) | ((13 + (i >> 1) % 4) << 10) | ((i * 37) % 1024));
      std::memcpy(p, &h, 2);
      break;
    }
    case adt::kFloat8_e5m2: case adt::kFloat8_e4m3fn: case adt::kFloat8_e5m2fnuz:
    case adt::kFloat8_e4m3fnuz: case adt::kFloat8_e8m0fnu:
      *p = static_cast<unsigned char>((i * 37) & 0x37);  // exponent well below the all-ones code, no sign
      break;
    case adt::kBool: *p = static_cast<unsigned char>(i % 3 != 0); break;
    default: {  // integers: small values, any width
      const int64_t v = (i * 7919) % 251 - 125;
      const int size = adt::dtype_info(code) ? adt::dtype_info(code)->itemsize : 1;
      for (int b = 0; b < size; ++b) p[b] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * b));
    }
  }
}

bool load(Tensor& t) {
  const ad::detail::DtypeInfo* info = adt::dtype_info(t.dtype);
  if (info == nullptr || info->itemsize <= 0) return false;
  const int64_t size = info->itemsize;
  int64_t lo = 0, hi = 0;  // element offsets the view reaches, from its data pointer
  t.numel = 1;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    t.numel *= t.sizes[d];
    const int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  if (t.numel <= 0) return false;
  const int64_t span = hi - lo + 1;
  t.storage.assign(static_cast<size_t>(span * size), 0);
  for (int64_t i = 0; i < span; ++i) put(t.storage.data() + i * size, t.dtype, i);
  t.data = t.storage.data() + (-lo) * size;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TENSORS RUNS\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  const int runs = std::atoi(argv[2]);
  std::vector<Tensor> tensors;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    Tensor t;
    int64_t ndim;
    if (!(words >> t.dtype >> ndim)) continue;
    t.sizes.resize(ndim), t.strides.resize(ndim);
    for (auto& s : t.sizes) words >> s;
    for (auto& s : t.strides) words >> s;
    if (!words) return 3;
    if (load(t)) tensors.push_back(std::move(t));
  }
  std::vector<ad::TensorView> views;
  int64_t bytes = 0;
  for (const Tensor& t : tensors) {
    views.push_back(ad::TensorView{t.data, t.dtype, static_cast<int64_t>(t.sizes.size()), t.sizes.data(),
                                   t.strides.data(), 0, 0});
    bytes += t.numel * adt::dtype_info(t.dtype)->itemsize;
  }
  volatile uint64_t sink = 0;
  std::vector<double> times;
  for (int r = -runs / 10 - 1; r < runs; ++r) {  // the first tenth warms up
    const auto a = std::chrono::steady_clock::now();
    uint64_t h = 0;
    for (const ad::TensorView& v : views) h += ad::compute_stats(v, true).hash;
    const auto b = std::chrono::steady_clock::now();
    sink = sink + h;
    if (r >= 0) times.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  std::printf("%f %zu %lld\n", times.empty() ? 0.0 : times[times.size() / 2], views.size(),
              static_cast<long long>(bytes));
  return 0;
}
