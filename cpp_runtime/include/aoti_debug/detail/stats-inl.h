// stats.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  stats.h includes it at its end wherever the bodies are
// compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core
// object (src/core.cpp).
#pragma once

#include "stats.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3", "no-fast-math", "no-associative-math", "no-reciprocal-math", \
                     "signed-zeros", "no-finite-math-only", "fp-contract=off")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#define AOTI_DEBUG_STATS_POP_GCC 1
#elif defined(__clang__)
#pragma float_control(precise, on, push)
#define AOTI_DEBUG_STATS_POP_CLANG 1
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define AOTI_DEBUG_STATS_X86_DISPATCH 1
#include <immintrin.h>
#endif

AOTI_DEBUG_NAMESPACE_BEGIN

namespace detail {

constexpr int64_t kStatsBlock = 65536;  // elements per summation block
constexpr int64_t kStatsChunk = 2048;   // gather chunk; a multiple of 8 dividing kStatsBlock

// A vector of W elements of T.
template <class T, int W>
struct VecOf {
  typedef T type __attribute__((vector_size(W * sizeof(T))));
};

// Vectors travel by reference only: by value, GCC warns (-Wpsabi) in every
// includer built without AVX about an ABI no caller here depends on.
template <class V>
AOTI_DEBUG_ALWAYS_INLINE void load_vec(V& v, const void* p) {
  std::memcpy(&v, p, sizeof(V));
}

template <class V, class T>
AOTI_DEBUG_ALWAYS_INLINE void fill(V& v, T x) {
  V t = {};
  for (unsigned j = 0; j < sizeof(V) / sizeof(T); ++j) t[j] = x;
  v = t;
}

inline double combine_lanes(const double* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// Magnitude of a complex element; an element with a NaN part counts as NaN.
inline double complex_abs(double re, double im) {
  if (re != re || im != im) return __builtin_nan("");
  return std::hypot(re, im);
}

// One element as double (complex: its magnitude).  Used for partial vectors
// and for locating the first NaN/Inf.
inline double element_as_double(const unsigned char* p, int32_t code) {
  switch (code) {
    case kByte: return *p;
    case kChar: return static_cast<int8_t>(*p);
    case kShort: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case kInt: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case kLong: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case kUInt16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case kUInt32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case kUInt64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case kHalf: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case kFloat: { float v; std::memcpy(&v, p, 4); return v; }
    case kDouble: { double v; std::memcpy(&v, p, 8); return v; }
    case kComplexFloat: { float v[2]; std::memcpy(v, p, 8); return complex_abs(v[0], v[1]); }
    case kComplexDouble: { double v[2]; std::memcpy(v, p, 16); return complex_abs(v[0], v[1]); }
    case kFloat8_e5m2: case kFloat8_e4m3fn: case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:
    case kFloat8_e8m0fnu:
      return float8_table(code)[*p];
    default:
      return __builtin_nan("");
  }
}

// ---- loaders: at<W>(i, x) sets x to elements i..i+W-1 as doubles ----

template <class T>
struct LoadConvert {  // float, double and integers of up to 32 bits
  const unsigned char* p;
  template <int W>
  AOTI_DEBUG_ALWAYS_INLINE void at(int64_t i, typename VecOf<double, W>::type& x) const {
    typename VecOf<T, W>::type v;
    load_vec(v, p + i * sizeof(T));
    for (int j = 0; j < W; ++j) x[j] = static_cast<double>(v[j]);
  }
};

// Element loops rather than __builtin_convertvector: GCC splits the latter
// into halves under a target attribute; the loops become one vcvtps2pd.
struct LoadBF16 {
  const unsigned char* p;
  template <int W>
  AOTI_DEBUG_ALWAYS_INLINE void at(int64_t i, typename VecOf<double, W>::type& x) const {
    typedef typename VecOf<uint32_t, W>::type U;
    typename VecOf<uint16_t, W>::type h;
    load_vec(h, p + 2 * i);
    U w = {};
    for (int j = 0; j < W; ++j) w[j] = static_cast<uint32_t>(h[j]) << 16;
    const typename VecOf<float, W>::type f = (typename VecOf<float, W>::type)w;
    for (int j = 0; j < W; ++j) x[j] = f[j];
  }
};

// IEEE half in vector integer ops (exact): normal numbers rebias the
// exponent, Inf/NaN get the float all-ones exponent, subnormals are
// mantissa * 2^-24 computed in float.
struct LoadHalf {
  const unsigned char* p;
  template <int W>
  AOTI_DEBUG_ALWAYS_INLINE void at(int64_t i, typename VecOf<double, W>::type& x) const {
    typedef typename VecOf<uint32_t, W>::type U;
    typedef typename VecOf<int32_t, W>::type I;
    typedef typename VecOf<float, W>::type F;
    typename VecOf<uint16_t, W>::type h;
    load_vec(h, p + 2 * i);
    U w = {};
    for (int j = 0; j < W; ++j) w[j] = h[j];
    U em, rebias, sub_cut, inf_cut, sign_mask;
    fill(em, 0x7fffu), fill(rebias, 0x38000000u), fill(sub_cut, 0x400u), fill(inf_cut, 0x7c00u);
    fill(sign_mask, 0x8000u);
    F scale;
    fill(scale, 5.9604644775390625e-08f);  // 2^-24
    const U e = w & em;
    U bits = (e << 13) + rebias;
    bits += (U)((I)(e >= inf_cut)) & rebias;  // exponent 31 -> 255
    F sub = {};
    for (int j = 0; j < W; ++j) sub[j] = static_cast<float>(static_cast<int32_t>(e[j]));
    sub *= scale;
    const U is_sub = (U)((I)(e < sub_cut));
    bits = (is_sub & (U)sub) | (~is_sub & bits);
    bits |= (w & sign_mask) << 16;
    const F f = (F)bits;
    for (int j = 0; j < W; ++j) x[j] = f[j];
  }
};

// Any dtype into doubles (complex: magnitudes), for everything the direct
// fast path (fast_blocks) does not take (gathered views, odd dtypes): one
// plain loop per dtype, compiled once per instruction set below (exact
// conversions: the same doubles from each).
AOTI_DEBUG_ALWAYS_INLINE void convert_chunk_body(const unsigned char* p, int64_t n, int32_t code,
                                                 double* out) {
  switch (code) {
#define AOTI_DEBUG_CONVERT(T)                     \
  for (int64_t i = 0; i < n; ++i) {               \
    T v;                                          \
    std::memcpy(&v, p + i * sizeof(T), sizeof(T)); \
    out[i] = static_cast<double>(v);              \
  }                                               \
  break;
    case kFloat: AOTI_DEBUG_CONVERT(float)
    case kDouble: AOTI_DEBUG_CONVERT(double)
    case kByte: AOTI_DEBUG_CONVERT(uint8_t)
    case kChar: AOTI_DEBUG_CONVERT(int8_t)
    case kShort: AOTI_DEBUG_CONVERT(int16_t)
    case kUInt16: AOTI_DEBUG_CONVERT(uint16_t)
    case kInt: AOTI_DEBUG_CONVERT(int32_t)
    case kUInt32: AOTI_DEBUG_CONVERT(uint32_t)
#undef AOTI_DEBUG_CONVERT
    case kHalf:
    case kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = code == kHalf ? half_to_float(v) : bf16_to_float(v);
      }
      break;
    case kFloat8_e5m2: case kFloat8_e4m3fn: case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:
    case kFloat8_e8m0fnu: {
      const double* t = float8_table(code);
      for (int64_t i = 0; i < n; ++i) out[i] = t[p[i]];
      break;
    }
    default: {
      const int size = dtype_info(code)->itemsize;
      for (int64_t i = 0; i < n; ++i) out[i] = element_as_double(p + i * size, code);
    }
  }
}

AOTI_DEBUG_NOINLINE inline void convert_chunk_w2(const unsigned char* p, int64_t n, int32_t code, double* out) {
  convert_chunk_body(p, n, code, out);
}

#if AOTI_DEBUG_STATS_X86_DISPATCH
__attribute__((target("avx2"))) AOTI_DEBUG_NOINLINE inline void convert_chunk_w4(
    const unsigned char* p, int64_t n, int32_t code, double* out) {
  convert_chunk_body(p, n, code, out);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) AOTI_DEBUG_NOINLINE inline void
convert_chunk_w8(const unsigned char* p, int64_t n, int32_t code, double* out) {
  convert_chunk_body(p, n, code, out);
}
#endif

template <int W>
AOTI_DEBUG_ALWAYS_INLINE void convert_chunk(const unsigned char* p, int64_t n, int32_t code, double* out) {
#if AOTI_DEBUG_STATS_X86_DISPATCH
  if (W >= 8) return convert_chunk_w8(p, n, code, out);
  if (W >= 4) return convert_chunk_w4(p, n, code, out);
#endif
  convert_chunk_w2(p, n, code, out);
}

// Saw -0.0 / +0.0 among n raw floating elements?  Bit tests on the stored
// values, no conversion (only blocks whose min or max is 0 come here).
AOTI_DEBUG_NOINLINE inline void zero_scan(const unsigned char* p, int64_t n, int32_t code,
                                          bool* negz, bool* posz) {
  bool neg = false, pos = false;
  switch (code) {
#define AOTI_DEBUG_ZEROS(T, SIGN)                       \
  for (int64_t i = 0; i < n; ++i) {                     \
    T v;                                                \
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));      \
    neg |= v == static_cast<T>(SIGN);                   \
    pos |= v == 0;                                      \
  }                                                     \
  break;
    case kFloat: AOTI_DEBUG_ZEROS(uint32_t, 0x80000000u)
    case kDouble: AOTI_DEBUG_ZEROS(uint64_t, 0x8000000000000000ull)
    case kHalf: case kBFloat16: AOTI_DEBUG_ZEROS(uint16_t, 0x8000u)
    case kFloat8_e5m2: case kFloat8_e4m3fn: AOTI_DEBUG_ZEROS(uint8_t, 0x80u)
#undef AOTI_DEBUG_ZEROS
    case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:  // no -0 (0x80 is their NaN)
      for (int64_t i = 0; i < n; ++i) pos |= p[i] == 0;
      break;
    case kFloat4_e2m1fn_x2:  // two values a byte: -0 is nibble 8, +0 nibble 0
      for (int64_t i = 0; i < n; ++i) {
        neg |= (p[i] & 0x0f) == 0x08 || (p[i] & 0xf0) == 0x80;
        pos |= (p[i] & 0x0f) == 0 || (p[i] & 0xf0) == 0;
      }
      break;
    default: break;  // float8_e8m0fnu has no zero
  }
  *negz = *negz || neg;
  *posz = *posz || pos;
}

