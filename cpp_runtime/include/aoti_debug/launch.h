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

#if AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN Model::Model(const ModelConfig& c)
    : name_(detail::instance_name(c.name && *c.name ? c.name : "model")),
      compiled_level_(c.level),
      compiled_kernels_(detail::parse_kernels(c.kernels ? c.kernels : "")),
      check_inputs_(c.check_inputs),
      blackbox_(c.blackbox),
      torch_version_(c.torch_version ? c.torch_version : "unknown") {
  std::string err;
  if (!detail::parse_nan(c.nan_check ? c.nan_check : "off", &nan_check_, &err)) nan_check_ = {};
  if (!detail::parse_memcheck(c.memcheck ? c.memcheck : "off", &memcheck_, &err)) memcheck_ = detail::kNanOff;
  defaults_.level = compiled_level_;
  defaults_.kernels = compiled_kernels_;
  defaults_.nan_check = nan_check_;
  defaults_.check_inputs = check_inputs_;
  defaults_.memcheck = memcheck_;
  defaults_.blackbox = blackbox_;
  if (c.defaults.given) {
    defaults_.level = c.defaults.level;
    defaults_.kernels = detail::parse_kernels(c.defaults.kernels ? c.defaults.kernels : "");
    if (!detail::parse_nan(c.defaults.nan_check ? c.defaults.nan_check : "off",
                           &defaults_.nan_check, &err))
      defaults_.nan_check = {};
    defaults_.check_inputs = c.defaults.check_inputs;
    if (!detail::parse_memcheck(c.defaults.memcheck ? c.defaults.memcheck : "off", &defaults_.memcheck, &err))
      defaults_.memcheck = detail::kNanOff;
    defaults_.blackbox = c.defaults.blackbox;
  }
  pthread_mutex_init(&mu_, nullptr);
}

