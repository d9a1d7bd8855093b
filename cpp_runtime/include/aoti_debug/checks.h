// Input guards and NaN/Inf checks for generated AOTI wrappers.
//
// Both report through the normal AOTI error path: a std::runtime_error
// thrown from run_impl reaches a Python caller as RuntimeError and a C++
// caller of AOTIModelPackageLoader::run as an exception, with this text.
// Neither aborts the process.  Messages are specified in docs/checks.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "detail/format.h"
#include "launch.h"
#include "detail/poison.h"
#include "detail/sizeexpr.h"
#include "detail/stats.h"
#if AOTI_DEBUG_ENABLE_DUMPS
#include "detail/blackbox.h"
#endif
#if AOTI_DEBUG_ENABLE_MEMCHECK
#include "detail/memcheck.h"
#endif

AOTI_DEBUG_NAMESPACE_BEGIN

// ---- input guards -----------------------------------------------------------

// Collects every violation of one run's inputs, then fails once with all.
class InputGuard {
 public:
  static constexpr int32_t kMetaDevice = 14;  // c10::DeviceType::Meta

  explicit InputGuard(const Model& m) : model_(m) {}

  bool rank(const char* label, const Value& v, int64_t expected);

  void dtype(const char* label, const Value& v, int32_t expected);

  // index -1: any index of that device type.
  void device(const char* label, const Value& v, int32_t type, int32_t index);

  int64_t size(const Value& v, int d) const { return v.t.sizes[d]; }

  void static_dim(const char* label, const Value& v, int d, int64_t expected);

  // A dynamic dimension bound to a symbol: its compiled range; false outside it, and
  // nothing computed from the symbol is checked then (a relation over sizes out of range
  // may divide by zero).  `below`: appended when the size is under `lo` (why the
  // declared minimum was not compiled for)
  bool range(const char* label, const Value& v, int d, int64_t lo, int64_t hi, const char* symbol,
             const char* below = "");

  // A dimension that must equal an expression of symbols bound earlier.
  void equals(const char* label, const Value& v, int d, detail::sizeexpr::Int expected, const char* expr);

  // A relation between symbols recorded by export (e.g. Eq(Mod(s0, 8), 0)).
  void relation(detail::sizeexpr::Bool holds, const char* text, const std::string& values);

  // A stride the compiled kernels index with (only dimensions of size > 1).
  void stride(const char* label, const Value& v, int d, int64_t expected);
  void stride(const char* label, const Value& v, int d, detail::sizeexpr::Int expected, const char* expr);

  // A check the compile could not express (said once, at run time as at compile time).
  void left_out(const Run& run, const char* what) const {
    model_.tell(run.level, "input-check", std::string("not checked: ") + what, true);
  }

  // Kernels compiled for aligned inputs (Triton's 16-byte specialisation).
  void aligned(const char* label, const Value& v, int64_t bytes);

  void finite(const char* label, const Value& v, bool count_inf);

  bool ok() const { return problems_.empty(); }
  // Strides are only worth checking while an input's shape and dtype are right.
  size_t count() const { return problems_.size(); }

  // Writes the offending inputs at level >= 1 and throws with every violation.
  void finish(const Run& run, const char* const* labels, Values inputs);

#if AOTI_DEBUG_ENABLE_STATS
  static std::string counts(const Stats& s, bool count_inf, bool count_sat = false) {
    std::string out = std::to_string(s.nan_count) + " NaN";
    if (count_inf) out += (count_sat ? ", " : " and ") + std::to_string(s.inf_count) + " Inf";
    if (count_sat) out += " and " + std::to_string(s.sat_count) + " saturated";
    return out;
  }
  static int64_t first_bad(const Stats& s, bool count_inf, bool count_sat = false) {
    int64_t first = s.first_nan;
    if (count_inf && s.first_inf >= 0 && (first < 0 || s.first_inf < first)) first = s.first_inf;
    if (count_sat && s.sat_count > 0 && s.first_sat >= 0 && (first < 0 || s.first_sat < first))
      first = s.first_sat;
    return first;
  }
#endif

 private:
  static std::string dtype_text(int32_t code) {
    const char* name = detail::dtype_name(code);
    return name ? std::string("torch.") + name : "dtype code " + std::to_string(code);
  }
  static std::string dim_text(const char* label, int d) {
    return std::string(label) + ".shape[" + std::to_string(d) + "]";
  }
  void fail(std::string text) { problems_.push_back(std::move(text)); }

  const Model& model_;
  std::vector<std::string> problems_;
};

// ---- NaN/Inf checks after every launch --------------------------------------

// One per run.  `on` is the single branch a launch pays when the check was
// compiled in but switched off at run time.
class NanChecks {
 public:
  NanChecks(const Model& m, const Run& run)
      : on(m.nan_check().action != detail::kNanOff), model_(m), run_(run),
        raise_(m.nan_check().action == detail::kNanRaise), count_inf_(m.nan_check().count_inf),
        count_sat_(m.nan_check_sat()) {}

  const bool on;

  // Model inputs: their finiteness is what the first launches read.
  void inputs(Values vals);

  // After a launch, the clean path: `outs` holds the site's arguments in
  // Site::args order with the ones it only reads left as nullptr (they are not
  // even described unless something is wrong).  Scans each output once
  // (all_finite), allocates nothing; false sends the caller to after().
  bool clean(const Site& site, Values outs);

  // After a launch whose outputs are not all clean: `args` holds every site
  // argument; `sources[k]` is where output k was made, `file:line, module
  // a.b.c` as the codegen formatted it for both runtimes (format.where in
  // Python; "" = the site's line).  Statistics, taint and reports.
  void after(const Site& site, const char* const* sources, Values args);

