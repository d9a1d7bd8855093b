// Number formatting of docs/log-format.md section 2.
//
// Floats: nan / inf / -inf; '%.6f' when x == 0 or 1e-4 <= |x| < 1e16, else
// '%.6e' -- exactly Python's `'%.6f' % x` / `'%.6e' % x` (both round the exact
// binary value half-to-even).  Both are computed here exactly (format_fixed6,
// format_exp6), without printf: statistics lines hold three numbers per
// tensor, and printf's cost dominated them.  Integers: full decimal.  The
// integer writers are async-signal-safe (the crash trailer uses them); the
// float writer is not.
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

// "00" to "99": two decimal digits at a time.  Async-signal-safe (a constant).
inline const char* digit_pairs() {
  static const char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  return pairs;
}

// Writes the decimal form of v into buf (>= 21 bytes); returns the length.
// Its digits are counted first and written from the last, two at a time.
inline int format_u64(uint64_t v, char* buf) {
  const char* const pairs = digit_pairs();
  int n = 1;
  for (uint64_t t = 10; n < 20 && v >= t; t *= 10) ++n;  // 10^19 <= v: 20 digits
  char* p = buf + n;
  while (v >= 100) {
    const uint64_t q = v / 100;
    const unsigned r = static_cast<unsigned>(v - q * 100);
    p -= 2;
    p[0] = pairs[2 * r], p[1] = pairs[2 * r + 1];
    v = q;
  }
  if (v >= 10) {
    p[-2] = pairs[2 * v], p[-1] = pairs[2 * v + 1];
  } else {
    p[-1] = static_cast<char>('0' + v);
  }
  return n;
}

inline int format_i64(int64_t v, char* buf) {
  if (v >= 0) return format_u64(static_cast<uint64_t>(v), buf);
  buf[0] = '-';
  // Negate in unsigned arithmetic so INT64_MIN works.
  return 1 + format_u64(0 - static_cast<uint64_t>(v), buf + 1);
}

// |a| = m * 2^e exactly for a finite a != 0, m normalized to 53 bits (what
// frexp and ldexp(frac, 53) give, subnormals included) from the bits
// themselves; a == 0 gives m = 0, e = -53 as they do.
inline void split_double(double a, uint64_t* m, int* e) {
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  int be = static_cast<int>((bits >> 52) & 0x7ff);
  uint64_t f = bits & ((static_cast<uint64_t>(1) << 52) - 1);
  if (be != 0) {
    f |= static_cast<uint64_t>(1) << 52;
  } else if (f == 0) {
    *m = 0, *e = -53;
    return;
  } else {  // subnormal: normalized as frexp does
    be = 1;
    while ((f & (static_cast<uint64_t>(1) << 52)) == 0) f <<= 1, --be;
  }
  *m = f, *e = be - 1075;
}

#if defined(__SIZEOF_INT128__)
// '%.6f' of a finite x with |x| < 1e16 (the fixed range): x = m * 2^e
// exactly (m < 2^53), so x * 10^6 = m * 10^6 * 2^e is an
// integer shifted right by -e bits, rounded half-to-even on the exact value
// in 128-bit arithmetic -- printf's answer without printf's cost (the
// statistics lines hold three of these per tensor).
// __extension__: a user's -Wpedantic -Werror build includes this header too.
__extension__ typedef unsigned __int128 u128;

