// checks.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  checks.h includes it at its end wherever the bodies are
// compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core
// object (src/core.cpp).
#pragma once

#include "checks.h"

AOTI_DEBUG_NAMESPACE_BEGIN

AOTI_DEBUG_CORE_FN bool InputGuard::rank(const char* label, const Value& v, int64_t expected) {
  if (v.kind != Value::kTensor) {
    fail(std::string(label) + " is not a tensor");
    return false;
  }
  if (v.t.ndim == expected) return true;
  fail(std::string(label) + ".dim() is " + std::to_string(v.t.ndim) + ", expected " +
       std::to_string(expected));
  return false;
}

AOTI_DEBUG_CORE_FN void InputGuard::dtype(const char* label, const Value& v, int32_t expected) {
  if (v.t.dtype != expected)
    fail(std::string(label) + ".dtype is " + dtype_text(v.t.dtype) + ", expected " +
         dtype_text(expected));
}

AOTI_DEBUG_CORE_FN void InputGuard::device(const char* label, const Value& v, int32_t type, int32_t index) {
  if (v.t.device_type == type && (index < 0 || v.t.device_index == index)) return;
  std::string got, want;
  detail::append_device(got, v.t.device_type, v.t.device_index);
  detail::append_device(want, type, index < 0 ? 0 : index);
  if (index < 0 && type != 0) want = want.substr(0, want.find(':'));
  if (v.t.device_type == kMetaDevice) got = got.substr(0, got.find(':'));  // meta has no index
  fail(std::string(label) + ".device is " + got + ", expected " + want);
}

AOTI_DEBUG_CORE_FN void InputGuard::static_dim(const char* label, const Value& v, int d, int64_t expected) {
  if (v.t.sizes[d] != expected)
    fail(dim_text(label, d) + " is " + std::to_string(v.t.sizes[d]) + ", expected " +
         std::to_string(expected));
}

AOTI_DEBUG_CORE_FN bool InputGuard::range(const char* label, const Value& v, int d, int64_t lo, int64_t hi, const char* symbol,
                                          const char* below) {
  const int64_t got = v.t.sizes[d];
  if (got >= lo && got <= hi) return true;
  fail(dim_text(label, d) + " is " + std::to_string(got) +
       ", but this artifact was compiled for " + std::to_string(lo) + " <= " + symbol +
       " <= " + (hi == INT64_MAX ? std::string("inf") : std::to_string(hi)) + (got < lo ? below : ""));
  return false;
}

AOTI_DEBUG_CORE_FN void InputGuard::equals(const char* label, const Value& v, int d, detail::sizeexpr::Int expected,
                                           const char* expr) {
  const int64_t got = v.t.sizes[d];
  if (expected.ok && got == expected.v) return;
  fail(dim_text(label, d) + " is " + std::to_string(got) + ", but this artifact was compiled for " +
       dim_text(label, d) + " == " + expr +
       (expected.ok ? " (= " + std::to_string(expected.v) + " here)"
                    : std::string(", which these sizes leave undefined (a division by zero or an overflow)")));
}

AOTI_DEBUG_CORE_FN void InputGuard::relation(detail::sizeexpr::Bool holds, const char* text, const std::string& values) {
  if (!holds.ok)
    fail(std::string("the inputs leave the relation ") + text + " this artifact was compiled for undefined (" +
         values + ": a division by zero or an overflow), so they are outside what it was compiled for");
  else if (!holds.v)
    fail(std::string("the inputs break the relation ") + text + " this artifact was compiled for (" +
         values + ")");
}

AOTI_DEBUG_CORE_FN void InputGuard::stride(const char* label, const Value& v, int d, int64_t expected) {
  if (v.t.sizes[d] <= 1 || v.t.strides[d] == expected) return;
  std::string got, want;
  detail::append_tuple(got, v.t.strides, v.t.ndim);
  fail(std::string(label) + ".stride(" + std::to_string(d) + ") is " +
       std::to_string(v.t.strides[d]) + ", but the compiled kernels index it with stride " +
       std::to_string(expected) + " (strides are " + got + ")");
}

AOTI_DEBUG_CORE_FN void InputGuard::stride(const char* label, const Value& v, int d, detail::sizeexpr::Int expected,
                                           const char* expr) {
  if (expected.ok) return stride(label, v, d, expected.v);
  if (v.t.sizes[d] <= 1) return;
  fail(std::string(label) + ".stride(" + std::to_string(d) + ") is " + std::to_string(v.t.strides[d]) +
       ", but the compiled kernels index it with stride " + expr +
       ", which these sizes leave undefined (a division by zero or an overflow)");
}