  // After a launch that reads scales (ArgSpec::scale), before its outputs: a scale
  // holding a zero, NaN or Inf is a finding named at this launch (a zero scale
  // leaves no NaN behind).  `args`: every site argument.
  void scales(const Site& site, Values args);

  // End of run: the summary line, and the deferred error when every failing
  // launch only propagated NaN/Inf it was given.
  void finish();

 private:
  // Device tensors through their own statistics (a NaN in a CUDA input must
  // not be blamed on the first launch that reads it); what cannot be read
  // (no statistics, CUDA graph capture) counts as finite.
  bool is_finite(const Value& v) const {
#if AOTI_DEBUG_ENABLE_STATS
    if (v.kind != Value::kTensor || v.t.data == nullptr) return true;
    if (v.t.device_type != 0) {  // fetched with the launch's others when it could be
      if (const Stats* kept = memo_for_launch(v.t)) return !holds_bad(*kept, count_inf_, count_sat_);
      Stats s{};
      const char* reason = nullptr;
      return !detail::device_stats(v, &s, &reason) || !holds_bad(s, count_inf_, count_sat_);
    }
    // the raw-bit scan sees no saturation: a float8 tensor then gets its statistics
    if (count_sat_ && detail::counts_saturation(v.t.dtype)) return !holds_bad(compute_stats(v.t), count_inf_, true);
    return all_finite(v.t, count_inf_);
#else
    (void)v;
    return true;
#endif
  }

  // What the statistics memo holds for `v` from this run's current launch
  // (the launch-end record, clean(), after()).
  const Stats* memo_for_launch(const TensorView& v) const;

#if AOTI_DEBUG_ENABLE_STATS
  // The statistics memo of this launch: what its launch-end record read (level
  // 5), or else its device outputs fetched together now (empty when none).
  detail::StatsMemo& launch_memo(const Site& site, Values outs) const;
#endif

  // Buffers known to hold NaN/Inf, by data pointer: model inputs found bad and
  // outputs last written bad.  Clean buffers are not kept -- an input a launch
  // only reads is unchanged since it was written, so the bad path scans it
  // again -- and a run that stays clean never touches this.
  bool known_bad(const void* p) const {
    for (const void* q : bad_)
      if (q == p) return true;
    return false;
  }
  void set_bad(const void* p, bool bad) {
    if (p == nullptr) return;
    for (size_t i = 0; i < bad_.size(); ++i)
      if (bad_[i] == p) {
        if (!bad) bad_[i] = bad_.back(), bad_.pop_back();
        return;
      }
    if (bad) bad_.push_back(p);
  }

#if AOTI_DEBUG_ENABLE_STATS
  void report(const Site& site, const char* buffer, const char* source, const Stats& s,
              const std::vector<std::string>& tainted, bool poison, Values args, int32_t dtype);
#endif
  // A finding: told, thrown at its origin under `raise`, else kept for the summary.
  // `scale`: what a bad scale held (kZero | kNan | kInf); 0: an output's finding, NaN/Inf or,
  // `saturated`, saturated values alone, of a float8 (kFloat8) or float4 (kFloat4) format.
  static constexpr int kZero = 1, kNan = 2, kInf = 4;
  static constexpr int kFloat8 = 1, kFloat4 = 2;
  void fail(const Site& site, const std::string& msg, bool origin, Values args, int scale = 0,
            int saturated = 0);

  const Model& model_;
  const Run& run_;
  const bool raise_;
  const bool count_inf_;
  const bool count_sat_;  // AOTI_DEBUG_NAN_CHECK_SAT: saturated float8 values count too
  // Keyed by data pointer, not name: the wrapper reuses a buffer under a new
  // name (`auto buf10 = std::move(buf7);`), and model inputs have user labels.
  std::vector<const void*> bad_;
  std::vector<std::string> failures_;  // one per bad output
  // one per bad launch: [0] those that wrote NaN/Inf, [1] those that wrote saturated float8
  // or float4 values and no NaN/Inf, [2] those that read a bad scale (the summary counts them
  // apart)
  std::vector<std::string> kernels_[3];
  int64_t failed_launch_[3] = {-1, -1, -1};
  int scale_found_ = 0;  // what the bad scales held: kZero | kNan | kInf
  int sat_found_ = 0;    // the formats of the saturated outputs: kFloat8 | kFloat4
};

// ---- an extern kernel's or custom op's outputs against the graph's plan ------

// The graph plans each output of an extern kernel or custom op (shape,
// strides, dtype) from the op's fake (register_fake, a Meta kernel), and the
// launches after it index the tensor with that plan: a fake that disagrees
// with its kernel makes a later kernel read or write out of bounds.  On while
// the input guard or the memory check is; raises under the guard or
// memcheck=raise, else one note per mismatch (docs/checks.md).
class PlanChecks {
 public:
  PlanChecks(const Model& m, const Run& run)
      : on(m.check_inputs() || m.memcheck() != detail::kNanOff), model_(m), run_(run),
        raise_(m.check_inputs() || m.memcheck() == detail::kNanRaise) {}

  const bool on;

  // Argument k of the launch (`args`: every site argument) against its plan:
  // `planned` holds ndim sizes then ndim strides (an undefined one is not
  // known here and not compared); `dtype` -1: not compared.
  void output(const Site& site, Values args, int k, int32_t dtype, int ndim,
              const detail::sizeexpr::Int* planned);

 private:
  const Model& model_;
  const Run& run_;
  const bool raise_;
};

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "checks-inl.h"
#endif