// Running state of one thread for the floating path (also complex magnitudes
// and integers of up to 32 bits, which double holds exactly).  8 lanes = K
// vectors of W doubles; lane j is vector j / W, element j % W.
template <int W>
struct FloatAcc {
  typedef typename VecOf<double, W>::type D;
  typedef typename VecOf<int64_t, W>::type L;
  static constexpr int K = 8 / W;
  D mn[K], mx[K];
  L nan[K], inf[K];
  L negz[K], posz[K];  // sign bit set: saw -0.0 / +0.0 (decides a zero min/max's sign)
  int64_t pad = 0;     // NaN padding of partial vectors, not real elements
  bool zneg = false, zpos = false;  // the same, from zero_scan
  FloatAcc() {
    for (int k = 0; k < K; ++k) {
      fill(mn[k], __builtin_inf()), fill(mx[k], -__builtin_inf());
      fill(nan[k], int64_t(0)), fill(inf[k], int64_t(0));
      fill(negz[k], int64_t(0)), fill(posz[k], int64_t(0));
    }
  }
  // This accumulator's figures into a partial result (`out`: a StatsPartial): its
  // NaN and Inf counts, and each lane's min, max and zero signs merged in.
  template <class Out>
  void fold_into(Out& out) const {
    out.nan = nan_total();
    out.inf = inf_total();
    for (int e = 0; e < 8; ++e) {
      const int k = e / W, x = e % W;
      if (mn[k][x] < out.mn) out.mn = mn[k][x];
      if (mx[k][x] > out.mx) out.mx = mx[k][x];
      out.negz = out.negz || negz[k][x] < 0 || zneg;
      out.posz = out.posz || posz[k][x] < 0 || zpos;
    }
  }
  int64_t nan_total() const {
    int64_t s = -pad;
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < W; ++j) s -= nan[k][j];
    return s;
  }
  int64_t inf_total() const {
    int64_t s = 0;
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < W; ++j) s -= inf[k][j];
    return s;
  }
};

// W consecutive elements.  Only double compares and bitwise ops: 64-bit
// integer compares are slow or missing below AVX2.
template <int W>
AOTI_DEBUG_ALWAYS_INLINE void float_step(const typename VecOf<double, W>::type& x,
                                         typename VecOf<double, W>::type& lanes,
                                         FloatAcc<W>& a, int k) {
  typedef typename VecOf<double, W>::type D;
  typedef typename VecOf<int64_t, W>::type L;
  const L bits = (L)x;
  L sign;
  fill(sign, INT64_MIN);
  D inf_d, zero_d;
  fill(inf_d, __builtin_inf()), fill(zero_d, 0.0);
  const L is_nan = (L)(x != x);
  a.nan[k] += is_nan;  // masks are -1: counts go negative, negated at the end
  // NaN adds -0.0, which leaves every sum (even -0.0) unchanged
  lanes += (D)((bits & ~is_nan) | (is_nan & sign));
  a.inf[k] += (L)((D)(bits & ~sign) == inf_d);
  // bitwise selects (no helper: vector arguments upset -Wpsabi); NaN never wins
  const L lt = (L)(x < a.mn[k]), gt = (L)(x > a.mx[k]);
  a.mn[k] = (D)((lt & bits) | (~lt & (L)a.mn[k]));
  a.mx[k] = (D)((gt & bits) | (~gt & (L)a.mx[k]));
  const L is_zero = (L)(x == zero_d);
  a.negz[k] |= is_zero & bits;
  a.posz[k] |= is_zero & ~bits;
}

// The fast pass: sum, min and max only.  A NaN or Inf element makes its
// lane sum non-finite, which sends the block through the careful pass (same
// sums for every finite element, so the bits do not depend on the path).
template <int W>
AOTI_DEBUG_ALWAYS_INLINE void fast_step(const typename VecOf<double, W>::type& x,
                                        typename VecOf<double, W>::type& lanes,
                                        typename VecOf<double, W>::type& mn,
                                        typename VecOf<double, W>::type& mx) {
  lanes += x;
#if defined(__clang__) && __clang_major__ < 10
  typedef typename VecOf<int64_t, W>::type L;
  const L lt = (L)(x < mn), gt = (L)(x > mx);
  mn = (typename VecOf<double, W>::type)((lt & (L)x) | (~lt & (L)mn));
  mx = (typename VecOf<double, W>::type)((gt & (L)x) | (~gt & (L)mx));
#else
  mn = x < mn ? x : mn;  // minpd / maxpd: a NaN x never wins
  mx = x > mx ? x : mx;
#endif
}

enum StatsPass { kPassFast = 0, kPassCareful = 1 };

// Block-local state of the fast pass.
template <int W>
struct FastAcc {
  typedef typename VecOf<double, W>::type D;
  static constexpr int K = 8 / W;
  D mn[K], mx[K];
  FastAcc() {
    for (int k = 0; k < K; ++k) fill(mn[k], __builtin_inf()), fill(mx[k], -__builtin_inf());
  }
};

// Element j (< 8) of a block's partial last vector in the fast pass: into its
// own lane, as a whole vector would have put it.
template <int W>
AOTI_DEBUG_ALWAYS_INLINE void fast_element(double v, int64_t j, FastAcc<W>& f,
                                           typename VecOf<double, W>::type* lanes) {
  const int k = static_cast<int>(j / W), e = static_cast<int>(j % W);
  lanes[k][e] += v;
  if (v < f.mn[k][e]) f.mn[k][e] = v;
  if (v > f.mx[k][e]) f.mx[k][e] = v;
}

// n doubles starting at a lane-0 position, in pass P.
template <int W, int P>
AOTI_DEBUG_ALWAYS_INLINE void float_kernel(const double* p, int64_t n, FloatAcc<W>& acc,
                                           FastAcc<W>& fast,
                                           typename VecOf<double, W>::type* lanes_io) {
  typedef typename VecOf<double, W>::type D;
  constexpr int K = 8 / W;
  FloatAcc<W> a = acc;  // locals: lets the compiler keep everything in registers
  FastAcc<W> f = fast;
  D lanes[K];
  for (int k = 0; k < K; ++k) lanes[k] = lanes_io[k];
  int64_t i = 0;
  D x = {};
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < K; ++k) {
      load_vec(x, p + i + k * W);
      if (P == kPassFast) fast_step<W>(x, lanes[k], f.mn[k], f.mx[k]);
      else float_step<W>(x, lanes[k], a, k);
    }
  if (i < n && P == kPassFast) {  // partial vector: element by element, same lanes
    for (int64_t j = 0; i + j < n; ++j) fast_element<W>(p[i + j], j, f, lanes);
  } else if (i < n) {  // partial vector: pad with NaN (uncounted via `pad`)
    double t[8];
    for (int j = 0; j < 8; ++j) t[j] = i + j < n ? p[i + j] : __builtin_nan("");
    for (int k = 0; k < K; ++k) {
      load_vec(x, t + k * W);
      float_step<W>(x, lanes[k], a, k);
    }
    a.pad += 8 - (n - i);
  }
  for (int k = 0; k < K; ++k) lanes_io[k] = lanes[k];
  acc = a;
  fast = f;
}

// The fast pass over the first `len` elements (a multiple of 8) of NB
// contiguous blocks at once, converted in registers.  Each lane's sum is one
// serial chain (the order is the contract), so a single block is bound by
// the add latency; NB blocks in flight give NB independent chains.
template <int W, int NB, class Load>
AOTI_DEBUG_ALWAYS_INLINE void fast_blocks(const Load& proto, const unsigned char* base,
                                          int64_t block_bytes, int64_t len, FastAcc<W>* fast,
                                          typename VecOf<double, W>::type (*lanes)[8 / W]) {
  typedef typename VecOf<double, W>::type D;
  constexpr int K = 8 / W;
  Load ld[NB];
  D l[NB][K], mn[NB][K], mx[NB][K];
  for (int q = 0; q < NB; ++q) {
    ld[q] = proto;
    ld[q].p = base + q * block_bytes;
    for (int k = 0; k < K; ++k) l[q][k] = lanes[q][k], mn[q][k] = fast[q].mn[k], mx[q][k] = fast[q].mx[k];
  }
  D x = {};
  for (int64_t i = 0; i < len; i += 8)
    for (int q = 0; q < NB; ++q)
      for (int k = 0; k < K; ++k) {
        ld[q].template at<W>(i + k * W, x);
        fast_step<W>(x, l[q][k], mn[q][k], mx[q][k]);
      }
  for (int q = 0; q < NB; ++q)
    for (int k = 0; k < K; ++k) lanes[q][k] = l[q][k], fast[q].mn[k] = mn[q][k], fast[q].mx[k] = mx[q][k];
}

// Dtypes with the direct fast path (the common floating ones).
inline bool has_fast_blocks(int32_t code) {
  return code == kFloat || code == kBFloat16 || code == kHalf || code == kDouble;
}

template <int W, int NB>
AOTI_DEBUG_ALWAYS_INLINE void fast_blocks_chunk(const unsigned char* p, int32_t code, int itemsize,
                                                int64_t len, FastAcc<W>* f,
                                                typename VecOf<double, W>::type (*lanes)[8 / W]) {
  const int64_t bb = kStatsBlock * itemsize;
  switch (code) {
    case kFloat: fast_blocks<W, NB>(LoadConvert<float>{p}, p, bb, len, f, lanes); break;
    case kDouble: fast_blocks<W, NB>(LoadConvert<double>{p}, p, bb, len, f, lanes); break;
    case kBFloat16: fast_blocks<W, NB>(LoadBF16{p}, p, bb, len, f, lanes); break;
    case kHalf: fast_blocks<W, NB>(LoadHalf{p}, p, bb, len, f, lanes); break;
    default: break;
  }
}

// 64-bit integers: exact min/max in their own type, sum of their doubles.
template <class T, int W>
struct IntAcc {
  typedef typename VecOf<T, W>::type V;
  static constexpr int K = 8 / W;
  V mn[K], mx[K];
  IntAcc() {
    const bool is_signed = T(-1) < T(0);
    const T lo = is_signed ? static_cast<T>(INT64_MIN) : T(0);
    const T hi = is_signed ? static_cast<T>(INT64_MAX) : static_cast<T>(UINT64_MAX);
    for (int k = 0; k < K; ++k) fill(mn[k], hi), fill(mx[k], lo);
  }
};