inline int format_fixed6(double x, char* buf) {
  int n = 0;
  if (std::signbit(x)) buf[n++] = '-';
  uint64_t m = 0;
  int e = 0;
  split_double(x, &m, &e);  // |x| = m * 2^e
  // |x| * 10^6 = whole * 10^6 + frac * 10^6 / 2^s: the whole part is exact,
  // and as whole * 10^6 is even, rounding the sum half-to-even is rounding
  // the fraction's part so -- 64-bit and inline 128-bit arithmetic, no division
  // of 128 bits (a libgcc call)
  uint64_t whole = 0;
  uint32_t micro = 0;
  if (e >= 0) {
    whole = m << e;  // |x| < 1e16 < 2^54: e <= 1
  } else if (e > -120) {
    const int s = -e;
    const uint64_t frac = s >= 64 ? m : m & ((static_cast<uint64_t>(1) << s) - 1);
    whole = s >= 64 ? 0 : m >> s;
    const u128 p = static_cast<u128>(frac) * 1000000u;  // < 2^73
    const u128 rem = p & ((static_cast<u128>(1) << s) - 1);
    const u128 half = static_cast<u128>(1) << (s - 1);
    uint64_t q = static_cast<uint64_t>(p >> s);
    if (rem > half || (rem == half && (q & 1))) ++q;
    if (q == 1000000u) q = 0, ++whole;
    micro = static_cast<uint32_t>(q);
  }  // else below 2^-120: rounds to 0.000000 (only x == 0 gets here)
  n += format_u64(whole, buf + n);
  buf[n++] = '.';
  const char* const pairs = digit_pairs();
  const uint32_t hi = micro / 10000, mid = micro / 100 % 100, lo = micro % 100;
  buf[n] = pairs[2 * hi], buf[n + 1] = pairs[2 * hi + 1];
  buf[n + 2] = pairs[2 * mid], buf[n + 3] = pairs[2 * mid + 1];
  buf[n + 4] = pairs[2 * lo], buf[n + 5] = pairs[2 * lo + 1];
  n += 6;
  buf[n] = '\0';
  return n;
}
#endif

// A nonnegative integer of up to 40 32-bit limbs (1280 bits): enough for
// m * 10^330 (the smallest subnormal scaled to 7 digits) and m * 2^971.
struct Digits {
  uint32_t limb[40];
  int n;  // limbs in use, least significant first
  explicit Digits(uint64_t v) : limb{}, n(0) {
    for (; v != 0; v >>= 32) limb[n++] = static_cast<uint32_t>(v);
  }
  void mul_small(uint32_t f) {
    uint64_t carry = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t p = static_cast<uint64_t>(limb[i]) * f + carry;
      limb[i] = static_cast<uint32_t>(p);
      carry = p >> 32;
    }
    if (carry != 0) limb[n++] = static_cast<uint32_t>(carry);
  }
  uint32_t div_small(uint32_t d) {  // returns the remainder
    uint64_t rem = 0;
    for (int i = n - 1; i >= 0; --i) {
      const uint64_t cur = (rem << 32) | limb[i];
      limb[i] = static_cast<uint32_t>(cur / d);
      rem = cur % d;
    }
    while (n > 0 && limb[n - 1] == 0) --n;
    return static_cast<uint32_t>(rem);
  }
  void mul_pow10(int k) {
    for (; k >= 9; k -= 9) mul_small(1000000000u);
    static const uint32_t p10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    if (k > 0) mul_small(p10[k]);
  }
  void shl(int s) {
    const int words = s / 32, bits = s % 32;
    uint32_t out[40] = {};
    for (int i = 0; i < n; ++i) {
      const uint64_t v = static_cast<uint64_t>(limb[i]) << bits;
      out[i + words] |= static_cast<uint32_t>(v);
      if (i + words + 1 < 40) out[i + words + 1] |= static_cast<uint32_t>(v >> 32);
    }
    n = n + words + 1 > 40 ? 40 : n + words + 1;
    std::memcpy(limb, out, sizeof limb);
    while (n > 0 && limb[n - 1] == 0) --n;
  }
  bool bit(int i) const { return i / 32 < n && ((limb[i / 32] >> (i % 32)) & 1u); }
  bool any_below(int i) const {  // any bit below bit i set
    for (int w = 0; w < i / 32 && w < n; ++w)
      if (limb[w] != 0) return true;
    return i / 32 < n && (limb[i / 32] & ((1u << (i % 32)) - 1u)) != 0;
  }
  // the value shifted right by s bits, rounded half-to-even; the result fits 64 bits here
  uint64_t shr_round(int s) const {
    uint64_t q = 0;
    for (int b = 63; b >= 0; --b) q = (q << 1) | (bit(s + b) ? 1u : 0u);
    if (s > 0 && bit(s - 1) && (any_below(s - 1) || (q & 1))) ++q;
    return q;
  }
  uint64_t low64() const {
    return (n > 0 ? limb[0] : 0) | (n > 1 ? static_cast<uint64_t>(limb[1]) << 32 : 0);
  }
};