AOTI_DEBUG_CORE_FN void InputGuard::aligned(const char* label, const Value& v, int64_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.t.data);
  if (p % static_cast<uintptr_t>(bytes) == 0) return;
  fail(std::string(label) + ".data_ptr() is " + std::to_string(p % bytes) + " bytes past a " +
       std::to_string(bytes) + "-byte boundary, but the compiled kernels assume " +
       std::to_string(bytes) + "-byte aligned data (pass a contiguous copy: " + label +
       ".clone())");
}

AOTI_DEBUG_CORE_FN void InputGuard::finite(const char* label, const Value& v, bool count_inf) {
#if AOTI_DEBUG_ENABLE_STATS
  if (model_.nan_check().action == detail::kNanOff) return;  // the NaN check switched off at run time
  Stats s{};
  const char* reason = nullptr;
  if (v.t.device_type == 0) {
    s = compute_stats(v.t);
  } else if (!detail::device_stats(v, &s, &reason)) {
    return;  // unreadable here (e.g. during CUDA graph capture): the launch checks cover it
  }
  if (holds_bad(s, count_inf))
    fail(std::string(label) + " holds " + counts(s, count_inf) + " (first at flat index " +
         std::to_string(first_bad(s, count_inf)) + ")");
#else
  (void)label, (void)v, (void)count_inf;
#endif
}

AOTI_DEBUG_CORE_FN void InputGuard::finish(const Run& run, const char* const* labels, Values inputs) {
  if (problems_.empty()) return;
  std::string text = "aoti-debug: the inputs of model '" + model_.name() +
                     "' do not match what it was compiled for:";
  std::string lines;
  for (const std::string& p : problems_) {
    text += "\n  " + p;
    lines += (lines.empty() ? "" : "\n") + p;
  }
  if (run.level >= 1) {
    std::string rec = detail::note_record("input-check", lines);
    int k = 0;
    for (const Value& v : inputs) {
      const char* label = labels ? labels[k] : "-";
      ++k;
      bool named = false;
      for (const std::string& p : problems_)
        named = named || p.compare(0, std::strlen(label), label) == 0;
      if (named) detail::append_item(rec, 2, "in", label, v, run.level < 3 ? 3 : run.level);
    }
    model_.write(std::move(rec));
  }
#if AOTI_DEBUG_ENABLE_DUMPS
  detail::box_fired(model_, run, "input-check", nullptr, {});
#endif
  throw CallerError(text);
}

AOTI_DEBUG_CORE_FN const Stats* NanChecks::memo_for_launch(const TensorView& v) const {
#if AOTI_DEBUG_ENABLE_STATS
  const detail::StatsMemo& m = detail::stats_memo();
  return m.holds(&run_, run_.launch) ? m.find(v) : nullptr;
#else
  (void)v;
  return nullptr;
#endif
}

#if AOTI_DEBUG_ENABLE_STATS
AOTI_DEBUG_CORE_FN detail::StatsMemo& NanChecks::launch_memo(const Site& site, Values outs) const {
  detail::StatsMemo& memo = detail::stats_memo();
  if (!memo.holds(&run_, run_.launch)) {
    memo.open(&run_, run_.launch);
    memo.prefetch(outs.begin(), outs.size(), [&site](size_t k) {
      return k < static_cast<size_t>(site.nargs) && site.args[k].role != Role::In;
    });
    memo.close(true);
  }
  return memo;
}
#endif

AOTI_DEBUG_CORE_FN void NanChecks::inputs(Values vals) {
#if AOTI_DEBUG_ENABLE_STATS
  detail::StatsMemo& memo = detail::stats_memo();  // the device inputs fetched together
  memo.open(&run_, run_.launch);
  memo.prefetch(vals.begin(), vals.size(), detail::any_arg);
#endif
  for (const Value& v : vals)
    if (v.kind == Value::kTensor && !is_finite(v)) set_bad(v.t.data, true);
#if AOTI_DEBUG_ENABLE_STATS
  memo.close(false);
#endif
}

