// The API the generated AOTI wrapper calls.
//
// ---------------------------------------------------------------------------
// What the codegen emits (all names are the codegen's choice except the API):
//
//   #include <aoti_debug/aoti.h>
//
//   // Once per loaded model (a namespace-scope static of the model .so): what
//   // it was compiled with.
//   static aoti_debug::Model aotid_model(aoti_debug::ModelConfig{
//       "model",         // name in run records
//       5,               // compiled AOTI_DEBUG_LOGLEVEL (0/1/3/5/10)
//       "",              // compiled AOTI_DEBUG_KERNELS ("" = all)
//       "off",           // compiled AOTI_DEBUG_NAN_CHECK (settings.py's str(NanCheck))
//       false,           // compiled AOTI_DEBUG_CHECK_INPUTS
//       "2.13.0+cpu"});  // torch.__version__ at compile time (banner)
//   AOTI_DEBUG_COMPILE=all compiles in level 10, "raise:naninf" and the guards,
//   and appends what a run does while its variables are unset:
//       ..., "2.13.0+cpu", {true, 0, "", "off", false}});
//
//   // Once per launch site: static description (roles: In, Out, InOut).
//   static const aoti_debug::ArgSpec aotid_args_3[] = {
//       {"in_ptr0", aoti_debug::Role::In}, {"out_ptr0", aoti_debug::Role::Out}};
//   static aoti_debug::Site aotid_site_3{
//       "cpp_fused_relu_1",   // kernel name
//       "relu,add",           // FX nodes fused into it, graph order ("" = unknown)
//       "model.py:12",        // innermost user frame of the first node ("" = unknown)
//       "layers.0.act",       // module paths, comma-separated, filter only ("" = unknown)
//       aotid_args_3, 2};
//   static const char* const aotid_inputs[] = {"arg0_1", "arg1_1"};
//   static const char* const aotid_outputs[] = {"buf3"};
//
//   // In run_impl:
//   AOTI_DEBUG_BEGIN_RUN(aotid_run, aotid_model, aotid_inputs,
//                        aoti_debug::tensor(in0), aoti_debug::tensor(in1));
//   AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_3,
//                     aoti_debug::tensor(buf0), aoti_debug::tensor(buf1));
//   cpp_fused_relu_1(...);
//   AOTI_DEBUG_LAUNCH_END(aotid_run, aotid_site_3,
//                         aoti_debug::tensor(buf0), aoti_debug::tensor(buf1));
//   ...
//   AOTI_DEBUG_END_RUN(aotid_run, aotid_outputs, aoti_debug::tensor(out0));
//
// The argument lists of LAUNCH / LAUNCH_END are the site's arguments in the
// order of Site::args (ints, doubles, bools, strings, nullptr and
// aoti_debug::Value::int_list(ptr, n) are accepted as they are; an argument of
// the side not written may be nullptr).  They are only evaluated when the
// run's level writes them (3 and up): at level 0 a launch costs one increment
// and one predictable branch on `run.level`, and a level-1 record describes
// no tensor.  A launch left out at compile time still
// takes its number with `++aotid_run.launch;`.  Build an artifact compiled for
// a level below 5 (and without NaN checks) with -DAOTI_DEBUG_ENABLE_STATS=0:
// the statistics core is most of the header's compile time.
//
// Semantics (docs/log-format.md):
// - begin_run counts R (per Model, from 1) and fixes the run's level:
//   min(compiled level, AOTI_DEBUG_LOGLEVEL if set); asking for more than was
//   compiled in gives one note per process naming what to recompile with.
// - every launch counts K (from 1 per run), filtered out or not.
// - LAUNCH writes `launch model:R.K kernel` (level 1: header only; >= 3: origin line
//   and in/inout arguments; >= 5: statistics) and marks the launch in flight
//   for the crash trailer; LAUNCH_END clears it and, at level >= 3, writes
//   `launch-end model:R.K kernel` with the out/inout arguments.
// - END_RUN writes `run-end R model` with the outputs at level >= 3.
// - level 10 adds the flight recorder (detail/dump.h, docs/dumps.md): the
//   run's inputs at BEGIN_RUN, in/inout tensors before each selected launch,
//   out/inout tensors after it, and manifest.jsonl lines around each.
// - A launch whose kernel name and origins (nodes, source, module) match no
//   pattern of the kernel filter writes nothing (it still counts and is still
//   named by a crash trailer).
// ---------------------------------------------------------------------------
#pragma once

