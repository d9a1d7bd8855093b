// Number formatting of docs/log-format.md section 2.
//
// Floats: nan / inf / -inf; '%.6f' when x == 0 or 1e-4 <= |x| < 1e16, else
// '%.6e' -- exactly Python's `'%.6f' % x` / `'%.6e' % x` (both round the exact
// binary value half-to-even).  Integers: full decimal.  The integer writers
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