AOTI_DEBUG_CORE_FN void Model::init() {
  pthread_mutex_lock(&mu_);
  if (!ready_) {
    std::vector<std::string> problems;
    settings_ = detail::read_settings(detail::Env{}, defaults_, &problems);
    std::string lines;
    for (const std::string& p : problems) lines += p + "\n";
    // A run-time value lowers what is compiled in, never raises it; asking for more gets one
    // note (runtime/launches.py's Model._init, `lowering`).  `shown`: a value as its variable is set.
    const std::string model = detail::py_repr(name_);
    auto lower = [&](auto* in_use, const auto& compiled, const auto& wanted, detail::Settings::Lowered field,
                     const char* variable, auto shown) {
      const std::string* asked = settings_.set_at_run_time(field);
      if (asked != nullptr && detail::asks_for_more(compiled, wanted))
        lines += *asked + " asks for more than model " + model + " was compiled with (" + shown(compiled) +
                 "); using " + shown(compiled) + ". Recompile with " + variable + "=" + shown(wanted) +
                 " (or AOTI_DEBUG_COMPILE=all) to get it.\n";
      *in_use = detail::lowest(compiled, wanted);
    };
    using S = detail::Settings;
    const auto number = [](int64_t v) { return std::to_string(v); };
    lower(&level_, compiled_level_, settings_.level, S::kLevel, "AOTI_DEBUG_LOGLEVEL", number);
    lower(&nan_check_, nan_check_, settings_.nan_check, S::kNanCheck, "AOTI_DEBUG_NAN_CHECK",
          [](const detail::NanCheck& n) { return n.str(); });
    lower(&check_inputs_, check_inputs_, settings_.check_inputs, S::kCheckInputs, "AOTI_DEBUG_CHECK_INPUTS",
          [](bool on) { return std::string(on ? "1" : "0"); });
    lower(&memcheck_, memcheck_, settings_.memcheck, S::kMemcheck, "AOTI_DEBUG_MEMCHECK",
          [](int action) { return std::string(detail::memcheck_name(action)); });
    lower(&blackbox_, blackbox_, settings_.blackbox, S::kBlackbox, "AOTI_DEBUG_BLACKBOX", detail::blackbox_name);
    if (settings_.sync && level_ == 0) lines += std::string(detail::kSyncNeedsLevel) + "\n";
    if (!lines.empty()) {
      lines.pop_back();
      tell(level_, "settings", lines, true);
    }
    if (level_ >= 1) detail::install_crash_handler();
#if AOTI_DEBUG_ENABLE_DUMPS
    if (level_ >= 10)
      recorder_ = new detail::Recorder(settings_, name_, settings_.logdest, torch_version_.c_str());
#endif
    __atomic_store_n(&ready_, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&mu_);
}
#endif  // AOTI_DEBUG_CORE_BODIES

namespace detail {

inline const char* or_dash(const char* s) { return s && *s ? s : "-"; }

inline const char* role_name(Role r) {
  return r == Role::In ? "in" : r == Role::Out ? "out" : "inout";
}

#if AOTI_DEBUG_CORE_BODIES  // record formatting, for the core functions
// How the checks name a launch and a tensor in their messages (docs/checks.md).
// ", module a.b.c" from the launch's `  module:` body line, which the codegen
// writes first when the launch runs inside a submodule (plan.launch_module)
inline std::string module_words(const char* lines) {
  static const char kHead[] = "  module: ";
  if (lines == nullptr || std::strncmp(lines, kHead, sizeof(kHead) - 1) != 0) return "";
  const char* start = lines + sizeof(kHead) - 1;
  const char* end = std::strchr(start, '\n');
  return ", module " + std::string(start, end != nullptr ? static_cast<size_t>(end - start) : std::strlen(start));
}

inline std::string launch_words(const Run& run, const Site& site) {
  return "launch " + launch_id(run.model->name(), run.run, run.launch) + " " + site.kernel + " (nodes=" +
         or_dash(site.nodes) + " source=" + or_dash(site.source) + module_words(site.lines) + ")";
}

inline std::string tensor_words(const char* name, const char* role, const TensorView& v) {
  std::string s = std::string(name) + " (";
  if (role != nullptr) s += std::string(role) + ", ";
  const char* dt = dtype_name(v.dtype);
  s += dt ? dt : "dtype " + std::to_string(v.dtype);
  append_tuple(s, v.sizes, v.ndim);
  return s + ")";
}


// A launch record's likely size, reserved at once: a Tensor block is about
// 200 bytes, 350 with statistics (growing a string copies it each time).
inline size_t record_size(const Run& run, const Site& site) {
  if (run.level < 3) return 160;
  return 512 + (site.lines != nullptr ? std::strlen(site.lines) : 0) +
         static_cast<size_t>(site.nargs) * (run.level >= 5 ? 384 : 224);
}

// Whether a launch's argument belongs to its in side (the record before it:
// in and inout) or its out side (the record after it: out and inout).
inline bool shown(const ArgSpec& a, bool out_side) {
  return a.role == Role::InOut || (a.role == Role::Out) == out_side;
}

// The same, by position in a launch's argument list (a StatsMemo prefetch's want).
struct SideOf {
  const Site& site;
  bool out_side;
  bool operator()(size_t k) const {
    return k < static_cast<size_t>(site.nargs) && shown(site.args[k], out_side);
  }
};

inline void append_args(std::string& out, const Site& site, Values vals,
                        bool out_side, int level) {
  int k = 0;
  for (const Value& v : vals) {
    if (k >= site.nargs) break;
    const ArgSpec& a = site.args[k++];
    if (shown(a, out_side)) append_item(out, 2, role_name(a.role), or_dash(a.name), v, level);
  }
}

// The statistics memo (format.h StatsMemo) for the life of one record at
// level >= 5: its device tensors fetched together first, every tensor read
// once; a launch-end record's entries stay for the NaN/Inf check after it.
class RecordStats {
 public:
  template <class Want>
  RecordStats(const Run& run, Values vals, bool keep, Want want) : on_(run.level >= 5), keep_(keep) {
#if AOTI_DEBUG_ENABLE_STATS
    if (!on_) return;
    StatsMemo& memo = stats_memo();
    memo.open(&run, run.launch);
    memo.prefetch(vals.begin(), vals.size(), want);
#else
    (void)vals, (void)want;
#endif
  }
  ~RecordStats() {
#if AOTI_DEBUG_ENABLE_STATS
    if (on_) stats_memo().close(keep_);
#endif
  }
  RecordStats(const RecordStats&) = delete;
  RecordStats& operator=(const RecordStats&) = delete;

 private:
  bool on_, keep_;
};

inline void append_named(std::string& out, const char* role, const char* const* names,
                         Values vals, int level) {
  int k = 0;
  for (const Value& v : vals) {
    append_item(out, 2, role, names ? or_dash(names[k]) : "-", v, level);
    ++k;
  }
}
#endif  // AOTI_DEBUG_CORE_BODIES

#if AOTI_DEBUG_ENABLE_DUMPS
// ---- level 10: the flight recorder (docs/dumps.md) ----

#if AOTI_DEBUG_CORE_BODIES  // the helpers of the core functions below
inline std::string dump_line_start(const char* event, const char* status, const char* kind, int64_t run) {
  std::string l = "{\"event\": \"";
  l += event;
  l += "\", \"status\": \"";
  l += status;
  l += "\", \"kind\": \"";
  l += kind;
  l += "\", \"run\": " + std::to_string(run);
  return l;
}

inline void dump_line_end(std::string& l, const std::string& files, int64_t bytes,
                          const std::string& time = json_time()) {
  l += ", \"files\": " + files + "], \"bytes\": " + std::to_string(bytes);
  l += ", \"time\": " + time + "}\n";
}

// A launch's `before` or `after` line; `ops` (the codegen's JSON array) goes
// on the line before the launch only.
inline std::string launch_line(const char* event, const char* status, int64_t run, int64_t launch,
                               const char* kernel, const char* nodes, const char* source, const char* lines,
                               const char* ops, const std::string& files, int64_t bytes,
                               const std::string& time = json_time()) {
  std::string l = dump_line_start(event, status, "launch", run);
  l += ", \"index\": " + std::to_string(launch) + ", \"id\": \"" + run_launch_id(run, launch) + "\", \"kernel\": ";
  json_str(l, kernel);
  l += ", \"nodes\": ";
  json_str(l, nodes);
  l += ", \"source\": ";
  json_str(l, source);
  l += ", \"lines\": ";
  json_str(l, lines != nullptr ? lines : "");
  if (ops != nullptr && ops[0] == '[') {
    l += ", \"ops\": ";
    l += ops;
  }
  dump_line_end(l, files, bytes, time);
  return l;
}

// The files of one side of launch K (in: in/inout before it, out: out/inout
// after it), saved into `dir`; *written of *wanted got a file.
inline void save_side(Recorder& rec, const std::string& dir, int64_t launch, const Site& site,
                      Values args, bool out_side, std::string& files, int64_t* bytes,
                      int* wanted, int* written) {
  char prefix[48];
  std::snprintf(prefix, sizeof prefix, "launch%06lld_%s_", static_cast<long long>(launch), out_side ? "out" : "in");
  int k = 0;
  for (const Value& v : args) {
    if (k >= site.nargs) break;
    const ArgSpec& a = site.args[k++];
    if (!shown(a, out_side)) continue;
    ++*wanted;
    const size_t before = files.size();
    rec.save(dir, prefix + safe_name(a.name) + ".pt", or_dash(a.name), role_name(a.role), v, files, bytes);
    if (files.find("\"file\": \"", before) != std::string::npos) ++*written;
  }
}

#endif  // AOTI_DEBUG_CORE_BODIES

#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void dump_run(Run& run, const char* const* names,
                                         Values inputs);
#else
AOTI_DEBUG_CORE_FN void dump_run(Run& run, const char* const* names,
                                         Values inputs) {
  Recorder* rec = run.model->recorder();
  if (rec == nullptr || rec->stopped()) return;
  run.dump_name = rec->make_run_folder(run.run);
  if (run.dump_name == 0) return;
  const std::string dir = rec->folder(run.run, run.dump_name);
  PtWriter w;
  w.pkl.op(']');
  w.pkl.op('(');
  std::string errors, input_names = "[";
  int k = 0;
  for (const Value& v : inputs) {
    if (!w.value(v)) {
      w.pkl.op('N');
      if (!errors.empty()) errors += "; ";
      errors += std::string(names ? or_dash(names[k]) : "-") + ": " + w.error;
    }
    if (k) input_names += ", ";
    json_str(input_names, names ? or_dash(names[k]) : "-");
    ++k;
  }
  input_names += "]";
  w.pkl.op('e');
  std::string data, files = "[";
  int64_t bytes = 0;
  if (!w.finish(&data)) {  // e.g. too large for a ZIP without ZIP64: said, not passed over
    if (!errors.empty()) errors += "; ";
    errors += "inputs.pt: " + w.error;
  } else if (rec->write_file(dir, "inputs.pt", data, false)) {
    files += "{\"name\": \"inputs\", \"role\": \"in\", \"file\": \"inputs.pt\", \"bytes\": " +
             std::to_string(data.size()) + "}";
    bytes = static_cast<int64_t>(data.size());
  }
  if (rec->stopped()) return;
  std::string l = dump_line_start("run", errors.empty() ? "ok" : "incomplete", "run", run.run);
  l += ", \"model\": ";
  json_str(l, run.model->name().c_str());
  l += ", \"pid\": " + std::to_string(getpid()) + ", \"thread\": " + std::to_string(thread_id());
  const Settings& ps = run.model->settings();
  if (ps.rank >= 0) l += ", \"rank\": " + std::to_string(ps.rank);
  if (ps.rank >= 0 && ps.world > 0) l += ", \"world\": " + std::to_string(ps.world);
  l += ", \"so\": ";
  static const std::string so = artifact_path();
  json_str(l, so.c_str());
  std::string sha256;
  const std::string copy = rec->artifact_copy(so, &sha256);
  if (rec->stopped()) return;
  if (!copy.empty()) {
    l += ", \"so_copy\": ";
    json_str(l, copy.c_str());
    l += ", \"so_sha256\": \"" + sha256 + "\"";
  }
  l += ", \"inputs\": " + input_names;
  if (!errors.empty()) {
    l += ", \"error\": ";
    json_str(l, errors.c_str());
  }
  dump_line_end(l, files, bytes);
  rec->manifest(dir, l);
}
#endif

// Tensors of one side of a launch and the manifest line around them.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void dump_launch(Run& run, const Site& site, Values args,
                                            bool out_side);