#include <pthread.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "detail/caller_error.h"
#if AOTI_DEBUG_ENABLE_DUMPS
#include "detail/dump.h"
#endif
#include "detail/format.h"
#include "detail/registry.h"
#include "detail/settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN

enum class Role : int32_t { In = 0, Out = 1, InOut = 2 };

struct ArgSpec {
  const char* name;
  Role role;
  bool constant = false;  // one of the artifact's constants (weights): the black box does not copy it
  const char* scale = nullptr;  // the op's schema argument when the kernel reads it as a scale ("scale_a")
  // a scale an earlier launch of the same call wrote: that launch (0: none) and its kernel
  // and origin, "cpp_fused_div_1 (source m.py:12, module fc1)", for the NaN check's finding
  int64_t writer = 0;
  const char* writer_words = nullptr;
  // an operand of a scaled matmul: how its scales (other arguments, by index) apply, as
  // aoti_debug/plan.py's dequant_spec writes it (docs/log-format.md 3.3)
  const char* dequant = nullptr;
};

// A launch site, described once by the generated code.
struct Site {
  const char* kernel;
  const char* nodes;   // comma-separated FX node names, "" = unknown
  const char* source;  // "file:line", "" = unknown
  const char* module;  // comma-separated module paths (filter only), "" = unknown
  const ArgSpec* args;
  int32_t nargs;
  const char* lines = "";  // "  source-line: file:line nodes=a,b\n" per user line, in source order
  const char* ops = "";    // the launch's FX ops as one JSON array (level 10; docs/dumps.md)
  mutable int32_t match_cache = -1;  // filter decision of the owning model (-1: not yet)
  // the black box: where this site's strings are in the process's ring (detail::box_site)
  mutable uint64_t box_ring = 0, box_pos = 0, box_seq = 0;
};

// What a run does while a run-time variable is unset, when that is less than
// what was compiled in (AOTI_DEBUG_COMPILE=all).  `given` false: the
// compiled-in values.
struct RunDefaults {
  bool given;
  int level;
  const char* kernels;
  const char* nan_check;
  bool check_inputs;
  const char* memcheck = "off";
  int64_t blackbox = 0;
};

// What the artifact was compiled with.
struct ModelConfig {
  const char* name;
  int level;
  const char* kernels;
  const char* nan_check;
  bool check_inputs;
  const char* torch_version;
  RunDefaults defaults = {false, 0, "", "off", false, "off", 0};
  const char* memcheck = "off";  // compiled AOTI_DEBUG_MEMCHECK (off, warn, raise)
  int64_t blackbox = 0;          // compiled AOTI_DEBUG_BLACKBOX (launches kept, 0: off)
};

class Model;

// One model run; lives on the stack of run_impl.
struct Run {
  int level;       // effective level; 0 = nothing to do
  int64_t run;     // R
  int64_t launch;  // K of the current launch
  Model* model;
  int64_t dumped = 0;  // level 10: K of the launch whose `before` was recorded
  int32_t dump_name = 0;  // level 10: which name its folder has (Recorder::folder), 0 = none
  mutable int32_t box_dumped = 0;  // a check has dumped the black box in this run
  const DeviceHooks* device = nullptr;  // set by on_device(); null: a CPU run
  void* stream = nullptr;               // the stream the run's launches go to
  int64_t synced = 0;  // AOTI_DEBUG_SYNC: K of the last launch found clean (0: the run's start)
};

class Model {
 public:
  explicit Model(const ModelConfig& c);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Counts the run; the first one reads the settings.
  AOTI_DEBUG_ALWAYS_INLINE Run begin_run() {
    if (AOTI_DEBUG_UNLIKELY(!__atomic_load_n(&ready_, __ATOMIC_ACQUIRE))) init();
    return Run{level_, __atomic_add_fetch(&runs_, 1, __ATOMIC_RELAXED), 0, this};
  }

  // Whether the input guard runs, the settings read first if no run has read them yet
  // (upstream's own input checks, which come before the first run, run only when it does not).
  bool guards_inputs() {
    if (AOTI_DEBUG_UNLIKELY(!__atomic_load_n(&ready_, __ATOMIC_ACQUIRE))) init();
    return check_inputs_;
  }