template <class T, int W>
AOTI_DEBUG_ALWAYS_INLINE void int64_chunk(const unsigned char* p, int64_t n, IntAcc<T, W>& acc,
                                          typename VecOf<double, W>::type* lanes_io) {
  typedef typename VecOf<T, W>::type V;
  typedef typename VecOf<int64_t, W>::type L;
  typedef typename VecOf<double, W>::type D;
  constexpr int K = 8 / W;
  IntAcc<T, W> a = acc;
  D lanes[K];
  for (int k = 0; k < K; ++k) lanes[k] = lanes_io[k];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < K; ++k) {
      V x;
      load_vec(x, p + 8 * (i + k * W));
      const L lt = (L)(x < a.mn[k]), gt = (L)(x > a.mx[k]);
      a.mn[k] = (V)((lt & (L)x) | (~lt & (L)a.mn[k]));
      a.mx[k] = (V)((gt & (L)x) | (~gt & (L)a.mx[k]));
      lanes[k] += __builtin_convertvector(x, D);
    }
  for (int64_t j = 0; i + j < n; ++j) {
    T x;
    std::memcpy(&x, p + 8 * (i + j), 8);
    const int k = static_cast<int>(j / W), e = static_cast<int>(j % W);
    if (x < a.mn[k][e]) a.mn[k][e] = x;
    if (x > a.mx[k][e]) a.mx[k][e] = x;
    lanes[k][e] += static_cast<double>(x);
  }
  for (int k = 0; k < K; ++k) lanes_io[k] = lanes[k];
  acc = a;
}

// Walks a strided layout in logical order, copying elements into a buffer.
struct Cursor {
  int nd = 0;
  int itemsize = 1;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;  // in elements
  const unsigned char* base = nullptr;
  const unsigned char* ptr = nullptr;
  int64_t idx[64];

  void seek(int64_t flat) {
    ptr = base;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = flat % sizes[d];
      flat /= sizes[d];
      ptr += idx[d] * strides[d] * itemsize;
    }
  }

  // Unrolled by four: the loads are independent, and -O2 without
  // -march=native would otherwise issue them one loop trip at a time.  Both
  // sides by memcpy: the chunk is read back as another type (double, floats
  // for the hash), which a store through T* would not be guaranteed to reach.
  template <class T>
  AOTI_DEBUG_ALWAYS_INLINE static void copy_run(unsigned char* dst, const unsigned char* src, int64_t m, int64_t step) {
    int64_t k = 0;
    for (; k + 4 <= m; k += 4, src += 4 * step, dst += 4 * sizeof(T)) {
      T a[4];
      std::memcpy(&a[0], src, sizeof(T));
      std::memcpy(&a[1], src + step, sizeof(T));
      std::memcpy(&a[2], src + 2 * step, sizeof(T));
      std::memcpy(&a[3], src + 3 * step, sizeof(T));
      std::memcpy(dst, a, sizeof a);
    }
    for (; k < m; ++k, src += step, dst += sizeof(T)) std::memcpy(dst, src, sizeof(T));
  }

  // Copies the next n elements to dst and advances.  Inlined: it takes the
  // instruction set of the statistics loop that calls it.
  AOTI_DEBUG_ALWAYS_INLINE void gather(unsigned char* dst, int64_t n) {
    const int last = nd - 1;
    const int64_t step = strides[last] * itemsize;
    while (n > 0) {
      int64_t m = sizes[last] - idx[last];
      if (m > n) m = n;
      if (step == itemsize) {   // a contiguous run (permuted or sliced views): one copy
        std::memcpy(dst, ptr, static_cast<size_t>(m * itemsize));
      } else {
        switch (itemsize) {
          case 1: copy_run<uint8_t>(dst, ptr, m, step); break;
          case 2: copy_run<uint16_t>(dst, ptr, m, step); break;
          case 4: copy_run<uint32_t>(dst, ptr, m, step); break;
          case 8: copy_run<uint64_t>(dst, ptr, m, step); break;
          default:
            for (int64_t k = 0; k < m; ++k) std::memcpy(dst + k * itemsize, ptr + k * step, itemsize);
        }
      }
      dst += m * itemsize;
      n -= m;
      idx[last] += m;
      ptr += m * step;
      for (int d = last; d > 0 && idx[d] == sizes[d]; --d) {  // carry
        ptr -= sizes[d] * strides[d] * itemsize;
        idx[d] = 0;
        ++idx[d - 1];
        ptr += strides[d - 1] * itemsize;
      }
    }
  }
};

// ---- content hash (docs/log-format.md section 3.1) --------------------------
//
// The elements' bytes in logical order, zero-padded to whole 64-bit words w_i
// (little-endian), each mixed with its word index: x = w_i ^ ((i + 1) * K),
// t_i = lo32(x) * hi32(x) + x; the hash is fmix64 of the wrapping sum of the
// t_i plus numel and itemsize.  A sum, so blocks hash on any thread in any
// order; position-keyed, so moving bytes changes it.
constexpr uint64_t kHashKey = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kHashNumel = 0xC2B2AE3D27D4EB4Full;

AOTI_DEBUG_ALWAYS_INLINE uint64_t hash_word(uint64_t w, uint64_t i) {
  const uint64_t x = w ^ ((i + 1) * kHashKey);
  return (x & 0xFFFFFFFFull) * (x >> 32) + x;
}

inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

inline uint64_t hash_finish(uint64_t sum, int64_t numel, int itemsize) {
  return fmix64(sum + static_cast<uint64_t>(numel) * kHashNumel + static_cast<uint64_t>(itemsize));
}

// The sum of t_i over the bytes p[0, nbytes), whose first word is word0 of the
// tensor's stream; a partial last word is zero-padded (the tensor's end).
template <int W>
AOTI_DEBUG_ALWAYS_INLINE uint64_t hash_words(const unsigned char* p, int64_t nbytes, uint64_t word0) {
  typedef typename VecOf<uint64_t, W>::type U;
  constexpr int Q = 4;  // independent accumulators
  const int64_t nw = nbytes / 8;
  uint64_t sum = 0;
  int64_t i = 0;
  if (nw >= Q * W) {
    U acc[Q], key[Q], step, lo;
    fill(step, static_cast<uint64_t>(Q * W) * kHashKey);
    fill(lo, static_cast<uint64_t>(0xFFFFFFFFull));
    for (int q = 0; q < Q; ++q) {
      fill(acc[q], static_cast<uint64_t>(0));
      for (int l = 0; l < W; ++l) key[q][l] = (word0 + 1 + q * W + l) * kHashKey;
    }
    for (; i + Q * W <= nw; i += Q * W) {
      for (int q = 0; q < Q; ++q) {
        U w;
        load_vec(w, p + (i + q * W) * 8);
        const U x = w ^ key[q];
        acc[q] += (x & lo) * (x >> 32) + x;
        key[q] += step;
      }
    }
    for (int q = 0; q < Q; ++q)
      for (int l = 0; l < W; ++l) sum += acc[q][l];
  }
  for (; i < nw; ++i) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    sum += hash_word(w, word0 + static_cast<uint64_t>(i));
  }
  if (nbytes % 8 != 0) {
    uint64_t w = 0;
    std::memcpy(&w, p + nw * 8, static_cast<size_t>(nbytes % 8));
    sum += hash_word(w, word0 + static_cast<uint64_t>(nw));
  }
  return sum;
}

// A view's dimensions as its scans walk them: size-1 dims dropped, each dim
// merged into its outer neighbour when the two are contiguous with each
// other.  Returns how many remain (0: a single element; at most 63 of size
// >= 2 in a 64-dim view).
inline int collapse_dims(const TensorView& v, int64_t* sizes, int64_t* strides) {
  int nd = 0;
  for (int64_t d = 0; d < v.ndim; ++d) {
    if (v.sizes[d] == 1) continue;
    if (nd > 0 && strides[nd - 1] == v.strides[d] * v.sizes[d]) {
      sizes[nd - 1] *= v.sizes[d];
      strides[nd - 1] = v.strides[d];
    } else {
      sizes[nd] = v.sizes[d];
      strides[nd] = v.strides[d];
      ++nd;
    }
  }
  return nd;
}

// Runs fn(&args[t]) for every t < n: args[0] on the calling thread, the others
// on threads of their own (on the calling thread too when one cannot start).
template <class Arg>
inline void run_split(void* (*fn)(void*), Arg* args, int n) {
  pthread_t tids[64];
  bool started[64] = {};
  for (int t = 1; t < n; ++t) started[t] = pthread_create(&tids[t], nullptr, fn, &args[t]) == 0;
  fn(&args[0]);
  for (int t = 1; t < n; ++t) {
    if (started[t]) pthread_join(tids[t], nullptr);
    else fn(&args[t]);
  }
}

// Everything a worker needs; layout already simplified.
struct StatsJob {
  int32_t code;
  int32_t kind;
  int itemsize;
  int nd;
  bool contiguous;
  int64_t numel;
  int64_t nblocks;
  bool hash;  // also the content hash
  bool sat;                  // counts_saturation dtypes (float8): count the saturated elements
  uint8_t sat_pos, sat_neg;  // their bytes: +max and -max (the same where there is no sign)
  const unsigned char* base;
  int64_t sizes[64];
  int64_t strides[64];
  double* block_sums;
  uint8_t* block_flags;  // bit 0: block has a NaN, bit 1: has an Inf
};

// What one worker found, reduced to scalars (independent of the vector width).
struct StatsPartial {
  double mn = __builtin_inf(), mx = -__builtin_inf();
  int64_t nan = 0, inf = 0, trues = 0;
  int64_t sat[2] = {0, -1};  // saturated elements (j.sat), and the first one's index
  bool negz = false, posz = false;
  bool failed = false;  // out of memory
  uint64_t hash_sum = 0;
  int64_t imin = INT64_MAX, imax = INT64_MIN;
  uint64_t umin = UINT64_MAX, umax = 0;
};

// hash_words once per instruction set, called once per block or chunk.  The
// AVX-512 one is written with intrinsics: from vector extensions GCC makes
// the 32x32-bit product a vpmullq, three times the cost of vpmuludq.
AOTI_DEBUG_NOINLINE inline uint64_t hash_words_w2(const unsigned char* p, int64_t nbytes,
                                                  uint64_t word0) {
  return hash_words<2>(p, nbytes, word0);
}

#if AOTI_DEBUG_STATS_X86_DISPATCH
__attribute__((target("avx2"))) AOTI_DEBUG_NOINLINE inline uint64_t hash_words_w4(
    const unsigned char* p, int64_t nbytes, uint64_t word0) {
  return hash_words<4>(p, nbytes, word0);
}