AOTI_DEBUG_CORE_FN bool NanChecks::clean(const Site& site, Values outs) {
  int k = 0;
#if AOTI_DEBUG_ENABLE_STATS
  const detail::StatsMemo* kept = nullptr;  // a CPU run below level 5 never looks
#endif
  for (const Value* arg = outs.begin(); k < site.nargs && arg != outs.end(); ++k, ++arg) {
    if (site.args[k].role == Role::In || arg->kind != Value::kTensor) continue;
#if AOTI_DEBUG_ENABLE_STATS
    const Stats* s = nullptr;
    if (arg->t.device_type != 0 || run_.level >= 5) {
      if (kept == nullptr) kept = &launch_memo(site, outs);
      s = kept->find(arg->t);
    }
    const bool ok = s != nullptr ? !holds_bad(*s, count_inf_, count_sat_) : is_finite(*arg);
#else
    const bool ok = is_finite(*arg);
#endif
    if (!ok) return false;
  }
  if (bad_.empty()) return true;
  k = 0;  // outputs written clean over a buffer that held NaN/Inf
  for (const Value* arg = outs.begin(); k < site.nargs && arg != outs.end(); ++k, ++arg)
    if (site.args[k].role != Role::In && arg->kind == Value::kTensor) set_bad(arg->t.data, false);
  return true;
}

AOTI_DEBUG_CORE_FN void NanChecks::after(const Site& site, const char* const* sources,
                                         Values args) {
#if AOTI_DEBUG_ENABLE_STATS
  // the outputs' statistics as clean() or the launch-end record left them; the
  // device inputs not known bad fetched together
  detail::StatsMemo& memo = launch_memo(site, args);
  memo.prefetch(args.begin(), args.size(), [&](size_t k) {
    return k < static_cast<size_t>(site.nargs) && site.args[k].role == Role::In && !known_bad(args.p[k].t.data);
  });
#endif
  std::vector<std::string> tainted;  // inputs that already held NaN/Inf
  int k = 0;
  const Value* arg = args.begin();
  for (; k < site.nargs && arg != args.end(); ++k, ++arg) {
    const ArgSpec& a = site.args[k];
    if (a.role == Role::Out) continue;
    const bool bad = arg->kind == Value::kTensor &&
                     (known_bad(arg->t.data) || (a.role == Role::In && !is_finite(*arg)));
    if (bad) tainted.push_back(a.name);
  }
  k = 0;
  arg = args.begin();
  for (; k < site.nargs && arg != args.end(); ++k, ++arg) {
    const ArgSpec& a = site.args[k];
    if (a.role == Role::In || arg->kind != Value::kTensor) continue;
#if AOTI_DEBUG_ENABLE_STATS
    if (arg->t.device_type != 0 && arg->device_stats == nullptr) continue;
    Stats s{};
    const char* reason = nullptr;
    if (const Stats* kept = memo.find(arg->t)) {
      s = *kept;
    } else if (arg->t.device_type == 0) {
      if (is_finite(*arg)) {
        set_bad(arg->t.data, false);
        continue;
      }
      s = compute_stats(arg->t);
    } else if (!detail::device_stats(*arg, &s, &reason)) {
      continue;  // e.g. CUDA graph capture: never sync there
    }
    const bool bad = holds_bad(s, count_inf_, count_sat_);
    set_bad(arg->t.data, bad);
    if (bad)
      report(site, a.name, sources && *sources[k] ? sources[k] : site.source, s, tainted,
             detail::poison_at(arg->t, InputGuard::first_bad(s, count_inf_, count_sat_)), args, arg->t.dtype);
#endif
  }
}

