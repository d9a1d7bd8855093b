// Number formatting of docs/log-format.md section 2.
//
// Floats: nan / inf / -inf; '%.6f' when x == 0 or 1e-4 <= |x| < 1e16, else
// '%.6e' -- exactly Python's `'%.6f' % x` / `'%.6e' % x` (both round the exact
// binary value half-to-even).  '%.6f' is computed here exactly (format_fixed6);
// '%.6e' is snprintf's.  Integers: full decimal.  The integer writers
// are async-signal-safe (the crash trailer uses them); the float writer is not.
#pragma once

#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "../config.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// Writes the decimal form of v into buf (>= 21 bytes); returns the length.
inline int format_u64(uint64_t v, char* buf) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

inline int format_i64(int64_t v, char* buf) {
  if (v >= 0) return format_u64(static_cast<uint64_t>(v), buf);
  buf[0] = '-';
  // Negate in unsigned arithmetic so INT64_MIN works.
  return 1 + format_u64(0 - static_cast<uint64_t>(v), buf + 1);
}

#if defined(__SIZEOF_INT128__)
// '%.6f' of a finite x with |x| < 1e16 (the fixed range): x = m * 2^e
// exactly (m < 2^53), so x * 10^6 = m * 10^6 * 2^e is an
// integer shifted right by -e bits, rounded half-to-even on the exact value
// in 128-bit arithmetic -- printf's answer without printf's cost (the
// statistics lines hold three of these per tensor).
inline int format_fixed6(double x, char* buf) {
  int n = 0;
  if (std::signbit(x)) buf[n++] = '-';
  int e = 0;
  const double frac = std::frexp(std::fabs(x), &e);  // |x| = frac * 2^e, frac in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(frac, 53));  // exact: 53 bits
  e -= 53;                                                         // |x| = m * 2^e
  unsigned __int128 q = static_cast<unsigned __int128>(m) * 1000000u;
  if (e >= 0) {
    q <<= e;  // |x| < 1e16 < 2^54: e <= 1, q < 2^75
  } else if (e > -128) {
    const int s = -e;
    const unsigned __int128 rem = q & ((static_cast<unsigned __int128>(1) << s) - 1);
    const unsigned __int128 half = static_cast<unsigned __int128>(1) << (s - 1);
    q >>= s;
    if (rem > half || (rem == half && (q & 1))) ++q;
  } else {
    q = 0;  // below 2^-75: rounds to 0.000000 (only x == 0 gets here)
  }
  const uint64_t whole = static_cast<uint64_t>(q / 1000000u);
  uint32_t micro = static_cast<uint32_t>(q % 1000000u);
  n += format_u64(whole, buf + n);
  buf[n++] = '.';
  for (int k = 5; k >= 0; --k, micro /= 10) buf[n + k] = static_cast<char>('0' + micro % 10);
  n += 6;
  buf[n] = '\0';
  return n;
}
#endif

// Writes the section-2 form of x into buf (>= 48 bytes); returns the length.
inline int format_double(double x, char* buf) {
  if (std::isnan(x)) {
    std::memcpy(buf, "nan", 4);
    return 3;
  }
  if (std::isinf(x)) {
    if (x > 0) {
      std::memcpy(buf, "inf", 4);
      return 3;
    }
    std::memcpy(buf, "-inf", 5);
    return 4;
  }
  const double a = std::fabs(x);
  const bool fixed = x == 0 || (a >= 1e-4 && a < 1e16);
#if defined(__SIZEOF_INT128__)
  if (fixed) return format_fixed6(x, buf);
#endif
  int n = std::snprintf(buf, 48, fixed ? "%.6f" : "%.6e", x);
  if (n < 0) n = 0;
  if (n > 47) n = 47;
  // A host program may have switched LC_NUMERIC; the log always uses '.'.
  const char* dp = std::localeconv()->decimal_point;
  if (dp != nullptr && !(dp[0] == '.' && dp[1] == '\0')) {
    const size_t dl = std::strlen(dp);
    for (int i = 0; i + static_cast<int>(dl) <= n; ++i) {
      if (std::memcmp(buf + i, dp, dl) == 0) {
        buf[i] = '.';
        std::memmove(buf + i + 1, buf + i + dl, static_cast<size_t>(n) - i - dl + 1);
        n -= static_cast<int>(dl) - 1;
        break;
      }
    }
  }
  return n;
}

inline void append_u64(std::string& out, uint64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(format_u64(v, b)));
}

inline void append_i64(std::string& out, int64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(format_i64(v, b)));
}

// prefix, then v's low `digits` hex digits (lowercase, zero-padded)
inline void append_hex(std::string& out, const char* prefix, uint64_t v, int digits) {
  static const char hex[] = "0123456789abcdef";
  out += prefix;
  for (int i = digits - 1; i >= 0; --i) out += hex[(v >> (4 * i)) & 0xf];
}

inline void append_double(std::string& out, double v) {
  char b[48];
  out.append(b, static_cast<size_t>(format_double(v, b)));
}

inline std::string number_string(double v) {
  std::string s;
  append_double(s, v);
  return s;
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