#else
AOTI_DEBUG_CORE_FN void dump_launch(Run& run, const Site& site, Values args,
                                            bool out_side) {
  Recorder* rec = run.model->recorder();
  if (rec == nullptr || rec->stopped() || run.dump_name == 0) return;
  if (!out_side) {
    if (!rec->claim()) return;
    run.dumped = run.launch;
  } else if (run.dumped != run.launch) {
    return;
  }
  const std::string dir = rec->folder(run.run, run.dump_name);
  std::string files = "[";
  int64_t bytes = 0;
  int wanted = 0, written = 0;
  save_side(*rec, dir, run.launch, site, args, out_side, files, &bytes, &wanted, &written);
  if (rec->stopped()) return;
  rec->manifest(dir, launch_line(out_side ? "after" : "before",
                                 !out_side ? "running" : written == wanted ? "ok" : "incomplete", run.run,
                                 run.launch, site.kernel, site.nodes, site.source, site.lines,
                                 out_side ? nullptr : site.ops, files, bytes));
}
#endif

#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void dump_run_end(Run& run);
#else
AOTI_DEBUG_CORE_FN void dump_run_end(Run& run) {
  Recorder* rec = run.model->recorder();
  if (rec == nullptr || rec->stopped() || run.dump_name == 0) return;
  std::string l = dump_line_start("run-end", "ok", "run-end", run.run);
  l += ", \"model\": ";
  json_str(l, run.model->name().c_str());
  l += ", \"launches\": " + std::to_string(run.launch);
  dump_line_end(l, "[", 0);
  rec->manifest(rec->folder(run.run, run.dump_name), l);
}
#endif
#else
inline void dump_run(Run&, const char* const*, Values) {}
inline void dump_launch(Run&, const Site&, Values, bool) {}
inline void dump_run_end(Run&) {}
#endif

}  // namespace detail

