// launch.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  launch.h includes it at its end wherever the bodies are
// compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core
// object (src/core.cpp).
#pragma once

#include "launch.h"

AOTI_DEBUG_NAMESPACE_BEGIN

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

namespace detail {

// ---- record formatting, for the core functions ----

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

inline void append_args(Text& out, const Site& site, Values vals, bool out_side, int level) {
  int k = 0;
  for (const Value& v : vals) {
    if (k >= site.nargs) break;
    const ArgSpec& a = site.args[k++];
    if (!shown(a, out_side)) continue;
    DequantCall dq;
    if (a.dequant != nullptr && level >= 5 && parse_dequant(a.dequant, &dq)) {
      // its scales are among the launch's inputs: their values are in this record's list
      const int64_t n = static_cast<int64_t>(vals.size());
      dq.scale_value = dq.scale < n ? &vals.begin()[dq.scale] : nullptr;
      dq.global_value = dq.global >= 0 && dq.global < n ? &vals.begin()[dq.global] : nullptr;
      append_item(out, 2, role_name(a.role), or_dash(a.name), v, level, a.scale, &dq);
    } else {
      append_item(out, 2, role_name(a.role), or_dash(a.name), v, level, a.scale);
    }
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

// The text of launch K's record before it (`launch`, its in side) or after it
// (`launch-end`, its out side), as both runtimes write it: torch.compile's
// wrapper has it rendered here too (pycore.cpp, aotid_write_record).  `keep`:
// the statistics stay for the NaN/Inf check that follows on this thread.
inline std::string launch_record(const std::string& model, const Run& run, const Site& site, Values args,
                                 bool out_side, bool keep) {
  std::string rec = record_storage(record_size(run, site));
  Text t(rec);  // the whole record staged in one buffer; its id written in place
  put_header_start(t, out_side ? "launch-end" : "launch");
  t.append(model.data(), model.size());
  t += ':';
  put_i64(t, run.run);
  t += '.';
  put_i64(t, run.launch);
  t += ' ';
  t += site.kernel && *site.kernel ? site.kernel : "-";
  t += '\n';
  if (run.level < 3) return std::move(t.str());
  if (!out_side) {
    put(t, "  origin: nodes=");
    t += or_dash(site.nodes);
    put(t, " source=");
    t += or_dash(site.source);
    t += '\n';
    if (site.lines != nullptr) t += site.lines;
  }
  RecordStats stats(run, args, keep, SideOf{site, out_side});
  append_args(t, site, args, out_side, run.level);
  return std::move(t.str());
}

// A `run` record (`role` "in": the model's inputs) or `run-end` record ("out").
inline std::string run_record(const char* kind, const std::string& model, const Run& run, const std::string& facts,
                              const char* role, const char* const* names, Values vals) {
  std::string rec = header_line(kind, std::to_string(run.run), model.c_str(), facts);
  if (run.level >= 3) {
    RecordStats stats(run, vals, false, any_arg);
    append_named(rec, role, names, vals, run.level);
  }
  return rec;
}

#if AOTI_DEBUG_ENABLE_DUMPS
// ---- level 10: the flight recorder (docs/dumps.md) ----

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
#endif  // AOTI_DEBUG_ENABLE_DUMPS

}  // namespace detail

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

AOTI_DEBUG_CORE_FN void on_device(Run& run, const DeviceHooks* hooks, void* stream) {
  run.device = hooks, run.stream = stream;
  detail::device_context() = detail::DeviceContext{hooks, stream};
}

AOTI_DEBUG_CORE_FN void wait_for_device(Run& run, const Site* site) {
  const DeviceHooks* d = run.device;
  if (d->capturing != nullptr && d->capturing(run.stream)) {
    if (site != nullptr) run.model->tell(run.level, "sync", detail::kSyncCapture, true);
    return;
  }
  if (const char* error = d->synchronize(run.stream)) sync_failed(run, site, error);
  run.synced = run.launch;
}

AOTI_DEBUG_CORE_FN void run_begin(Run& run, const char* const* input_names,
                                          Values inputs) {
  const Model& m = *run.model;
  m.write(detail::run_record("run", m.name(), run, detail::header_facts(m.settings().rank, m.settings().world),
                             "in", input_names, inputs));
  if (run.level >= 10) detail::dump_run(run, input_names, inputs);
  // AOTI_DEBUG_SYNC: what was queued before the run, waited for now, is not
  // blamed on launch 1
  if (AOTI_DEBUG_UNLIKELY(run.device != nullptr) && m.sync()) wait_for_device(run, nullptr);
}

AOTI_DEBUG_CORE_FN void before_launch(Run& run, const Site& site,
                                              Values args) {
  const Model& m = *run.model;
  if (m.selected(site)) {
    // flushed (one write(2)) before the kernel runs
    m.write(detail::launch_record(m.name(), run, site, args, false, false));
    if (run.level >= 10) detail::dump_launch(run, site, args, false);  // before the launch too
  }
  detail::set_inflight(run.run, run.launch, site.kernel, m.name().c_str());
}

AOTI_DEBUG_CORE_FN void after_launch(Run& run, const Site& site,
                                             Values args) {
  if (AOTI_DEBUG_UNLIKELY(run.device != nullptr) && run.model->sync()) wait_for_device(run, &site);
  detail::clear_inflight();
  const Model& m = *run.model;
  if (run.level < 3 || !m.selected(site)) return;
  m.write(detail::launch_record(m.name(), run, site, args, true, true));  // kept for the NaN/Inf check right after
  if (run.level >= 10) detail::dump_launch(run, site, args, true);
}

AOTI_DEBUG_CORE_FN void end_run(Run& run, const char* const* output_names,
                                        Values outputs) {
  if (run.level < 3) return;
  const Model& m = *run.model;
  m.write(detail::run_record("run-end", m.name(), run, std::string(), "out", output_names, outputs));
  if (run.level >= 10) detail::dump_run_end(run);
}

AOTI_DEBUG_NAMESPACE_END