#if AOTI_DEBUG_ENABLE_STATS
AOTI_DEBUG_CORE_FN void NanChecks::report(const Site& site, const char* buffer, const char* source, const Stats& s,
                                          const std::vector<std::string>& tainted, bool poison, Values args,
                                          int32_t dtype) {
  // `source` names the module too: the codegen wrote it (findings' one format, plan.where);
  // a float8 output's has its cast's after a newline, which a finding of saturation only names
  const bool only_sat = s.nan_count == 0 && (!count_inf_ || s.inf_count == 0);
  std::string where = detail::or_dash(source);
  const size_t cut = where.find('\n');
  if (cut != std::string::npos) where = only_sat ? where.substr(cut + 1) : where.substr(0, cut);
  std::string msg = "launch " + detail::launch_id(model_.name(), run_.run, run_.launch) + " " + site.kernel +
                    " (source " + where + ") wrote " +
                    InputGuard::counts(s, count_inf_, count_sat_) + " into " + buffer + " (first at flat index " +
                    std::to_string(InputGuard::first_bad(s, count_inf_, count_sat_)) + "); ";
  // checking NaN only, an Inf input is fine: the message says what was checked
  if (tainted.empty() && count_sat_) {
    msg += count_inf_ ? "its inputs were finite and unsaturated, so this launch is where they first appear"
                      : "its inputs held no NaN and no saturated value, so this launch is where they first appear";
  } else if (tainted.empty()) {
    msg += count_inf_ ? "its inputs were finite, so this launch is where they first appear"
                      : "its inputs held no NaN, so this launch is where NaN first appears";
  } else {
    msg += "its input";
    msg += tainted.size() == 1 ? " " : "s ";
    for (size_t i = 0; i < tainted.size(); ++i) msg += (i ? ", " : "") + tainted[i];
    msg += count_inf_ ? " already held NaN/Inf" : " already held NaN";
    msg += count_sat_ ? " or saturated values (look earlier)" : " (look earlier)";
  }
  if (poison) msg += "; the first is memcheck poison: memory nobody wrote, not arithmetic";
  fail(site, msg, tainted.empty(), args, 0,
       !only_sat ? 0 : dtype == detail::kFloat4_e2m1fn_x2 ? kFloat4 : kFloat8);
}
#endif

AOTI_DEBUG_CORE_FN void NanChecks::scales(const Site& site, Values args) {
  int k = 0;
  for (const Value* arg = args.begin(); k < site.nargs && arg != args.end(); ++k, ++arg) {
    const ArgSpec& a = site.args[k];
    if (a.scale == nullptr || a.role != Role::In || arg->kind != Value::kTensor) continue;
    int64_t zeros = 0, subnormals = 0;
    detail::ScaleFaults f;
    if (!detail::value_scale_counts(*arg, &zeros, &subnormals, &f) || f.first < 0) continue;
    std::string msg = "launch " + detail::launch_id(model_.name(), run_.run, run_.launch) + " " + site.kernel +
                      " (source " + detail::or_dash(site.source) + detail::module_words(site.lines) + ") read " +
                      a.scale + " " +
                      detail::or_dash(a.name) + " holding " + std::to_string(zeros) + " zero, " +
                      std::to_string(f.nans) + " NaN and " + std::to_string(f.infs) + " Inf (first at flat index " +
                      std::to_string(f.first) + "); a bad scale is the origin of what this launch writes, not "
                      "its arithmetic";
    if (a.constant) msg += std::string("; ") + detail::or_dash(a.name) + " is one of the artifact's constants";
    if (a.writer > 0)  // a scale computed in the model: where to look next
      msg += std::string("; ") + detail::or_dash(a.name) + " was last written by launch " +
             detail::launch_id(model_.name(), run_.run, a.writer) + " " + detail::or_dash(a.writer_words);
    fail(site, msg, true, args, (zeros > 0 ? kZero : 0) | (f.nans > 0 ? kNan : 0) | (f.infs > 0 ? kInf : 0));
  }
}

AOTI_DEBUG_CORE_FN void NanChecks::fail(const Site& site, const std::string& msg, bool origin, Values args,
                                        int scale, int saturated) {
  const bool raising = raise_ && origin;
  // at level 0 the exception alone says it: no record, no stderr line twice
  if (run_.level >= 1 || !raising) model_.tell(run_.level, "nan-check", msg);
#if AOTI_DEBUG_ENABLE_DUMPS
  detail::box_fired(model_, run_, "nan-check", &site, args);
#else
  (void)args;
#endif
  if (raising) throw CallerError("aoti-debug NaN check: " + msg);
  failures_.push_back(msg);
  scale_found_ |= scale;
  sat_found_ |= scale != 0 ? 0 : saturated;
  const int kind = scale != 0 ? 2 : saturated != 0 ? 1 : 0;
  if (failed_launch_[kind] != run_.launch) {  // a launch with several bad outputs counts once
    failed_launch_[kind] = run_.launch;
    kernels_[kind].push_back(site.kernel);
  }
}