__attribute__((target("avx512f"))) AOTI_DEBUG_NOINLINE inline uint64_t hash_words_w8(
    const unsigned char* p, int64_t nbytes, uint64_t word0) {
  typedef VecOf<uint64_t, 8>::type U;
  constexpr int Q = 4;
  const int64_t nw = nbytes / 8;
  int64_t i = 0;
  uint64_t sum = 0;
  if (nw >= Q * 8) {
    U acc[Q], key[Q], step;
    fill(step, static_cast<uint64_t>(Q * 8) * kHashKey);
    for (int q = 0; q < Q; ++q) {
      fill(acc[q], static_cast<uint64_t>(0));
      for (int l = 0; l < 8; ++l) key[q][l] = (word0 + 1 + q * 8 + l) * kHashKey;
    }
    for (; i + Q * 8 <= nw; i += Q * 8) {
      for (int q = 0; q < Q; ++q) {
        U w;
        load_vec(w, p + (i + q * 8) * 8);
        const U x = w ^ key[q];
        // the maskz form: the plain intrinsic trips GCC 12's -Wmaybe-uninitialized
        const U prod = reinterpret_cast<U>(_mm512_maskz_mul_epu32(
            static_cast<__mmask8>(0xFF), reinterpret_cast<__m512i>(x), reinterpret_cast<__m512i>(x >> 32)));
        acc[q] += prod + x;
        key[q] += step;
      }
    }
    for (int q = 0; q < Q; ++q)
      for (int l = 0; l < 8; ++l) sum += acc[q][l];
  }
  return sum + hash_words<1>(p + i * 8, nbytes - i * 8, word0 + static_cast<uint64_t>(i));
}
#endif

template <int W>
AOTI_DEBUG_ALWAYS_INLINE uint64_t hash_words_best(const unsigned char* p, int64_t nbytes,
                                                  uint64_t word0) {
#if AOTI_DEBUG_STATS_X86_DISPATCH
  if (W >= 8) return hash_words_w8(p, nbytes, word0);
  if (W >= 4) return hash_words_w4(p, nbytes, word0);
#endif
  return hash_words_w2(p, nbytes, word0);
}

// Elements [start + off, start + off + *m) in logical order: in place when
// contiguous (the whole rest at once), else gathered into buf by the cursor,
// which must sit at start + off.  No lambdas here: a lambda would not inherit
// the instruction set of the function that calls it.
AOTI_DEBUG_ALWAYS_INLINE const unsigned char* next_chunk(const StatsJob& j, Cursor& c,
                                                         unsigned char* buf, int64_t start,
                                                         int64_t off, int64_t len, int64_t* m) {
  if (j.contiguous) {
    *m = len - off;
    return j.base + (start + off) * j.itemsize;
  }
  *m = len - off < kStatsChunk ? len - off : kStatsChunk;
  c.gather(buf, *m);
  return buf;
}

// The float8 elements p[0, n) that are byte pos or neg into sat[0]; the
// logical index of the first one (p[0] is element `at`) into sat[1] if unset.
// On the raw bytes: a byte compare is many lanes wide, a compare of the
// converted doubles is not.
AOTI_DEBUG_ALWAYS_INLINE void count_saturated(const unsigned char* p, int64_t n, uint8_t pos, uint8_t neg,
                                              int64_t at, int64_t* sat) {
  uint32_t k = 0;  // n <= kStatsChunk
  for (int64_t i = 0; i < n; ++i) k += static_cast<uint32_t>((p[i] == pos) | (p[i] == neg));
  for (int64_t i = 0; k > 0 && sat[1] < 0 && i < n; ++i)
    if (p[i] == pos || p[i] == neg) sat[1] = at + i;
  sat[0] += k;
}

// float4_e2m1fn_x2's saturated values (|x| == 6: magnitude bits 111) among the
// 2n values of bytes p[0, n), as count_saturated; indices are of values, the
// low nibble first (byte `at` holds values 2 at and 2 at + 1).
AOTI_DEBUG_ALWAYS_INLINE void count_saturated_e2m1(const unsigned char* p, int64_t n, int64_t at, int64_t* sat) {
  uint32_t k = 0;  // n <= kStatsChunk
  for (int64_t i = 0; i < n; ++i)
    k += static_cast<uint32_t>((p[i] & 0x07) == 0x07) + static_cast<uint32_t>((p[i] & 0x70) == 0x70);
  for (int64_t i = 0; k > 0 && sat[1] < 0 && i < n; ++i) {
    if ((p[i] & 0x07) == 0x07) sat[1] = 2 * (at + i);
    else if ((p[i] & 0x70) == 0x70) sat[1] = 2 * (at + i) + 1;
  }
  sat[0] += k;
}

// The 2n e2m1 values of bytes p[0, n) into pass P, in value order: decoded
// half a chunk of bytes at a time (dbuf holds kStatsChunk doubles), each half
// an even number of whole vectors but the block's last, so every half starts
// at lane 0 as float_kernel needs.
template <int W, int P>
AOTI_DEBUG_ALWAYS_INLINE void e2m1_chunk(const unsigned char* p, int64_t n, double* dbuf, FloatAcc<W>& fa,
                                         FastAcc<W>& fast, typename VecOf<double, W>::type* lanes) {
  double t[16];
  for (int k = 0; k < 16; ++k) t[k] = e2m1_value(static_cast<uint8_t>(k));
  for (int64_t h = 0; h < n; h += kStatsChunk / 2) {
    const int64_t m = n - h < kStatsChunk / 2 ? n - h : kStatsChunk / 2;
    for (int64_t i = 0; i < m; ++i) {
      dbuf[2 * i] = t[p[h + i] & 0x0f];
      dbuf[2 * i + 1] = t[p[h + i] >> 4];
    }
    float_kernel<W, P>(dbuf, 2 * m, fa, fast, lanes);
  }
}

// One pass P of the floating path over block [start, start + len): chunks
// (in place or gathered) converted to doubles, then the kernel; with
// `hash_sum`, each chunk's content-hash sum added while it is at hand (a
// gathered view is then gathered once, not again by hash_block); with `sat`,
// the saturated elements counted (the fast pass, which sees each block once).
template <int W, int P>
AOTI_DEBUG_ALWAYS_INLINE void float_block_pass(const StatsJob& j, Cursor& c, unsigned char* buf,
                                               double* dbuf, int64_t start, int64_t len,
                                               FloatAcc<W>& fa, FastAcc<W>& fast,
                                               typename VecOf<double, W>::type* lanes,
                                               uint64_t* hash_sum = nullptr, int64_t* sat = nullptr) {
  if (!j.contiguous) c.seek(start);
  for (int64_t off = 0, m = 0; off < len; off += m) {
    int64_t avail = 0;
    const unsigned char* p = next_chunk(j, c, buf, start, off, len, &avail);
    m = avail < kStatsChunk ? avail : kStatsChunk;
    // start and off are multiples of 2048 elements: whole words
    if (hash_sum != nullptr)
      *hash_sum += hash_words_best<W>(p, m * j.itemsize, static_cast<uint64_t>((start + off) * j.itemsize / 8));
    if (j.code == kFloat4_e2m1fn_x2) {  // a block of len bytes is 2 len values
      if (sat != nullptr) count_saturated_e2m1(p, m, start + off, sat);
      e2m1_chunk<W, P>(p, m, dbuf, fa, fast, lanes);
      continue;
    }
    const double* d = reinterpret_cast<const double*>(p);
    if (j.code != kDouble) {
      convert_chunk<W>(p, m, j.code, dbuf);
      d = dbuf;
    }
    if (sat != nullptr) count_saturated(p, m, j.sat_pos, j.sat_neg, start + off, sat);
    float_kernel<W, P>(d, m, fa, fast, lanes);
  }
}

inline void zero_scan_block(const StatsJob& j, Cursor& c, unsigned char* buf, int64_t start,
                            int64_t len, bool* negz, bool* posz) {
  if (!j.contiguous) c.seek(start);
  for (int64_t off = 0, m = 0; off < len; off += m) {
    const unsigned char* p = next_chunk(j, c, buf, start, off, len, &m);  // sets m
    zero_scan(p, m, j.code, negz, posz);
  }
}

// The content-hash sum of elements [start, start + len): read in place when
// contiguous (still in cache from the statistics), else gathered again.
template <int W>
AOTI_DEBUG_ALWAYS_INLINE uint64_t hash_block(const StatsJob& j, Cursor& c, unsigned char* buf,
                                             int64_t start, int64_t len) {
  if (j.contiguous)
    return hash_words_best<W>(j.base + start * j.itemsize, len * j.itemsize,
                              static_cast<uint64_t>(start * j.itemsize / 8));
  uint64_t sum = 0;
  c.seek(start);
  for (int64_t off = 0, m = 0; off < len; off += m) {
    const unsigned char* p = next_chunk(j, c, buf, start, off, len, &m);  // sets m
    // start and off are multiples of 2048 elements: whole words
    sum += hash_words_best<W>(p, m * j.itemsize,
                              static_cast<uint64_t>((start + off) * j.itemsize / 8));
  }
  return sum;
}

// After the fast pass of block b: a block with NaN/Inf is redone carefully
// (counts, first-NaN flags); a block whose min or max is 0 gets its zero
// signs checked; then its sum is stored.
template <int W>
AOTI_DEBUG_ALWAYS_INLINE void finish_block(const StatsJob& j, Cursor& c, unsigned char* buf,
                                           double* dbuf, int64_t b, FloatAcc<W>& fa, FastAcc<W>& fast,
                                           typename VecOf<double, W>::type* lanes) {
  constexpr int K = 8 / W;
  const int64_t start = b * kStatsBlock;
  const int64_t len = j.numel - start < kStatsBlock ? j.numel - start : kStatsBlock;
  bool finite = true;
  double bmin = __builtin_inf(), bmax = -__builtin_inf();
  for (int e = 0; e < 8; ++e) {
    const double l = lanes[e / W][e % W];
    finite = finite && l - l == 0;  // false for NaN and +-Inf
    bmin = fast.mn[e / W][e % W] < bmin ? fast.mn[e / W][e % W] : bmin;
    bmax = fast.mx[e / W][e % W] > bmax ? fast.mx[e / W][e % W] : bmax;
  }
  if (!finite && j.kind != kStatsInt && j.kind != kStatsUInt) {
    // NaN or Inf inside (or a sum that overflowed): count them properly.
    const int64_t nan0 = fa.nan_total(), inf0 = fa.inf_total();
    for (int k = 0; k < K; ++k) fill(lanes[k], -0.0);
    float_block_pass<W, kPassCareful>(j, c, buf, dbuf, start, len, fa, fast, lanes);
    j.block_flags[b] = static_cast<uint8_t>((fa.nan_total() != nan0 ? 1 : 0) |
                                            (fa.inf_total() != inf0 ? 2 : 0));
  } else {
    for (int k = 0; k < K; ++k) {
      fa.mn[k] = fast.mn[k] < fa.mn[k] ? fast.mn[k] : fa.mn[k];
      fa.mx[k] = fast.mx[k] > fa.mx[k] ? fast.mx[k] : fa.mx[k];
    }
    if (j.kind == kStatsFloat && (bmin == 0 || bmax == 0))  // only floats have signed zeros
      zero_scan_block(j, c, buf, start, len, &fa.zneg, &fa.zpos);
  }
  double l[8];
  for (int e = 0; e < 8; ++e) l[e] = lanes[e / W][e % W];
  j.block_sums[b] = combine_lanes(l);
}