// round-half-even(|x| * 10^(6 - d)): the seven digits of |x| in '%.6e' at exponent d
inline uint64_t scaled7(uint64_t m, int e, int d) {
  const int k = 6 - d;
#if defined(__SIZEOF_INT128__)
  // |x| >= ~1e-16 below 1: m * 10^k < 2^53 * 10^22 < 2^127, shifted right
  // by fewer than 128 bits -- in 128-bit arithmetic without the big integer
  if (k >= 0 && k <= 22 && e < 0 && e > -128) {
    static const uint64_t p10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                     100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                     1000000000000ull, 10000000000000ull, 100000000000000ull,
                                     1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                                     1000000000000000000ull, 10000000000000000000ull};
    u128 v = static_cast<u128>(m) * (k > 19 ? p10[19] : p10[k]);
    if (k > 19) v *= p10[k - 19];
    const int s = -e;
    const u128 rem = v & ((static_cast<u128>(1) << s) - 1);
    const u128 half = static_cast<u128>(1) << (s - 1);
    u128 q = v >> s;
    if (rem > half || (rem == half && (q & 1))) ++q;
    return static_cast<uint64_t>(q);
  }
#endif
  Digits v(m);  // |x| = m * 2^e
  if (k >= 0) {
    v.mul_pow10(k);
    if (e >= 0) {
      v.shl(e);
      return v.low64();
    }
    return v.shr_round(-e);
  }
  if (e > 0) v.shl(e);  // |x| >= 1e16 > 2^53: an integer
  // divide by 10^-k; the dropped digits decide the rounding: the first against 5, the rest sticky
  int left = -k;
  bool sticky = false;
  uint32_t rem = 0, unit = 1;
  while (left > 0) {
    const int step = left > 9 ? 9 : left;
    static const uint32_t p10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                                     1000000000};
    sticky = sticky || rem != 0;
    rem = v.div_small(p10[step]);
    unit = p10[step - 1];  // the place of the first dropped digit of this chunk
    left -= step;
  }
  const uint32_t first = rem / unit;
  sticky = sticky || rem % unit != 0;
  uint64_t q = v.low64();
  if (first > 5 || (first == 5 && (sticky || (q & 1)))) ++q;
  return q;
}

// '%.6e' of a finite nonzero x; buf >= 16 bytes
inline int format_exp6(double x, char* buf) {
  int n = 0;
  if (std::signbit(x)) buf[n++] = '-';
  uint64_t m = 0;
  int e = 0;
  split_double(x, &m, &e);
  int d = static_cast<int>(std::floor(std::log10(std::fabs(x))));  // may be one off near 10^d
  uint64_t q = scaled7(m, e, d);
  if (q < 1000000u) q = scaled7(m, e, --d);
  else if (q > 10000000u) q = scaled7(m, e, ++d);
  if (q == 10000000u) q = 1000000u, ++d;  // rounded up to the next power of ten
  buf[n++] = static_cast<char>('0' + q / 1000000u);
  buf[n++] = '.';
  uint32_t rest = static_cast<uint32_t>(q % 1000000u);
  for (int k = 5; k >= 0; --k, rest /= 10) buf[n + k] = static_cast<char>('0' + rest % 10);
  n += 6;
  buf[n++] = 'e';
  buf[n++] = d < 0 ? '-' : '+';
  const int a = d < 0 ? -d : d;
  if (a >= 100) buf[n++] = static_cast<char>('0' + a / 100);
  buf[n++] = static_cast<char>('0' + a / 10 % 10);
  buf[n++] = static_cast<char>('0' + a % 10);
  buf[n] = '\0';
  return n;
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
  if (!fixed) return format_exp6(x, buf);
#if defined(__SIZEOF_INT128__)
  return format_fixed6(x, buf);
#else
  int n = std::snprintf(buf, 48, "%.6f", x);
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
#endif
}

// A record's text is built with these (Out: std::string, or format.h's Text
// in front of one).
template <class Out>
inline void append_u64(Out& out, uint64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(format_u64(v, b)));
}

template <class Out>
inline void append_i64(Out& out, int64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(format_i64(v, b)));
}

// prefix, then v's low `digits` hex digits (lowercase, zero-padded)
template <class Out>
inline void append_hex(Out& out, const char* prefix, uint64_t v, int digits) {
  static const char hex[] = "0123456789abcdef";
  char b[16];
  for (int i = 0; i < digits && i < 16; ++i) b[i] = hex[(v >> (4 * (digits - 1 - i))) & 0xf];
  out += prefix;
  out.append(b, static_cast<size_t>(digits < 16 ? digits : 16));
}

template <class Out>
inline void append_double(Out& out, double v) {
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
