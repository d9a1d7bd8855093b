// The statistics core of docs/log-format.md section 3.
//
// One pass over the elements in logical (row-major) order, honouring sizes,
// strides (0 and negative included) and the view's data pointer.  The sum
// behind `mean` is accumulated in double in a fixed order -- blocks of 65536
// logical elements; inside a block element i goes to lane i % 8; lanes
// combined ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); block sums added left to
// right; every accumulator starts at -0.0 (the exact additive identity) -- so
// the bits never depend on the thread count or the instruction set.
// float4_e2m1fn_x2 is two e2m1 values a byte, low nibble first: its blocks
// are 65536 bytes, 131072 values, summed in value order (the same rule).
//
// Speed.  The 8 lanes live in native-width vectors (GCC/Clang vector
// extensions), so the inner loops are branchless SIMD.  Each block first gets
// a fast pass (sum, min, max only); the rare block whose sum comes out
// non-finite (it holds NaN or Inf) is redone by the careful pass that also
// counts them, and a block whose min or max is 0 gets its zero signs checked
// on the raw bits: the same sums either way, so results never depend on the
// path.  A lane's sum is one serial chain (the order is the contract), so
// contiguous float32/float64/bfloat16/float16 tensors run several blocks
// side by side; other dtypes and strided tensors go through small chunks
// converted to double.  Large tensors split their blocks over threads:
// min/max/counts merge in any order, block sums are kept per block and folded
// in order.  An artifact's wrapper is often built at -O1 without -march, so on
// x86-64 the hot loop exists for SSE2, AVX2 and AVX-512 and is picked at run
// time, and this header pins its own optimisation and IEEE options (GCC)
// whatever the includer's flags (Inductor passes -fno-signed-zeros and friends).
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dtypes.h"

AOTI_DEBUG_NAMESPACE_BEGIN

// Result of compute_stats().  Plain data: _native.py mirrors this layout.
struct Stats {
  int32_t kind;       // detail::StatsKind
  int32_t dtype;      // c10::ScalarType code
  int64_t numel;
  double min;         // floating: min/max/mean; complex: of |z|
  double max;
  double mean;        // also for integer kinds
  int64_t imin;       // signed integer kinds
  int64_t imax;
  uint64_t umin;      // unsigned integer kinds
  uint64_t umax;
  int64_t nan_count;
  int64_t inf_count;
  int64_t true_count;
  int64_t false_count;
  int64_t first_nan;  // logical flat index, -1 when none
  int64_t first_inf;
  uint64_t hash;      // content hash (section 3.1), valid when hashed != 0
  int64_t hashed;
  int64_t sat_count;  // elements at the format's largest finite magnitude (counts_saturation dtypes)
  int64_t first_sat;  // logical flat index of the first of them, -1 when none
};

// What the NaN/Inf check fails on: NaN, with count_inf Inf too, with
// count_sat saturated values too (AOTI_DEBUG_NAN_CHECK_SAT).
inline bool holds_bad(const Stats& s, bool count_inf, bool count_sat = false) {
  return s.nan_count > 0 || (count_inf && s.inf_count > 0) || (count_sat && s.sat_count > 0);
}

// Their bodies, and the statistics core behind them, are in stats-inl.h: a
// wrapper linked with the core object (config.h) parses none of it.

// Computes the section-3 statistics of a CPU tensor, with hash its content
// hash too (section 3.1; only records print it).  max_threads: 0 = the
// default policy, 1 = this thread only.  isa_limit: 0 = best vector width,
// else at most that many doubles per vector.  Results never depend on either.
AOTI_DEBUG_CORE_DECL Stats compute_stats(const TensorView& v, bool hash = false, int max_threads = 0,
                                         int isa_limit = 0);

// True when the CPU tensor `v` holds no NaN (and, with count_inf, no Inf).
// Dtypes without NaN are always finite; the rarer floating formats (float8,
// complex) are decided by compute_stats, with the same answer.
AOTI_DEBUG_CORE_DECL bool all_finite(const TensorView& v, bool count_inf);

// ---- dequantized statistics (docs/log-format.md 3.3) ----------------------

// How an operand of a scaled matmul is scaled: which scale element multiplies
// element (r, c) of the operand (float4_e2m1fn_x2: unpacked, two a byte along K).
enum DequantLayout : int32_t {
  kDequantTensorwise = 1,  // one scale for the whole operand
  kDequantRowwise = 2,     // one per row of self (M,1) / per column of mat2 (1,N): per outer index
  kDequantBlock = 3,       // one per `block` elements along K: the (outer, ceil(K/block)) matrix
};

struct DequantSpec {
  int32_t layout;    // DequantLayout
  int32_t block;     // kDequantBlock: elements per scale along K (32 MXFP8/MXFP4, 16 NVFP4)
  int32_t swizzled;  // kDequantBlock: the scale matrix in cuBLAS's 128x4 tile layout (SWIZZLE_32_4_4)
  int32_t kdim;      // the operand's contraction dimension: 1 for self (M,K), 0 for mat2 (K,N)
};

// Why dequant_stats computed nothing (kDequantDone: it did).
enum DequantStatus : int32_t {
  kDequantDone = 0,
  kDequantEmpty = 1,     // no elements
  kDequantDevice = 2,    // not a host tensor
  kDequantDtype = 3,     // an operand or scale format it does not decode
  kDequantMismatch = 4,  // the shapes do not fit the layout (not as the artifact was compiled for)
  kDequantMemory = 5,    // out of memory
};

// Result of dequant_stats().  Plain data: native/core.py mirrors this layout.
struct DequantStats {
  int32_t status;  // DequantStatus
  int32_t pad;
  int64_t numel;   // dequantized elements
  double min;      // the floating rules of section 3
  double max;
  double mean;
  int64_t nan_count;
  int64_t inf_count;
};

// The section-3 floating statistics of element * (scale(element) [* global])
// over a 2-D CPU operand in logical (row-major) order, in one pass over its
// elements and its scales (no product tensor): the same summation order as
// compute_stats, so equal to compute_stats of the product materialised in
// double.  Honours the strides of the operand and the scales.  `global`: a
// second, one-element scale (NVFP4's tensor-wide float32), or null.  isa_limit
// as compute_stats' (results never depend on it).
AOTI_DEBUG_CORE_DECL DequantStats dequant_stats(const TensorView& operand, const TensorView& scale,
                                                const TensorView* global, const DequantSpec& spec,
                                                int isa_limit = 0);

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "stats-inl.h"
#endif