// Conversion and gather space of the calling thread (kStatsChunk doubles,
// then kStatsChunk elements of up to 16 bytes), allocated on its first use
// and kept: heap, not stack, as callers may run on small thread stacks.
inline double* stats_scratch() {
  struct Scratch {
    double* p = nullptr;
    ~Scratch() { std::free(p); }
  };
  static thread_local Scratch s;
  if (s.p == nullptr) s.p = static_cast<double*>(std::malloc(kStatsChunk * (sizeof(double) + 16)));
  return s.p;
}

template <int W>
AOTI_DEBUG_ALWAYS_INLINE void stats_blocks_impl(const StatsJob& j, int64_t b0, int64_t b1,
                                                StatsPartial& out) {
  typedef typename VecOf<double, W>::type D;
  constexpr int K = 8 / W;
  constexpr int NB = W == 8 ? 4 : W == 4 ? 2 : 1;  // independent sum chains: NB * K = 4..8
  double* const dbuf = stats_scratch();
  if (dbuf == nullptr) {
    out.failed = true;
    return;
  }
  unsigned char* const buf = reinterpret_cast<unsigned char*>(dbuf + kStatsChunk);
  Cursor c;
  if (!j.contiguous) {
    c.nd = j.nd, c.itemsize = j.itemsize, c.sizes = j.sizes, c.strides = j.strides, c.base = j.base;
  }
  FloatAcc<W> fa;
  IntAcc<int64_t, W> ia;
  IntAcc<uint64_t, W> ua;
  const bool int64_or_bool = j.kind == kStatsBool || j.code == kLong || j.code == kUInt64;
  for (int64_t b = b0; b < b1;) {
    const int64_t start = b * kStatsBlock;
    const int64_t len = j.numel - start < kStatsBlock ? j.numel - start : kStatsBlock;
    D lanes[NB][K];
    for (int q = 0; q < NB; ++q)
      for (int k = 0; k < K; ++k) fill(lanes[q][k], -0.0);
    if (int64_or_bool) {
      if (!j.contiguous) c.seek(start);
      for (int64_t off = 0, m = 0; off < len; off += m) {
        const unsigned char* p = next_chunk(j, c, buf, start, off, len, &m);
        if (j.hash)   // while the chunk is at hand, as float_block_pass does
          out.hash_sum += hash_words_best<W>(p, m * j.itemsize, static_cast<uint64_t>((start + off) * j.itemsize / 8));
        if (j.kind == kStatsBool) {
          int64_t t = 0;
          for (int64_t e = 0; e < m; ++e) t += p[e] != 0;
          out.trues += t;
        } else if (j.code == kLong) {
          int64_chunk<int64_t, W>(p, m, ia, lanes[0]);
        } else {
          int64_chunk<uint64_t, W>(p, m, ua, lanes[0]);
        }
      }
      double l[8];
      for (int e = 0; e < 8; ++e) l[e] = lanes[0][e / W][e % W];
      j.block_sums[b] = combine_lanes(l);
      ++b;
    } else if (j.contiguous && has_fast_blocks(j.code) && b + NB <= b1 &&
               (b + NB) * kStatsBlock <= j.numel) {
      FastAcc<W> fast[NB];
      fast_blocks_chunk<W, NB>(j.base + start * j.itemsize, j.code, j.itemsize, kStatsBlock, fast, lanes);
      for (int q = 0; q < NB; ++q) finish_block<W>(j, c, buf, dbuf, b + q, fa, fast[q], lanes[q]);
      if (j.hash) out.hash_sum += hash_block<W>(j, c, buf, start, NB * kStatsBlock);
      b += NB;
    } else if (j.contiguous && has_fast_blocks(j.code)) {
      // a tensor's only block, or a last one no group takes: the same
      // direct loads, then its partial vector element by element
      FastAcc<W> fast;
      const unsigned char* p = j.base + start * j.itemsize;
      const int64_t whole = len - len % 8;
      fast_blocks_chunk<W, 1>(p, j.code, j.itemsize, whole, &fast, lanes);
      for (int64_t e = whole; e < len; ++e)
        fast_element<W>(element_as_double(p + e * j.itemsize, j.code), e - whole, fast, lanes[0]);
      finish_block<W>(j, c, buf, dbuf, b, fa, fast, lanes[0]);
      if (j.hash) out.hash_sum += hash_block<W>(j, c, buf, start, len);
      ++b;
    } else {
      FastAcc<W> fast;
      float_block_pass<W, kPassFast>(j, c, buf, dbuf, start, len, fa, fast, lanes[0],
                                     j.hash ? &out.hash_sum : nullptr, j.sat ? out.sat : nullptr);
      finish_block<W>(j, c, buf, dbuf, b, fa, fast, lanes[0]);
      ++b;
    }
  }
  fa.fold_into(out);
  for (int e = 0; e < 8; ++e) {
    const int k = e / W, x = e % W;
    if (ia.mn[k][x] < out.imin) out.imin = ia.mn[k][x];
    if (ia.mx[k][x] > out.imax) out.imax = ia.mx[k][x];
    if (ua.mn[k][x] < out.umin) out.umin = ua.mn[k][x];
    if (ua.mx[k][x] > out.umax) out.umax = ua.mx[k][x];
  }
}

// The hot loop, once per instruction set (same results: same operations, same order).
AOTI_DEBUG_NOINLINE inline void stats_blocks_w2(const StatsJob& j, int64_t b0, int64_t b1,
                                                StatsPartial& out) {
  stats_blocks_impl<2>(j, b0, b1, out);
}

#if AOTI_DEBUG_STATS_X86_DISPATCH
__attribute__((target("avx2"))) AOTI_DEBUG_NOINLINE inline void stats_blocks_w4(
    const StatsJob& j, int64_t b0, int64_t b1, StatsPartial& out) {
  stats_blocks_impl<4>(j, b0, b1, out);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) AOTI_DEBUG_NOINLINE inline void
stats_blocks_w8(const StatsJob& j, int64_t b0, int64_t b1, StatsPartial& out) {
  stats_blocks_impl<8>(j, b0, b1, out);
}
#endif

// 8, 4 or 2: the vector width (in doubles) this CPU runs best.  isa_limit
// caps it (tests use it to check every width gives the same bits).
inline int stats_vector_width(int isa_limit = 0) {
  int w = 2;
#if AOTI_DEBUG_STATS_X86_DISPATCH
  static const int best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return 8;
    return __builtin_cpu_supports("avx2") ? 4 : 2;
  }();
  w = best;
#endif
  if (isa_limit > 0 && w > isa_limit) w = isa_limit >= 8 ? 8 : isa_limit >= 4 ? 4 : 2;
  return w;
}

struct StatsThreadArg {
  const StatsJob* job;
  int64_t b0, b1;
  int width;
  StatsPartial* out;
};

inline void* stats_thread_main(void* p) {
  StatsThreadArg* a = static_cast<StatsThreadArg*>(p);
#if AOTI_DEBUG_STATS_X86_DISPATCH
  if (a->width == 8) return stats_blocks_w8(*a->job, a->b0, a->b1, *a->out), nullptr;
  if (a->width == 4) return stats_blocks_w4(*a->job, a->b0, a->b1, *a->out), nullptr;
#endif
  stats_blocks_w2(*a->job, a->b0, a->b1, *a->out);
  return nullptr;
}

// Logical index of the first element of block b matching pred, or -1.
template <class Pred>
inline int64_t find_in_block(const StatsJob& j, int64_t b, Pred pred) {
  std::vector<unsigned char> buf(static_cast<size_t>(kStatsChunk * 16));
  Cursor c;
  const int64_t start = b * kStatsBlock;
  const int64_t len = j.numel - start < kStatsBlock ? j.numel - start : kStatsBlock;
  if (!j.contiguous) {
    c.nd = j.nd, c.itemsize = j.itemsize, c.sizes = j.sizes, c.strides = j.strides, c.base = j.base;
    c.seek(start);
  }
  int64_t found = -1;
  for (int64_t off = 0, m = 0; off < len && found < 0; off += m) {
    const unsigned char* p = next_chunk(j, c, buf.data(), start, off, len, &m);
    for (int64_t k = 0; k < m && found < 0; ++k)
      if (pred(element_as_double(p + k * j.itemsize, j.code))) found = start + off + k;
  }
  return found;
}

inline int stats_thread_count(int64_t numel, int64_t nblocks, int max_threads) {
  if (max_threads == 1 || numel < AOTI_DEBUG_STATS_PARALLEL_MIN) return 1;
  const long hw = sysconf(_SC_NPROCESSORS_ONLN);
  int n = hw > 0 ? static_cast<int>(hw) : 1;
  if (AOTI_DEBUG_STATS_MAX_THREADS > 0 && n > AOTI_DEBUG_STATS_MAX_THREADS)
    n = AOTI_DEBUG_STATS_MAX_THREADS;
  if (max_threads > 0 && n > max_threads) n = max_threads;
  if (n > 64) n = 64;
  if (n > nblocks) n = static_cast<int>(nblocks);
  return n < 1 ? 1 : n;
}

}  // namespace detail