// The entry points of the generated code's macros (below).
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void run_begin(Run& run, const char* const* input_names, Values inputs);
AOTI_DEBUG_CORE_FN void before_launch(Run& run, const Site& site, Values args);
AOTI_DEBUG_CORE_FN void after_launch(Run& run, const Site& site, Values args);
AOTI_DEBUG_CORE_FN void end_run(Run& run, const char* const* output_names, Values outputs);
AOTI_DEBUG_CORE_FN void on_device(Run& run, const DeviceHooks* hooks, void* stream);
AOTI_DEBUG_CORE_FN void sync_failed(Run& run, const Site* site, const char* error);
AOTI_DEBUG_CORE_FN void wait_for_device(Run& run, const Site* site);
#else
// AOTI_DEBUG_SYNC (docs/log-format.md 1.6): an error the device reports
// when a launch is waited for is written as the crash trailer of the launch
// that raised it (or of the launches since the last clean wait, when some ran
// uninstrumented), then thrown with kernel and source line.
AOTI_DEBUG_CORE_FN void sync_failed(Run& run, const Site* site, const char* error) {
  const Model& m = *run.model;
  std::string text = detail::one_line(error);
  std::string by, message;
  const std::string id = detail::launch_id(m.name(), run.run, run.launch);
  if (site == nullptr) {
    by = "work queued before run " + std::to_string(run.run) + " of model " + m.name();
    message = "aoti-debug: the device reported an error before run " + std::to_string(run.run) +
              " of model '" + m.name() + "' began (work queued before the model was called): " + text;
  } else {
    const std::string where = std::string(site->kernel) + " (source: " +
                              (site->source && *site->source ? site->source : "unknown") + ")";
    if (run.launch - run.synced <= 1) {
      by = id;
      message = "aoti-debug: launch " + id + " " + where + " failed on the device: " + text +
                " (found by AOTI_DEBUG_SYNC=1, which waits for each launch)";
    } else {
      const std::string first = detail::launch_id(m.name(), run.run, run.synced + 1);
      by = "one of " + first + " to " + id + " (launches compiled without instrumentation are not waited for)";
      message = "aoti-debug: the device failed in one of launches " + first + " to " + id +
                ", found after launch " + id + " " + where + ": " + text +
                " (AOTI_DEBUG_SYNC=1 waits for each instrumented launch; the launches before " + id +
                " that were compiled without instrumentation are not)";
    }
  }
  std::string rec = detail::header_line("crash", site ? id : "-", site ? site->kernel : "-");
  rec += "  error: " + text + "\n  raised-by: " + by + "\n";
  m.write(std::move(rec));
  detail::clear_inflight();
  throw CallerError(message);
}