AOTI_DEBUG_CORE_FN void NanChecks::finish() {
  if (failures_.empty()) return;
  std::string scales;  // `zero scales`, `zero/NaN scales`: what the bad scales held
  const char* words[] = {"zero", "NaN", "Inf"};
  for (int bit = 0; bit < 3; ++bit)
    if (scale_found_ & (1 << bit)) scales += (scales.empty() ? "" : "/") + std::string(words[bit]);
  scales += " scales";
  // `saturated float8`, `saturated float4`, `saturated float8/float4`: the formats that saturated
  std::string sat = "saturated ";
  if (sat_found_ & kFloat8) sat += "float8";
  if (sat_found_ & kFloat4) sat += std::string(sat_found_ & kFloat8 ? "/" : "") + "float4";
  std::string summary = "run " + std::to_string(run_.run) + ": ";
  bool first = true;
  for (int kind = 0; kind < 3; ++kind) {
    const std::vector<std::string>& kernels = kernels_[kind];
    if (kernels.empty()) continue;
    summary += (first ? "" : "; ") +
               (kind == 0 ? std::string("NaN/Inf") : kind == 1 ? sat : scales) + " in " +
               std::to_string(kernels.size()) + " launch" + (kernels.size() == 1 ? "" : "es") + ":";
    first = false;
    std::map<std::string, int> per_kernel;
    std::vector<std::string> order;
    for (const std::string& k : kernels) {
      if (per_kernel[k]++ == 0) order.push_back(k);
    }
    for (size_t i = 0; i < order.size(); ++i)
      summary += (i ? ", " : " ") + order[i] + " x" + std::to_string(per_kernel[order[i]]);
  }
  model_.tell(run_.level, "nan-check", summary);
  if (raise_) throw CallerError("aoti-debug NaN check: " + failures_.front());
}

namespace detail {
inline std::string planned_tuple(const sizeexpr::Int* v, int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i)
    s += (i ? ", " : "") + (v[i].ok ? std::to_string(v[i].v) : std::string("?"));
  return s + (n == 1 ? ",)" : ")");
}
}  // namespace detail

AOTI_DEBUG_CORE_FN void PlanChecks::output(const Site& site, Values args, int k, int32_t dtype, int ndim,
                                           const detail::sizeexpr::Int* planned) {
  if (k < 0 || k >= site.nargs || static_cast<size_t>(k) >= args.size()) return;
  const Value& v = args.begin()[k];
  if (v.kind != Value::kTensor) return;
  const TensorView& t = v.t;
  const detail::sizeexpr::Int* sizes = planned;
  const detail::sizeexpr::Int* strides = planned + ndim;
  bool shape_ok = t.ndim == ndim, strides_ok = true;
  int64_t numel = 1;
  for (int d = 0; shape_ok && d < ndim; ++d) {
    shape_ok = !sizes[d].ok || sizes[d].v == t.sizes[d];
    numel *= t.sizes[d];
  }
  // a stride is only meaningful along a dimension longer than 1 (as upstream's assert_size_stride)
  for (int d = 0; shape_ok && numel > 0 && d < ndim; ++d)
    strides_ok = strides_ok && (t.sizes[d] <= 1 || !strides[d].ok || strides[d].v == t.strides[d]);
  const bool dtype_ok = dtype < 0 || t.dtype == dtype;
  if (shape_ok && strides_ok && dtype_ok) return;
  const char* name = site.args[k].name;
  std::vector<std::string> parts;
  if (!shape_ok) {
    std::string got;
    detail::append_tuple(got, t.sizes, t.ndim);
    parts.push_back("of shape " + got + " where the graph planned " + detail::planned_tuple(sizes, ndim));
  } else if (!strides_ok) {
    std::string got;
    detail::append_tuple(got, t.strides, t.ndim);
    parts.push_back("with strides " + got + " where the graph planned " + detail::planned_tuple(strides, ndim));
  }
  if (!dtype_ok) {
    const char* got = detail::dtype_name(t.dtype);
    const char* want = detail::dtype_name(dtype);
    parts.push_back(std::string("of dtype ") + (got ? got : std::to_string(t.dtype).c_str()) +
                    " where the graph planned " + (want ? want : std::to_string(dtype).c_str()));
  }
  std::string msg = detail::launch_words(run_, site) + " returned " + name + " " + parts[0];
  if (parts.size() > 1) msg += ", and " + parts[1];
  msg += std::string(": the op's fake (register_fake or Meta kernel) disagrees with its kernel on these "
                     "inputs, and the launches after it use ") + name + " as planned";
  if (run_.level >= 1 || !raise_) model_.tell(run_.level, "plan-check", msg);  // level 0: the exception says it
#if AOTI_DEBUG_ENABLE_DUMPS
  detail::box_fired(model_, run_, "plan-check", &site, args);
#endif
  if (raise_) throw CallerError("aoti-debug plan check: " + msg);
}

AOTI_DEBUG_NAMESPACE_END