AOTI_DEBUG_CORE_FN Stats compute_stats(const TensorView& v, bool hash, int max_threads, int isa_limit) {
  using namespace detail;
  Stats s;
  std::memset(&s, 0, sizeof(s));
  s.dtype = v.dtype;
  s.kind = stats_kind(v.dtype);
  s.numel = numel_of(v);
  s.first_nan = s.first_inf = s.first_sat = -1;
  s.min = s.max = s.mean = __builtin_nan("");
  if (s.kind == kStatsNone || s.numel <= 0) return s;

  StatsJob j;
  j.code = v.dtype;
  j.kind = s.kind;
  j.itemsize = dtype_info(v.dtype)->itemsize;
  j.numel = s.numel;
  j.nblocks = (s.numel + kStatsBlock - 1) / kStatsBlock;
  j.hash = hash;
  // float8 kinds and float4, which never take the direct fast path (has_fast_blocks)
  j.sat = counts_saturation(v.dtype);
  int pos = 0, neg = -1;  // the bytes the decode table spells +max and -max as (float8)
  for (int b = 0; j.sat && v.dtype != kFloat4_e2m1fn_x2 && b < 256; ++b) {
    const double x = float8_table(v.dtype)[b], top = float_facts(v.dtype)->max_finite;
    if (x == top) pos = b;
    else if (x == -top) neg = b;
  }
  j.sat_pos = static_cast<uint8_t>(pos), j.sat_neg = static_cast<uint8_t>(neg >= 0 ? neg : pos);
  j.base = static_cast<const unsigned char*>(v.data);
  j.nd = collapse_dims(v, j.sizes, j.strides);
  if (j.nd == 0) j.sizes[0] = 1, j.strides[0] = 1, j.nd = 1;  // one element
  j.contiguous = j.nd == 1 && j.strides[0] == 1;

  // Small tensors (the common case in a model) touch no heap for bookkeeping.
  constexpr int64_t kInlineBlocks = 16;
  double inline_sums[kInlineBlocks];
  uint8_t inline_flags[kInlineBlocks] = {};
  std::vector<double> heap_sums;
  std::vector<uint8_t> heap_flags;
  if (j.nblocks <= kInlineBlocks) {
    j.block_sums = inline_sums, j.block_flags = inline_flags;
  } else {
    heap_sums.resize(static_cast<size_t>(j.nblocks));
    heap_flags.assign(static_cast<size_t>(j.nblocks), 0);
    j.block_sums = heap_sums.data(), j.block_flags = heap_flags.data();
  }
  const double* sums = j.block_sums;
  const uint8_t* flags = j.block_flags;

  const int width = stats_vector_width(isa_limit);
  const int nthreads = stats_thread_count(j.numel, j.nblocks, max_threads);  // <= 64
  StatsPartial one;
  StatsPartial* parts = &one;
  std::vector<StatsPartial> many;
  if (nthreads == 1) {
    StatsThreadArg arg{&j, 0, j.nblocks, width, &one};
    stats_thread_main(&arg);
  } else {
    many.resize(static_cast<size_t>(nthreads));
    parts = many.data();
    StatsThreadArg args[64];
    for (int t = 0; t < nthreads; ++t)
      args[t] = StatsThreadArg{&j, j.nblocks * t / nthreads, j.nblocks * (t + 1) / nthreads, width,
                               &parts[t]};
    run_split(stats_thread_main, args, nthreads);
  }

  for (int t = 0; t < nthreads; ++t)
    if (parts[t].failed) {  // out of memory: no statistics rather than wrong ones
      s.kind = kStatsNone;
      return s;
    }
  double total = -0.0;
  for (int64_t b = 0; b < j.nblocks; ++b) total += sums[b];
  if (hash) {
    uint64_t hash_sum = 0;
    for (int t = 0; t < nthreads; ++t) hash_sum += parts[t].hash_sum;
    s.hash = hash_finish(hash_sum, s.numel, j.itemsize);
    s.hashed = 1;
  }

  if (s.kind == kStatsBool) {
    for (int t = 0; t < nthreads; ++t) s.true_count += parts[t].trues;
    s.false_count = s.numel - s.true_count;
    return s;
  }
  if (v.dtype == kLong || v.dtype == kUInt64) {
    s.imin = INT64_MAX, s.imax = INT64_MIN, s.umin = UINT64_MAX, s.umax = 0;
    for (int t = 0; t < nthreads; ++t) {
      const StatsPartial& p = parts[t];
      if (p.imin < s.imin) s.imin = p.imin;
      if (p.imax > s.imax) s.imax = p.imax;
      if (p.umin < s.umin) s.umin = p.umin;
      if (p.umax > s.umax) s.umax = p.umax;
    }
    s.mean = total / static_cast<double>(s.numel);
    return s;
  }

  double mn = __builtin_inf(), mx = -__builtin_inf();
  bool negz = false, posz = false;
  for (int t = 0; t < nthreads; ++t) {
    const StatsPartial& p = parts[t];
    s.nan_count += p.nan;
    s.inf_count += p.inf;
    s.sat_count += p.sat[0];
    // each thread reads its blocks in order, so its first is its smallest
    if (p.sat[1] >= 0 && (s.first_sat < 0 || p.sat[1] < s.first_sat)) s.first_sat = p.sat[1];
    if (p.mn < mn) mn = p.mn;
    if (p.mx > mx) mx = p.mx;
    negz = negz || p.negz;
    posz = posz || p.posz;
  }
  const int64_t count = s.numel * values_per_element(v.dtype) - s.nan_count;  // values, not bytes
  if (count > 0) {
    // Order-free rule for zeros: -0.0 is the smaller one.
    if (mn == 0) mn = negz ? -0.0 : 0.0;
    if (mx == 0) mx = posz ? 0.0 : -0.0;
    s.min = mn, s.max = mx;
    s.mean = total / static_cast<double>(count);
  }
  if (s.kind == kStatsInt) {
    s.imin = static_cast<int64_t>(mn), s.imax = static_cast<int64_t>(mx);
    return s;
  }
  if (s.kind == kStatsUInt) {
    s.umin = static_cast<uint64_t>(mn), s.umax = static_cast<uint64_t>(mx);
    return s;
  }
  for (int64_t b = 0; b < j.nblocks && s.first_nan < 0 && s.nan_count > 0; ++b)
    if (flags[b] & 1) s.first_nan = find_in_block(j, b, [](double x) { return x != x; });
  for (int64_t b = 0; b < j.nblocks && s.first_inf < 0 && s.inf_count > 0; ++b)
    if (flags[b] & 2) s.first_inf = find_in_block(j, b, [](double x) { return std::isinf(x); });
  return s;
}

// ---- dequantized statistics (stats.h dequant_stats) --------------------------

