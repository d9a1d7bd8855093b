// Size expressions of the input guard (strides, derived sizes, relations
// export recorded), evaluated without undefined behaviour.
//
// The guard runs on inputs that may be anything, so an expression the
// compile knew to be safe over its ranges (Mod(1, width//16) for width >= 32)
// can divide by zero or overflow on the sizes given.  Each value carries
// `ok`; a division or modulo by zero or an int64 overflow anywhere below makes
// it false, and the guard reports the inputs as outside what the artifact was
// compiled for instead of trapping.  Division and modulo follow Python (and
// sympy's FloorDiv, PythonMod): they floor, and a remainder has the divisor's sign.
#pragma once

#include <cstdint>

#include "../config.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {
namespace sizeexpr {

struct Int {
  int64_t v;
  bool ok;
};

struct Bool {
  bool v;
  bool ok;
};

constexpr Int undefined() { return {0, false}; }

inline Int k(int64_t v) { return {v, true}; }

inline Int add(Int a, Int b) {
  if (!a.ok || !b.ok) return undefined();
  if ((b.v > 0 && a.v > INT64_MAX - b.v) || (b.v < 0 && a.v < INT64_MIN - b.v)) return undefined();
  return {a.v + b.v, true};
}

inline Int mul(Int a, Int b) {
  if (!a.ok || !b.ok) return undefined();
  const int64_t x = a.v, y = b.v;
  if (x == 0 || y == 0) return {0, true};
  const bool over = x > 0 ? (y > 0 ? x > INT64_MAX / y : y < INT64_MIN / x)
                          : (y > 0 ? x < INT64_MIN / y : y < INT64_MAX / x);
  if (over) return undefined();
  return {x * y, true};
}

inline Int floordiv(Int a, Int b) {
  if (!a.ok || !b.ok || b.v == 0 || (a.v == INT64_MIN && b.v == -1)) return undefined();
  int64_t q = a.v / b.v;
  if (a.v % b.v != 0 && ((a.v < 0) != (b.v < 0))) --q;
  return {q, true};
}

inline Int mod(Int a, Int b) {
  if (!a.ok || !b.ok || b.v == 0) return undefined();
  if (b.v == -1) return {0, true};
  int64_t r = a.v % b.v;
  if (r != 0 && ((r < 0) != (b.v < 0))) r += b.v;
  return {r, true};
}

inline Int ceildiv(Int a, Int b) {
  Int q = floordiv(mul(a, k(-1)), b);
  return mul(q, k(-1));
}

inline Int max(Int a, Int b) { return (!a.ok || !b.ok) ? undefined() : Int{a.v > b.v ? a.v : b.v, true}; }
inline Int min(Int a, Int b) { return (!a.ok || !b.ok) ? undefined() : Int{a.v < b.v ? a.v : b.v, true}; }

// A non-negative integer power.
inline Int pow(Int a, int64_t n) {
  Int r = k(1);
  for (int64_t i = 0; i < n && r.ok; ++i) r = mul(r, a);
  return r;
}

inline Bool known(bool v) { return {v, true}; }
inline Bool eq(Int a, Int b) { return {a.v == b.v, a.ok && b.ok}; }
inline Bool ne(Int a, Int b) { return {a.v != b.v, a.ok && b.ok}; }
inline Bool lt(Int a, Int b) { return {a.v < b.v, a.ok && b.ok}; }
inline Bool le(Int a, Int b) { return {a.v <= b.v, a.ok && b.ok}; }

// A false operand decides a conjunction even when the other is undefined.
inline Bool all(Bool a, Bool b) {
  if ((a.ok && !a.v) || (b.ok && !b.v)) return {false, true};
  return {true, a.ok && b.ok};
}
inline Bool any(Bool a, Bool b) {
  if ((a.ok && a.v) || (b.ok && b.v)) return {true, true};
  return {false, a.ok && b.ok};
}
inline Bool negate(Bool a) { return {!a.v, a.ok}; }

}  // namespace sizeexpr
}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
