// Tensor description shared by every part of the runtime, and what the
// runtime knows about each c10::ScalarType code (torch/headeronly/core/ScalarType.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.h"

AOTI_DEBUG_NAMESPACE_BEGIN

// A borrowed view of a tensor: everything the log needs, nothing that owns.
// `data` already includes the storage offset; sizes/strides are in elements
// and must stay valid while the view is used.
struct TensorView {
  const void* data;
  int32_t dtype;        // c10::ScalarType code
  int64_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
  int32_t device_type;  // c10::DeviceType code: 0 cpu, 1 cuda, ...
  int32_t device_index;
};

namespace detail {

// c10::ScalarType codes used by name in the runtime.
enum ScalarCode : int32_t {
  kByte = 0, kChar = 1, kShort = 2, kInt = 3, kLong = 4, kHalf = 5, kFloat = 6,
  kDouble = 7, kComplexHalf = 8, kComplexFloat = 9, kComplexDouble = 10,
  kBool = 11, kBFloat16 = 15, kFloat8_e5m2 = 23, kFloat8_e4m3fn = 24,
  kFloat8_e5m2fnuz = 25, kFloat8_e4m3fnuz = 26, kUInt16 = 27, kUInt32 = 28,
  kUInt64 = 29, kFloat8_e8m0fnu = 44, kFloat4_e2m1fn_x2 = 45,
};

struct DtypeInfo {
  const char* name;  // without the "torch." prefix
  int32_t itemsize;
};

// Indexed by code; holes (none today) have a null name.
inline const DtypeInfo* dtype_info(int32_t code) {
  static const DtypeInfo table[] = {
      {"uint8", 1},      {"int8", 1},          {"int16", 2},
      {"int32", 4},      {"int64", 8},         {"float16", 2},
      {"float32", 4},    {"float64", 8},       {"complex32", 4},
      {"complex64", 8},  {"complex128", 16},   {"bool", 1},
      {"qint8", 1},      {"quint8", 1},        {"qint32", 4},
      {"bfloat16", 2},   {"quint4x2", 1},      {"quint2x4", 1},
      {"bits1x8", 1},    {"bits2x4", 1},       {"bits4x2", 1},
      {"bits8", 1},      {"bits16", 2},        {"float8_e5m2", 1},
      {"float8_e4m3fn", 1}, {"float8_e5m2fnuz", 1}, {"float8_e4m3fnuz", 1},
      {"uint16", 2},     {"uint32", 4},        {"uint64", 8},
      {"uint1", 1},      {"uint2", 1},         {"uint3", 1},
      {"uint4", 1},      {"uint5", 1},         {"uint6", 1},
      {"uint7", 1},      {"int1", 1},          {"int2", 1},
      {"int3", 1},       {"int4", 1},          {"int5", 1},
      {"int6", 1},       {"int7", 1},          {"float8_e8m0fnu", 1},
      {"float4_e2m1fn_x2", 1},
  };
  if (code < 0 || code >= static_cast<int32_t>(sizeof(table) / sizeof(table[0]))) return nullptr;
  return &table[code];
}

inline const char* dtype_name(int32_t code) {
  const DtypeInfo* d = dtype_info(code);
  return d ? d->name : nullptr;
}

// Which statistics lines a dtype gets (log-format.md section 3).
enum StatsKind : int32_t {
  kStatsNone = 0,     // dtype without statistics
  kStatsFloat = 1,
  kStatsInt = 2,      // signed integers
  kStatsUInt = 3,     // unsigned integers
  kStatsBool = 4,
  kStatsComplex = 5,
};

inline int32_t stats_kind(int32_t code) {
  switch (code) {
    case kHalf: case kFloat: case kDouble: case kBFloat16: case kFloat8_e5m2:
    case kFloat8_e4m3fn: case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:
    case kFloat8_e8m0fnu: case kFloat4_e2m1fn_x2:
      return kStatsFloat;
    case kChar: case kShort: case kInt: case kLong:
      return kStatsInt;
    case kByte: case kUInt16: case kUInt32: case kUInt64:
      return kStatsUInt;
    case kBool:
      return kStatsBool;
    case kComplexFloat: case kComplexDouble:
      return kStatsComplex;
    default:
      return kStatsNone;
  }
}

// What each floating format can hold: its largest finite magnitude and its
// smallest normal magnitude (torch.finfo's max and smallest_normal; tests
// read this table against torch).  `narrow`: under 16 bits, where a value at
// max_finite is how a conversion that saturates hides an overflow, so the
// statistics count such values (sat_count, docs/log-format.md section 3).
struct FloatFacts {
  int32_t code;
  double max_finite;
  double smallest_normal;
  bool narrow;
};

inline const FloatFacts* float_facts(int32_t code) {
  static const FloatFacts table[] = {
      {kHalf, 65504.0, 6.103515625e-05, false},
      {kFloat, 3.4028234663852886e+38, 1.1754943508222875e-38, false},
      {kDouble, 1.7976931348623157e+308, 2.2250738585072014e-308, false},
      {kBFloat16, 3.3895313892515355e+38, 1.1754943508222875e-38, false},
      {kFloat8_e5m2, 57344.0, 6.103515625e-05, true},
      {kFloat8_e4m3fn, 448.0, 0.015625, true},
      {kFloat8_e5m2fnuz, 57344.0, 3.0517578125e-05, true},
      {kFloat8_e4m3fnuz, 240.0, 0.0078125, true},
      {kFloat8_e8m0fnu, 1.7014118346046923e+38, 5.877471754111438e-39, true},
      {kFloat4_e2m1fn_x2, 6.0, 1.0, true},  // of each of its two e2m1 values (e2m1_value)
  };
  for (const FloatFacts& f : table)
    if (f.code == code) return &f;
  return nullptr;
}

// Does this dtype's statistics block count saturated values (sat_count)?
// The narrow formats: the float8 kinds and float4_e2m1fn_x2.
inline bool counts_saturation(int32_t code) {
  switch (code) {
    case kFloat8_e5m2: case kFloat8_e4m3fn: case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:
    case kFloat8_e8m0fnu: case kFloat4_e2m1fn_x2:
      return true;
    default:
      return false;
  }
}

inline float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// IEEE binary16 -> float, exact.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24 is exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return float_from_bits(sign | 0x7f800000u | (mant << 13));
  return float_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline float bf16_to_float(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// The five float8 formats differ in bias and in how they spell NaN/Inf.
inline double float8_decode(uint8_t b, int32_t code) {
  const double nan = __builtin_nan("");
  const bool neg = (b & 0x80) != 0;
  int ebits, mbits, bias;
  switch (code) {
    case kFloat8_e5m2:
      ebits = 5, mbits = 2, bias = 15;
      if ((b & 0x7c) == 0x7c) return (b & 3) ? nan : (neg ? -__builtin_inf() : __builtin_inf());
      break;
    case kFloat8_e4m3fn:
      ebits = 4, mbits = 3, bias = 7;
      if ((b & 0x7f) == 0x7f) return nan;
      break;
    case kFloat8_e5m2fnuz:
      ebits = 5, mbits = 2, bias = 16;
      if (b == 0x80) return nan;
      break;
    case kFloat8_e4m3fnuz:
      ebits = 4, mbits = 3, bias = 8;
      if (b == 0x80) return nan;
      break;
    case kFloat8_e8m0fnu: {  // exponent only: 2^(b-127), 0xff is NaN
      if (b == 0xff) return nan;
      double v = 1.0;
      for (int e = b - 127; e > 0; --e) v *= 2.0;
      for (int e = b - 127; e < 0; ++e) v *= 0.5;
      return v;
    }
    default:
      return nan;
  }
  const int e = (b >> mbits) & ((1 << ebits) - 1);
  const int m = b & ((1 << mbits) - 1);
  // value = (e ? 1 + m/2^mbits : m/2^mbits) * 2^((e ? e : 1) - bias), exactly
  double v = e ? static_cast<double>((1 << mbits) + m) : static_cast<double>(m);
  for (int k = (e ? e : 1) - bias - mbits; k > 0; --k) v *= 2.0;
  for (int k = (e ? e : 1) - bias - mbits; k < 0; ++k) v *= 0.5;
  return neg ? -v : v;
}

// One e2m1 value (float4_e2m1fn_x2 holds two a byte): bit 3 the sign, bits
// 2-1 the exponent (bias 1), bit 0 the mantissa; no NaN, no Inf.  Exact:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.  torch packs the first
// logical value into the low nibble, the second into the high one
// (torch.testing._internal.common_quantized.pack_uint4).
inline double e2m1_value(uint8_t nibble) {
  static const double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double m = kMagnitude[nibble & 7];
  return (nibble & 8) ? -m : m;
}

// Logical values per stored element: two for float4_e2m1fn_x2, one otherwise.
// The statistics are over the values, the content hash over the bytes.
inline int64_t values_per_element(int32_t code) { return code == kFloat4_e2m1fn_x2 ? 2 : 1; }

struct Float8Tables {
  double t[5][256];
  Float8Tables() {
    const int32_t codes[5] = {kFloat8_e5m2, kFloat8_e4m3fn, kFloat8_e5m2fnuz, kFloat8_e4m3fnuz,
                              kFloat8_e8m0fnu};
    for (int k = 0; k < 5; ++k)
      for (int b = 0; b < 256; ++b) t[k][b] = float8_decode(static_cast<uint8_t>(b), codes[k]);
  }
};

// Decoding table for a float8 code, built once per process (thread-safe).
inline const double* float8_table(int32_t code) {
  static const Float8Tables tables;
  switch (code) {
    case kFloat8_e5m2: return tables.t[0];
    case kFloat8_e4m3fn: return tables.t[1];
    case kFloat8_e5m2fnuz: return tables.t[2];
    case kFloat8_e4m3fnuz: return tables.t[3];
    default: return tables.t[4];
  }
}

inline int64_t numel_of(const TensorView& v) {
  int64_t n = 1;
  for (int64_t d = 0; d < v.ndim; ++d) n *= v.sizes[d];
  return n;
}

// PyTorch's rule: row-major strides, dimensions of size 1 ignored; empty is contiguous.
inline bool is_contiguous(const TensorView& v) {
  if (numel_of(v) == 0) return true;
  int64_t expected = 1;
  for (int64_t d = v.ndim - 1; d >= 0; --d) {
    if (v.sizes[d] == 1) continue;
    if (v.strides[d] != expected) return false;
    expected *= v.sizes[d];
  }
  return true;
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