namespace detail {

struct DequantJob {
  const unsigned char* base;  // the operand
  int32_t code;
  bool fp4;                   // float4_e2m1fn_x2: two elements a byte along K
  int64_t itemsize;
  int64_t rows, cols;         // logical (unpacked) shape
  int64_t s0, s1;             // element strides of the stored operand
  int32_t kdim;
  int32_t layout;
  int64_t block, kblocks, col_blocks;
  bool swizzled;
  const unsigned char* scales;  // the scale's elements in logical order (its own memory when dense)
  int32_t scale_code;
  int64_t scale_itemsize;
  const double* scale_table;    // a float8 scale's decode table, else nullptr
  double global;                // the tensor-wide second scale; 1 without one
};

// The scale of (outer, kb) -- kb the block along K -- ready to multiply (the
// tensor-wide second scale folded in: element * (scale * global)): tensorwise,
// per outer index, or per (outer, kb) of the scale matrix, that matrix plain
// row-major or in cuBLAS's 128x4 tiles (torch.testing's to_blocked: tile
// (outer / 128, kb / 4) of 512, inside it (outer % 32) * 16 + (outer % 128 / 32) * 4 + kb % 4).
AOTI_DEBUG_ALWAYS_INLINE int64_t dequant_scale_index(const DequantJob& j, int64_t outer, int64_t kb) {
  if (j.layout == kDequantRowwise) return outer;
  if (j.layout != kDequantBlock) return 0;
  if (!j.swizzled) return outer * j.kblocks + kb;
  return ((outer / 128) * j.col_blocks + kb / 4) * 512 + (outer % 32) * 16 + ((outer % 128) / 32) * 4 + kb % 4;
}

AOTI_DEBUG_ALWAYS_INLINE double dequant_scale_at(const DequantJob& j, int64_t k) {
  const unsigned char* p = j.scales + k * j.scale_itemsize;
  if (j.scale_table != nullptr) return j.scale_table[*p] * j.global;  // float8 kinds, e8m0 (block scales)
  return element_as_double(p, j.scale_code) * j.global;
}

// The scales of the current logical row.  kdim 1 (self): one per block of the
// row (one per row: kblocks 1); kdim 0 (mat2): one per column, for the `block`
// rows (elements of K) that share them.  Read from the scale's own memory a
// row at a time: no copy of the whole scale.
struct DequantRow {
  std::vector<double> scale;  // kdim 1: [kb]; kdim 0: [c]
  int64_t key = -1;           // kdim 1: the row; kdim 0: the row's block along K
};

AOTI_DEBUG_ALWAYS_INLINE void dequant_prepare(const DequantJob& j, int64_t r, DequantRow& row) {
  const int64_t key = j.kdim == 1 ? r : (j.layout == kDequantBlock ? r / j.block : 0);
  if (key == row.key) return;
  row.key = key;
  if (j.kdim == 1) {
    row.scale.resize(static_cast<size_t>(j.kblocks));
    if (j.layout == kDequantBlock && j.swizzled) {  // a row's scales: runs of 4, tiles 512 apart
      const int64_t first = dequant_scale_index(j, r, 0);
      for (int64_t kb = 0; kb < j.kblocks; ++kb)
        row.scale[static_cast<size_t>(kb)] = dequant_scale_at(j, first + (kb >> 2) * 512 + (kb & 3));
    } else {
      for (int64_t kb = 0; kb < j.kblocks; ++kb)
        row.scale[static_cast<size_t>(kb)] = dequant_scale_at(j, dequant_scale_index(j, r, kb));
    }
  } else {
    row.scale.resize(static_cast<size_t>(j.cols));
    for (int64_t c = 0; c < j.cols; ++c) row.scale[static_cast<size_t>(c)] = dequant_scale_at(j, dequant_scale_index(j, c, key));
  }
}

// The decode tables of one dequant_stats call: a float8 kind's 256 values, or
// float4's values of each byte, low nibble then high (two doubles a byte, so a
// byte decodes with one 16-byte copy).
struct DequantTables {
  const double* f8 = nullptr;
  double f4[256][2];
};

// Elements [c0, c0 + n) of logical row r, times their scales, into out (one
// loop a run of elements sharing a scale: decode and multiply together).
AOTI_DEBUG_ALWAYS_INLINE void dequant_segment(const DequantJob& j, const DequantTables& t, DequantRow& row, int64_t r,
                                              int64_t c0, int64_t n, double* out) {
  dequant_prepare(j, r, row);
  const double* rs = row.scale.data();
  const int64_t s1 = j.s1;
  if (!j.fp4) {
    const unsigned char* p = j.base + r * j.s0 + c0 * s1;
    const double* f8 = t.f8;
    if (j.kdim == 0) {
      for (int64_t i = 0; i < n; ++i) out[i] = f8[p[i * s1]] * rs[c0 + i];
    } else if (j.layout != kDequantBlock) {
      const double sc = rs[0];
      if (s1 == 1) {
        for (int64_t i = 0; i < n; ++i) out[i] = f8[p[i]] * sc;
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = f8[p[i * s1]] * sc;
      }
    } else {
      for (int64_t i = 0, kb = c0 / j.block; i < n; ++kb) {  // one scale per run of the same block
        const int64_t stop = (kb + 1) * j.block - c0 < n ? (kb + 1) * j.block - c0 : n;
        const double sc = rs[kb];
        if (s1 == 1) {
          for (; i < stop; ++i) out[i] = f8[p[i]] * sc;
        } else {
          for (; i < stop; ++i) out[i] = f8[p[i * s1]] * sc;
        }
      }
    }
    return;
  }
  // float4_e2m1fn_x2: element k along K is nibble k & 1 (low first) of byte k / 2
  if (j.kdim == 0) {
    const unsigned char* p = j.base + (r / 2) * j.s0 + c0 * s1;
    const int half = static_cast<int>(r & 1);
    for (int64_t i = 0; i < n; ++i) out[i] = t.f4[p[i * s1]][half] * rs[c0 + i];
    return;
  }
  const unsigned char* p = j.base + r * j.s0;
  const int64_t end = c0 + n;
  const bool blocks = j.layout == kDequantBlock;
  int64_t i = 0, c = c0;
  for (int64_t kb = blocks ? c0 / j.block : 0; c < end; kb += blocks) {  // one scale per block's run
    // (blocks are even: whole bytes)
    const int64_t stop = blocks && (kb + 1) * j.block < end ? (kb + 1) * j.block : end;
    const double sc = rs[kb];
    if (c & 1) out[i++] = t.f4[p[(c >> 1) * s1]][1] * sc, ++c;
    const unsigned char* q = p + (c >> 1) * s1;
    const int64_t pairs = (stop - c) >> 1;
    double* o = out + i;
    typename VecOf<double, 2>::type scv, v;  // a byte's two values, scaled together
    fill(scv, sc);
    for (int64_t k = 0; k < pairs; ++k) {
      load_vec(v, t.f4[q[k * s1]]);
      v *= scv;
      std::memcpy(o + 2 * k, &v, sizeof(v));
    }
    i += 2 * pairs, c += 2 * pairs;
    if (c < stop) out[i++] = t.f4[p[(c >> 1) * s1]][0] * sc, ++c;
  }
}

// A tensor's elements as doubles in logical order (a scale: small, read once).
inline bool logical_doubles(const TensorView& v, std::vector<double>& out) {
  const DtypeInfo* info = dtype_info(v.dtype);
  const int64_t n = numel_of(v);
  if (info == nullptr || v.ndim > 32 || stats_kind(v.dtype) != kStatsFloat) return false;
  out.resize(static_cast<size_t>(n));
  int64_t index[32] = {0};
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (int64_t d = 0; d < v.ndim; ++d) offset += index[d] * v.strides[d];
    out[static_cast<size_t>(k)] =
        element_as_double(static_cast<const unsigned char*>(v.data) + offset * info->itemsize, v.dtype);
    for (int64_t d = v.ndim - 1; d >= 0; --d) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
  return true;
}

// Elements [start, start + len) of the dequantized operand, produced chunk by
// chunk in logical order into dbuf and fed to pass P of the float kernel.
template <int W, int P>
AOTI_DEBUG_ALWAYS_INLINE void dequant_block_pass(const DequantJob& j, const DequantTables& table, DequantRow& row,
                                                 double* dbuf, int64_t start, int64_t len, FloatAcc<W>& fa,
                                                 FastAcc<W>& fast, typename VecOf<double, W>::type* lanes) {
  int64_t r = start / j.cols, c = start % j.cols;
  for (int64_t off = 0; off < len; off += kStatsChunk) {
    const int64_t m = len - off < kStatsChunk ? len - off : kStatsChunk;
    for (int64_t i = 0; i < m;) {  // row segments
      const int64_t take = j.cols - c < m - i ? j.cols - c : m - i;
      dequant_segment(j, table, row, r, c, take, dbuf + i);
      i += take, c += take;
      if (c == j.cols) c = 0, ++r;
    }
    float_kernel<W, P>(dbuf, m, fa, fast, lanes);
  }
}

// Every block of the dequantized operand as compute_stats takes a block: the
// fast pass (sum, min, max), redone by the careful one (NaN/Inf counts, zero
// signs) when its sum is not finite or its min or max is 0 -- the same sums
// either way; each block's lanes combined, block sums added left to right.
// One thread: the scales make an element cost more, not the passes more.
template <int W>
AOTI_DEBUG_ALWAYS_INLINE void dequant_blocks_impl(const DequantJob& j, double* dbuf, StatsPartial& out,
                                                  double* total) {
  typedef typename VecOf<double, W>::type D;
  constexpr int K = 8 / W;
  DequantTables table;
  if (j.fp4) {
    for (int b = 0; b < 256; ++b) {
      table.f4[b][0] = e2m1_value(static_cast<uint8_t>(b & 15));
      table.f4[b][1] = e2m1_value(static_cast<uint8_t>(b >> 4));
    }
  } else {
    table.f8 = float8_table(j.code);
  }
  const int64_t numel = j.rows * j.cols;
  DequantRow row;
  FloatAcc<W> fa;
  *total = -0.0;
  for (int64_t start = 0; start < numel; start += kStatsBlock) {
    const int64_t len = numel - start < kStatsBlock ? numel - start : kStatsBlock;
    D lanes[K];
    for (int k = 0; k < K; ++k) fill(lanes[k], -0.0);
    FastAcc<W> fast;
    dequant_block_pass<W, kPassFast>(j, table, row, dbuf, start, len, fa, fast, lanes);
    bool finite = true;
    double bmin = __builtin_inf(), bmax = -__builtin_inf();
    for (int e = 0; e < 8; ++e) {
      const double l = lanes[e / W][e % W];
      finite = finite && l - l == 0;
      bmin = fast.mn[e / W][e % W] < bmin ? fast.mn[e / W][e % W] : bmin;
      bmax = fast.mx[e / W][e % W] > bmax ? fast.mx[e / W][e % W] : bmax;
    }
    if (!finite || bmin == 0 || bmax == 0) {
      for (int k = 0; k < K; ++k) fill(lanes[k], -0.0);
      dequant_block_pass<W, kPassCareful>(j, table, row, dbuf, start, len, fa, fast, lanes);
    } else {
      for (int k = 0; k < K; ++k) {
        fa.mn[k] = fast.mn[k] < fa.mn[k] ? fast.mn[k] : fa.mn[k];
        fa.mx[k] = fast.mx[k] > fa.mx[k] ? fast.mx[k] : fa.mx[k];
      }
    }
    double l[8];
    for (int e = 0; e < 8; ++e) l[e] = lanes[e / W][e % W];
    *total += combine_lanes(l);
  }
  fa.fold_into(out);   // zneg/zpos stay unset here: no zero_scan
}

AOTI_DEBUG_NOINLINE inline void dequant_blocks_w2(const DequantJob& j, double* dbuf, StatsPartial& out,
                                                  double* total) {
  dequant_blocks_impl<2>(j, dbuf, out, total);
}

#if AOTI_DEBUG_STATS_X86_DISPATCH
__attribute__((target("avx2"))) AOTI_DEBUG_NOINLINE inline void dequant_blocks_w4(
    const DequantJob& j, double* dbuf, StatsPartial& out, double* total) {
  dequant_blocks_impl<4>(j, dbuf, out, total);
}
#endif

// The hot loop for this CPU's vector width, AVX2 at most: with AVX-512 it ran
// slower (35-51 ms against 22-24 for a 4096x4096 operand; the same bits for every width).
inline void dequant_blocks(const DequantJob& j, double* dbuf, StatsPartial& out, double* total, int isa_limit) {
#if AOTI_DEBUG_STATS_X86_DISPATCH
  if (stats_vector_width(isa_limit) >= 4) return dequant_blocks_w4(j, dbuf, out, total);
#else
  (void)isa_limit;
#endif
  dequant_blocks_w2(j, dbuf, out, total);
}

inline bool decodes_operand(int32_t code) {
  switch (code) {
    case kFloat8_e5m2: case kFloat8_e4m3fn: case kFloat8_e5m2fnuz: case kFloat8_e4m3fnuz:
    case kFloat4_e2m1fn_x2:
      return true;
    default:
      return false;
  }
}

}  // namespace detail

AOTI_DEBUG_CORE_FN DequantStats dequant_stats(const TensorView& operand, const TensorView& scale,
                                              const TensorView* global, const DequantSpec& spec, int isa_limit) {
  using namespace detail;
  DequantStats s;
  std::memset(&s, 0, sizeof(s));
  s.min = s.max = s.mean = __builtin_nan("");
  const bool fp4 = operand.dtype == kFloat4_e2m1fn_x2;
  const int64_t n = numel_of(operand);
  s.numel = fp4 ? 2 * n : n;
  if (n <= 0) return s.status = kDequantEmpty, s;
  const bool host = operand.device_type == 0 && operand.data != nullptr && scale.device_type == 0 &&
                    scale.data != nullptr &&
                    (global == nullptr || (global->device_type == 0 && global->data != nullptr));
  if (!host) return s.status = kDequantDevice, s;
  if (!decodes_operand(operand.dtype) || stats_kind(scale.dtype) != kStatsFloat ||
      (global != nullptr && stats_kind(global->dtype) != kStatsFloat))
    return s.status = kDequantDtype, s;
  if (operand.ndim != 2 || (spec.kdim != 0 && spec.kdim != 1)) return s.status = kDequantMismatch, s;
  DequantJob j;
  j.base = static_cast<const unsigned char*>(operand.data);
  j.code = operand.dtype, j.fp4 = fp4, j.itemsize = 1;
  j.rows = operand.sizes[0] * (fp4 && spec.kdim == 0 ? 2 : 1);
  j.cols = operand.sizes[1] * (fp4 && spec.kdim == 1 ? 2 : 1);
  j.s0 = operand.strides[0], j.s1 = operand.strides[1];
  j.kdim = spec.kdim, j.layout = spec.layout;
  const int64_t outer = spec.kdim == 1 ? j.rows : j.cols, kdim_size = spec.kdim == 1 ? j.cols : j.rows;
  j.block = spec.block > 0 ? spec.block : 1;
  j.kblocks = spec.layout == kDequantBlock ? (kdim_size + j.block - 1) / j.block : 1;
  j.col_blocks = (j.kblocks + 3) / 4;
  j.swizzled = spec.swizzled != 0;
  const int64_t want = spec.layout == kDequantTensorwise ? 1
                       : spec.layout == kDequantRowwise  ? outer
                       : spec.layout == kDequantBlock && spec.block > 0
                           ? (j.swizzled ? (outer + 127) / 128 * 128 * j.col_blocks * 4 : outer * j.kblocks)
                           : -1;
  if (want < 0 || numel_of(scale) != want || (global != nullptr && numel_of(*global) != 1))
    return s.status = kDequantMismatch, s;
  std::vector<double> gathered, globals;  // a scale not dense in logical order: its elements copied
  const bool dense = is_contiguous(scale);
  if ((!dense && !logical_doubles(scale, gathered)) || (global != nullptr && !logical_doubles(*global, globals)))
    return s.status = kDequantDtype, s;
  j.scales = dense ? static_cast<const unsigned char*>(scale.data) : reinterpret_cast<const unsigned char*>(gathered.data());
  j.scale_code = dense ? scale.dtype : static_cast<int32_t>(kDouble);
  j.scale_itemsize = dense ? dtype_info(scale.dtype)->itemsize : 8;
  // the float8 kinds (e8m0 too) decode through their table; float4 is no scale format
  j.scale_table = counts_saturation(j.scale_code) && j.scale_code != kFloat4_e2m1fn_x2 ? float8_table(j.scale_code)
                                                                                        : nullptr;
  j.global = global != nullptr ? globals[0] : 1.0;
  double* const dbuf = stats_scratch();
  if (dbuf == nullptr) return s.status = kDequantMemory, s;
  StatsPartial p;
  double total;
  dequant_blocks(j, dbuf, p, &total, isa_limit);
  s.nan_count = p.nan, s.inf_count = p.inf;
  const int64_t count = s.numel - s.nan_count;
  if (count > 0) {  // the order-free rule for zeros, as compute_stats
    s.min = p.mn == 0 ? (p.negz ? -0.0 : 0.0) : p.mn;
    s.max = p.mx == 0 ? (p.posz ? 0.0 : -0.0) : p.mx;
    s.mean = total / static_cast<double>(count);
  }
  return s;
}