// Ties the run to a device stream (AOTI_DEBUG_BEGIN_RUN_ON), before anything
// reads a device tensor.
AOTI_DEBUG_CORE_FN void on_device(Run& run, const DeviceHooks* hooks, void* stream) {
  run.device = hooks, run.stream = stream;
  detail::device_context() = detail::DeviceContext{hooks, stream};
}

// AOTI_DEBUG_SYNC: waits for the run's stream after launch `site` (null:
// before the run's first launch, where an error belongs to work queued
// earlier).  Not during graph capture, which forbids waiting: the first
// launch says so, once.
AOTI_DEBUG_CORE_FN void wait_for_device(Run& run, const Site* site) {
  const DeviceHooks* d = run.device;
  if (d->capturing != nullptr && d->capturing(run.stream)) {
    if (site != nullptr) run.model->tell(run.level, "sync", detail::kSyncCapture, true);
    return;
  }
  if (const char* error = d->synchronize(run.stream)) sync_failed(run, site, error);
  run.synced = run.launch;
}

// `run R model` (level >= 1; model inputs at level >= 3).
AOTI_DEBUG_CORE_FN void run_begin(Run& run, const char* const* input_names,
                                          Values inputs) {
  const Model& m = *run.model;
  std::string rec = detail::header_line("run", std::to_string(run.run), m.name().c_str(),
                                        detail::header_facts(m.settings().rank, m.settings().world));
  if (run.level >= 3) {
    detail::RecordStats stats(run, inputs, false, detail::any_arg);
    detail::append_named(rec, "in", input_names, inputs, run.level);
  }
  m.write(std::move(rec));
  if (run.level >= 10) detail::dump_run(run, input_names, inputs);
  // AOTI_DEBUG_SYNC: what was queued before the run, waited for now, is not
  // blamed on launch 1
  if (AOTI_DEBUG_UNLIKELY(run.device != nullptr) && m.sync()) wait_for_device(run, nullptr);
}

