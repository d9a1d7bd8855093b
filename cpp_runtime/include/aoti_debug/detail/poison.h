// Memory check poison (docs/checks.md, "Memory check"): the pattern the
// guarding allocator (memcheck.h) fills new memory and guard regions with,
// and how the checks recognise it in a tensor.  No torch headers: the NaN
// check includes it in every artifact.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../config.h"
#include "dtypes.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// A quiet NaN as float32 and, twice over, as float64; each half is a NaN as
// float16 and bfloat16.  Written little-endian from each block's start.
constexpr uint32_t kPoisonWord = 0x7FF57FA5u;

inline uint8_t poison_byte(size_t offset_from_base) {
  return static_cast<uint8_t>(kPoisonWord >> (8 * (offset_from_base % 4)));
}

// Whether an element of a CPU tensor holds poison: as written, quieted by
// arithmetic, or converted between float32 and float64 / bfloat16 (sign and
// quiet bit ignored).  float16 and bfloat16 arithmetic goes through float32
// and gives torch's canonical NaN: their poison is recognised where it is read.
inline bool poison_bits(int32_t dtype, const void* p) {
  switch (dtype) {
    case 6: {  // float32
      uint32_t b;
      std::memcpy(&b, p, 4);
      b = (b & 0x7FFFFFFFu) | 0x00400000u;
      return b == kPoisonWord || b == 0x7FEBFD2Bu || b == 0x7FE50000u || b == 0x7FF50000u;
    }
    case 7: {  // float64
      uint64_t b;
      std::memcpy(&b, p, 8);
      b = (b & 0x7FFFFFFFFFFFFFFFull) | 0x0008000000000000ull;
      return b == 0x7FFD7FA57FF57FA5ull || b == 0x7FFEAFF4A0000000ull;
    }
    case 5: {  // float16
      uint16_t b;
      std::memcpy(&b, p, 2);
      b = static_cast<uint16_t>((b & 0x7FFF) | 0x0200);
      return b == 0x7FF5 || b == 0x7FA5 || b == 0x7FAB;
    }
    case 15: {  // bfloat16
      uint16_t b;
      std::memcpy(&b, p, 2);
      b = static_cast<uint16_t>((b & 0x7FFF) | 0x0040);
      return b == 0x7FF5 || b == 0x7FE5;
    }
    default:
      return false;
  }
}

inline bool poison_dtype(int32_t dtype) { return dtype == 5 || dtype == 6 || dtype == 7 || dtype == 15; }

// Poison elements of a CPU tensor (0 for other dtypes); *first: flat index of the first.
inline int64_t count_poison(const TensorView& v, int64_t* first) {
  *first = -1;
  if (v.device_type != 0 || v.data == nullptr || !poison_dtype(v.dtype)) return 0;
  const int64_t item = v.dtype == 7 ? 8 : v.dtype == 6 ? 4 : 2;
  int64_t numel = 1;
  for (int64_t d = 0; d < v.ndim; ++d) numel *= v.sizes[d];
  if (numel <= 0) return 0;
  std::vector<int64_t> idx(static_cast<size_t>(v.ndim), 0);
  int64_t count = 0;
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t off = 0;
    for (int64_t d = 0; d < v.ndim; ++d) off += idx[static_cast<size_t>(d)] * v.strides[d];
    if (poison_bits(v.dtype, static_cast<const char*>(v.data) + off * item)) {
      if (count++ == 0) *first = flat;
    }
    for (int64_t d = v.ndim - 1; d >= 0; --d) {  // row-major increment
      if (++idx[static_cast<size_t>(d)] < v.sizes[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return count;
}

// Whether the element at flat (row-major) index `flat` of a CPU tensor is poison.
inline bool poison_at(const TensorView& v, int64_t flat) {
  if (v.device_type != 0 || v.data == nullptr || !poison_dtype(v.dtype) || flat < 0) return false;
  int64_t off = 0;
  for (int64_t d = v.ndim - 1; d >= 0; --d) {
    const int64_t size = v.sizes[d] > 0 ? v.sizes[d] : 1;
    off += (flat % size) * v.strides[d];
    flat /= size;
  }
  const int64_t item = v.dtype == 7 ? 8 : v.dtype == 6 ? 4 : 2;
  return poison_bits(v.dtype, static_cast<const char*>(v.data) + off * item);
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