// ---- the NaN/Inf check's clean path ----------------------------------------
//
// all_finite() answers one question -- does this CPU tensor hold no NaN (and,
// with count_inf, no Inf)? -- on the raw bits, with no allocation: NaN and
// Inf are the values whose magnitude bits (sign cleared) exceed, or with
// count_inf reach, the +Inf pattern.  Contiguous tensors are read in blocks
// whose largest magnitude is taken with vector max; only a block that finds
// something stops the scan, so a clean tensor is read once at full width.  The counts and
// first index a report needs come from compute_stats(), on the bad path only.

namespace detail {

constexpr int64_t kFiniteBlock = 512;  // elements between early-exit tests

// Bit layout of a floating dtype the scan reads directly.
struct FiniteBits {
  int itemsize;      // 2, 4 or 8
  uint64_t absmask;  // every bit but the sign
  uint64_t inf;      // +Inf
};

inline bool finite_bits(int32_t code, FiniteBits* out) {
  switch (code) {
    case kFloat: *out = {4, 0x7fffffffu, 0x7f800000u}; return true;
    case kDouble: *out = {8, 0x7fffffffffffffffull, 0x7ff0000000000000ull}; return true;
    case kHalf: *out = {2, 0x7fffu, 0x7c00u}; return true;
    case kBFloat16: *out = {2, 0x7fffu, 0x7f80u}; return true;
    default: return false;
  }
}

// Does any of n contiguous elements have magnitude bits > lim?  S: the signed
// integer of the element's width (magnitudes are non-negative, so a signed
// compare serves and SSE2 has one); VB: vector bytes.
template <class S, int VB>
AOTI_DEBUG_ALWAYS_INLINE bool any_above(const unsigned char* p, int64_t n, S mask, S lim) {
  constexpr int W = VB / static_cast<int>(sizeof(S));
  typedef typename VecOf<S, W>::type V;
  V vmask, vlim;
  fill(vmask, mask), fill(vlim, lim);
  int64_t i = 0;
  for (; i + kFiniteBlock <= n; i += kFiniteBlock) {
    // the largest magnitude of the block, in four independent chains
    V m0 = {}, m1 = {}, m2 = {}, m3 = {};
    for (int64_t k = 0; k < kFiniteBlock; k += 4 * W) {
      V a, b, c, d;
      load_vec(a, p + (i + k) * sizeof(S));
      load_vec(b, p + (i + k + W) * sizeof(S));
      load_vec(c, p + (i + k + 2 * W) * sizeof(S));
      load_vec(d, p + (i + k + 3 * W) * sizeof(S));
      a &= vmask, b &= vmask, c &= vmask, d &= vmask;
      m0 = a > m0 ? a : m0;
      m1 = b > m1 ? b : m1;
      m2 = c > m2 ? c : m2;
      m3 = d > m3 ? d : m3;
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    m0 = m2 > m0 ? m2 : m0;
    const V over = (V)(m0 > vlim);
    S any = 0;
    for (int j = 0; j < W; ++j) any |= over[j];
    if (any) return true;
  }
  S any = 0;
  for (; i < n; ++i) {
    S v;
    std::memcpy(&v, p + i * sizeof(S), sizeof(S));
    any |= (v & mask) > lim;
  }
  return any != 0;
}

template <int VB>
AOTI_DEBUG_ALWAYS_INLINE bool any_above_bits(const unsigned char* p, int64_t n, const FiniteBits& b,
                                             uint64_t lim) {
  switch (b.itemsize) {
    case 2: return any_above<int16_t, VB>(p, n, static_cast<int16_t>(b.absmask), static_cast<int16_t>(lim));
    case 4: return any_above<int32_t, VB>(p, n, static_cast<int32_t>(b.absmask), static_cast<int32_t>(lim));
    default: return any_above<int64_t, VB>(p, n, static_cast<int64_t>(b.absmask), static_cast<int64_t>(lim));
  }
}

AOTI_DEBUG_NOINLINE inline bool any_above_w2(const unsigned char* p, int64_t n, const FiniteBits& b,
                                             uint64_t lim) {
  return any_above_bits<16>(p, n, b, lim);
}
#if AOTI_DEBUG_STATS_X86_DISPATCH
__attribute__((target("avx2"))) AOTI_DEBUG_NOINLINE inline bool any_above_w4(
    const unsigned char* p, int64_t n, const FiniteBits& b, uint64_t lim) {
  return any_above_bits<32>(p, n, b, lim);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) AOTI_DEBUG_NOINLINE inline bool
any_above_w8(const unsigned char* p, int64_t n, const FiniteBits& b, uint64_t lim) {
  return any_above_bits<64>(p, n, b, lim);
}
#endif

inline bool any_above_dispatch(const unsigned char* p, int64_t n, const FiniteBits& b, uint64_t lim,
                               int width) {
#if AOTI_DEBUG_STATS_X86_DISPATCH
  if (width == 8) return any_above_w8(p, n, b, lim);
  if (width == 4) return any_above_w4(p, n, b, lim);
#endif
  (void)width;
  return any_above_w2(p, n, b, lim);
}

struct FiniteSlice {
  const unsigned char* p;
  int64_t n;
  const FiniteBits* bits;
  uint64_t lim;
  int width;
  bool found;
};

inline void* finite_thread_main(void* arg) {
  FiniteSlice* s = static_cast<FiniteSlice*>(arg);
  s->found = any_above_dispatch(s->p, s->n, *s->bits, s->lim, s->width);
  return nullptr;
}

// A large contiguous tensor: the statistics core's threads, each on a slice.
inline bool any_above_parallel(const unsigned char* p, int64_t n, const FiniteBits& b, uint64_t lim,
                               int width, int nthreads) {
  FiniteSlice slices[64];
  for (int t = 0; t < nthreads; ++t) {
    const int64_t lo = n * t / nthreads, hi = n * (t + 1) / nthreads;
    slices[t] = FiniteSlice{p + lo * b.itemsize, hi - lo, &b, lim, width, false};
  }
  run_split(finite_thread_main, slices, nthreads);
  bool found = false;
  for (int t = 0; t < nthreads; ++t) found = found || slices[t].found;
  return found;
}

inline bool element_above(const unsigned char* p, const FiniteBits& b, uint64_t lim) {
  switch (b.itemsize) {
    case 2: { uint16_t x; std::memcpy(&x, p, 2); return (x & b.absmask) > lim; }
    case 4: { uint32_t x; std::memcpy(&x, p, 4); return (x & b.absmask) > lim; }
    default: { uint64_t x; std::memcpy(&x, p, 8); return (x & b.absmask) > lim; }
  }
}

// A strided view, its dims collapsed (collapse_dims, nd >= 1): an odometer
// over the outer dims.  Rows that are contiguous (Inductor's transposed and
// sliced buffers) are scanned as vectors, others element by element.
inline bool any_above_strided(const unsigned char* base, const int64_t* sizes, const int64_t* strides,
                              int nd, const FiniteBits& b, uint64_t lim, int width) {
  int64_t idx[64] = {};
  const int last = nd - 1;
  const int64_t row_len = sizes[last], step = strides[last] * b.itemsize;
  const unsigned char* row = base;
  for (;;) {
    if (strides[last] == 1) {
      if (row_len >= kFiniteBlock ? any_above_dispatch(row, row_len, b, lim, width)
                                  : any_above_bits<16>(row, row_len, b, lim))
        return true;
    } else {
      for (int64_t k = 0; k < row_len; ++k)
        if (element_above(row + k * step, b, lim)) return true;
    }
    int d = last - 1;
    for (; d >= 0; --d) {
      row += strides[d] * b.itemsize;
      if (++idx[d] < sizes[d]) break;
      row -= sizes[d] * strides[d] * b.itemsize;
      idx[d] = 0;
    }
    if (d < 0) return false;
  }
}

}  // namespace detail

AOTI_DEBUG_CORE_FN bool all_finite(const TensorView& v, bool count_inf) {
  using namespace detail;
  FiniteBits b;
  if (v.dtype == kFloat4_e2m1fn_x2) return true;  // e2m1 spells no NaN and no Inf
  if (!finite_bits(v.dtype, &b)) {
    const int32_t kind = stats_kind(v.dtype);
    if (kind != kStatsFloat && kind != kStatsComplex) return true;
    return !holds_bad(compute_stats(v), count_inf);
  }
  const uint64_t lim = count_inf ? b.inf - 1 : b.inf;
  const unsigned char* p = static_cast<const unsigned char*>(v.data);
  const int64_t n = numel_of(v);
  if (n <= 0) return true;
  int64_t sizes[64], strides[64];
  const int nd = collapse_dims(v, sizes, strides);
  if (nd > 1 || (nd == 1 && strides[0] != 1))
    return !any_above_strided(p, sizes, strides, nd, b, lim, stats_vector_width());
  if (n < kFiniteBlock) return !any_above_bits<16>(p, n, b, lim);  // tiny: inline, no dispatch
  const int width = stats_vector_width();
  const int nthreads = stats_thread_count(n, (n + kStatsBlock - 1) / kStatsBlock, 0);
  if (nthreads > 1) return !any_above_parallel(p, n, b, lim, width, nthreads);
  return !any_above_dispatch(p, n, b, lim, width);
}

AOTI_DEBUG_NAMESPACE_END

#if defined(AOTI_DEBUG_STATS_POP_GCC)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#undef AOTI_DEBUG_STATS_POP_GCC
#elif defined(AOTI_DEBUG_STATS_POP_CLANG)
#pragma float_control(pop)
#undef AOTI_DEBUG_STATS_POP_CLANG
#endif