// `launch model:R.K kernel`, before the launch.
AOTI_DEBUG_CORE_FN void before_launch(Run& run, const Site& site,
                                              Values args) {
  const Model& m = *run.model;
  if (m.selected(site)) {
    std::string rec = detail::header_line("launch", detail::launch_id(m.name(), run.run, run.launch),
                                          site.kernel, std::string(), detail::record_size(run, site));
    if (run.level >= 3) {
      rec += "  origin: nodes=";
      rec += detail::or_dash(site.nodes);
      rec += " source=";
      rec += detail::or_dash(site.source);
      rec += '\n';
      if (site.lines != nullptr) rec += site.lines;
      detail::RecordStats stats(run, args, false, detail::SideOf{site, false});
      detail::append_args(rec, site, args, false, run.level);
    }
    m.write(std::move(rec));  // flushed (one write(2)) before the kernel runs
    if (run.level >= 10) detail::dump_launch(run, site, args, false);  // before the launch too
  }
  detail::set_inflight(run.run, run.launch, site.kernel, m.name().c_str());
}

// `launch-end model:R.K kernel` (level >= 3), after the launch.
AOTI_DEBUG_CORE_FN void after_launch(Run& run, const Site& site,
                                             Values args) {
  if (AOTI_DEBUG_UNLIKELY(run.device != nullptr) && run.model->sync()) wait_for_device(run, &site);
  detail::clear_inflight();
  const Model& m = *run.model;
  if (run.level < 3 || !m.selected(site)) return;
  std::string rec = detail::header_line("launch-end", detail::launch_id(m.name(), run.run, run.launch),
                                        site.kernel, std::string(), detail::record_size(run, site));
  {
    // kept for the NaN/Inf check right after
    detail::RecordStats stats(run, args, true, detail::SideOf{site, true});
    detail::append_args(rec, site, args, true, run.level);
  }
  m.write(std::move(rec));
  if (run.level >= 10) detail::dump_launch(run, site, args, true);
}

// `run-end R model` with the outputs (level >= 3).
AOTI_DEBUG_CORE_FN void end_run(Run& run, const char* const* output_names,
                                        Values outputs) {
  if (run.level < 3) return;
  const Model& m = *run.model;
  std::string rec = detail::header_line("run-end", std::to_string(run.run), m.name().c_str());
  {
    detail::RecordStats stats(run, outputs, false, detail::any_arg);
    detail::append_named(rec, "out", output_names, outputs, run.level);
  }
  m.write(std::move(rec));
  if (run.level >= 10) detail::dump_run_end(run);
}

#endif  // AOTI_DEBUG_CORE_BODIES

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