  // Effective run-time settings (after the first begin_run()).
  int level() const { return level_; }
  const detail::NanCheck& nan_check() const { return nan_check_; }
  bool check_inputs() const { return check_inputs_; }
  int memcheck() const { return memcheck_; }  // detail::kNanOff / kNanWarn / kNanRaise
  int64_t blackbox() const { return blackbox_; }  // launches the black box keeps, 0: off
  bool sync() const { return settings_.sync; }
  bool nan_check_sat() const { return settings_.nan_check_sat; }  // AOTI_DEBUG_NAN_CHECK_SAT
  const detail::Settings& settings() const { return settings_; }
  const std::string& name() const { return name_; }
  const std::string& dest() const { return settings_.logdest; }
  const char* torch_version() const { return torch_version_.c_str(); }
#if AOTI_DEBUG_ENABLE_DUMPS
  // The level-10 recorder (null below level 10).
  detail::Recorder* recorder() const { return recorder_; }
#endif

  // Does the kernel filter let this site through?  (Cached per site.)
  bool selected(const Site& site) const {
    int32_t m = __atomic_load_n(&site.match_cache, __ATOMIC_RELAXED);
    if (m < 0) {
      // settings_.kernels: the run-time filter, or the default one while unset
      m = matches(compiled_kernels_, site) && matches(settings_.kernels, site);
      __atomic_store_n(&site.match_cache, m, __ATOMIC_RELAXED);
    }
    return m != 0;
  }

  void write(std::string record) const {
    detail::write_record(settings_.logdest, std::move(record), torch_version_.c_str());
  }
  // A note the user must see: a record, or a stderr line at level 0 (detail::tell).
  void tell(int level, const std::string& topic, const std::string& lines, bool once = false) const {
    detail::tell(level, settings_.logdest, topic, lines, torch_version_.c_str(), once);
  }

 private:
  static bool matches(const std::vector<std::string>& pats, const Site& site) {
    if (pats.empty()) return true;
    if (detail::any_glob_matches(pats, site.kernel) || detail::any_glob_matches(pats, site.source))
      return true;
    for (const char* list : {site.nodes, site.module}) {  // comma-separated lists
      const std::string text = list ? list : "";
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find(',', start);
        if (end == std::string::npos) end = text.size();
        if (detail::any_glob_matches(pats, text.substr(start, end - start).c_str())) return true;
        start = end + 1;
      }
    }
    return false;
  }

  // Reads the settings once (under mu_) and fixes what the runs may do.
  void init();

  std::string name_;
  int compiled_level_;
  std::vector<std::string> compiled_kernels_;
  detail::NanCheck nan_check_;  // compiled in; after init(), what runs do
  bool check_inputs_;           // likewise
  int memcheck_ = detail::kNanOff;  // likewise
  int64_t blackbox_ = 0;            // likewise
  detail::Settings defaults_;   // what an unset run-time variable keeps
  std::string torch_version_;
  detail::Settings settings_;
  int level_ = 0;
  int ready_ = 0;
  int64_t runs_ = 0;
#if AOTI_DEBUG_ENABLE_DUMPS
  detail::Recorder* recorder_ = nullptr;  // never freed: a launch may race the model's unload
#endif
  pthread_mutex_t mu_;
};

namespace detail {

inline const char* or_dash(const char* s) { return s && *s ? s : "-"; }

inline const char* role_name(Role r) {
  return r == Role::In ? "in" : r == Role::Out ? "out" : "inout";
}

#if AOTI_DEBUG_ENABLE_DUMPS
// ---- level 10: the flight recorder (docs/dumps.md) ----

AOTI_DEBUG_CORE_DECL void dump_run(Run& run, const char* const* names, Values inputs);

// Tensors of one side of a launch and the manifest line around them.
AOTI_DEBUG_CORE_DECL void dump_launch(Run& run, const Site& site, Values args, bool out_side);

AOTI_DEBUG_CORE_DECL void dump_run_end(Run& run);
#else
inline void dump_run(Run&, const char* const*, Values) {}
inline void dump_launch(Run&, const Site&, Values, bool) {}
inline void dump_run_end(Run&) {}
#endif

}  // namespace detail

// The entry points of the generated code's macros (below).

// `run R model` (level >= 1; model inputs at level >= 3).
AOTI_DEBUG_CORE_DECL void run_begin(Run& run, const char* const* input_names, Values inputs);

// `launch model:R.K kernel`, before the launch.
AOTI_DEBUG_CORE_DECL void before_launch(Run& run, const Site& site, Values args);

// `launch-end model:R.K kernel` (level >= 3), after the launch.
AOTI_DEBUG_CORE_DECL void after_launch(Run& run, const Site& site, Values args);

// `run-end R model` with the outputs (level >= 3).
AOTI_DEBUG_CORE_DECL void end_run(Run& run, const char* const* output_names, Values outputs);

// Ties the run to a device stream (AOTI_DEBUG_BEGIN_RUN_ON), before anything
// reads a device tensor.
AOTI_DEBUG_CORE_DECL void on_device(Run& run, const DeviceHooks* hooks, void* stream);

// AOTI_DEBUG_SYNC (docs/log-format.md 1.6): an error the device reports
// when a launch is waited for is written as the crash trailer of the launch
// that raised it (or of the launches since the last clean wait, when some ran
// uninstrumented), then thrown with kernel and source line.
AOTI_DEBUG_CORE_DECL void sync_failed(Run& run, const Site* site, const char* error);

// AOTI_DEBUG_SYNC: waits for the run's stream after launch `site` (null:
// before the run's first launch, where an error belongs to work queued
// earlier).  Not during graph capture, which forbids waiting: the first
// launch says so, once.
AOTI_DEBUG_CORE_DECL void wait_for_device(Run& run, const Site* site);

AOTI_DEBUG_NAMESPACE_END

// Arguments are described (and their macro arguments evaluated) only at the
// levels that write them: level 1 records name the launch alone.
#define AOTI_DEBUG_BEGIN_RUN(run_var, model, input_names, ...)                                 \
  ::aoti_debug::Run run_var = (model).begin_run();                                             \
  if (AOTI_DEBUG_UNLIKELY(run_var.level != 0))                                                 \
  ::aoti_debug::run_begin(run_var, input_names,                                                \
                          run_var.level >= 3 ? ::aoti_debug::Values{__VA_ARGS__} \
                                             : ::aoti_debug::Values{})

// A run whose launches go to a device `stream` (hooks: DeviceHooks).
#define AOTI_DEBUG_BEGIN_RUN_ON(run_var, model, hooks, stream, input_names, ...)                \
  ::aoti_debug::Run run_var = (model).begin_run();                                             \
  ::aoti_debug::on_device(run_var, (hooks), (stream));                                         \
  if (AOTI_DEBUG_UNLIKELY(run_var.level != 0))                                                 \
  ::aoti_debug::run_begin(run_var, input_names,                                                \
                          run_var.level >= 3 ? ::aoti_debug::Values{__VA_ARGS__} \
                                             : ::aoti_debug::Values{})

#define AOTI_DEBUG_LAUNCH(run_var, site, ...)                                                  \
  do {                                                                                         \
    ++(run_var).launch;                                                                        \
    if (AOTI_DEBUG_UNLIKELY((run_var).level != 0)) {                                           \
      if ((run_var).level >= 3) ::aoti_debug::before_launch((run_var), (site), {__VA_ARGS__}); \
      else ::aoti_debug::before_launch((run_var), (site), {});                                 \
    }                                                                                          \
  } while (0)

#define AOTI_DEBUG_LAUNCH_END(run_var, site, ...)                                              \
  do {                                                                                         \
    if (AOTI_DEBUG_UNLIKELY((run_var).level != 0)) {                                           \
      if ((run_var).level >= 3) ::aoti_debug::after_launch((run_var), (site), {__VA_ARGS__});  \
      else ::aoti_debug::after_launch((run_var), (site), {});                                  \
    }                                                                                          \
  } while (0)

#define AOTI_DEBUG_END_RUN(run_var, output_names, ...)                                         \
  do {                                                                                         \
    if (AOTI_DEBUG_UNLIKELY((run_var).level >= 3))                                             \
      ::aoti_debug::end_run((run_var), output_names, {__VA_ARGS__});                           \
  } while (0)

#if AOTI_DEBUG_CORE_BODIES
#include "launch-inl.h"
#endif
