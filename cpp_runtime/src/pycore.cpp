// C entry points for the Python side (aoti_debug/native/core.py, via ctypes).
//
// The Python logger uses the very code an artifact compiles in: the
// statistics core, the destinations with their banner and lock (so Python
// and C++ records share files without tearing), the in-flight launch and the
// crash trailer.  The remaining exports exist for parity tests.
// Every function is noexcept: a C++ exception must never cross into ctypes.
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aoti_debug/detail/blackbox.h"
#include "aoti_debug/detail/format.h"
#include "aoti_debug/detail/py_record.h"
#include "aoti_debug/launch.h"
#include "aoti_debug/detail/registry.h"
#include "aoti_debug/detail/settings.h"
#include "aoti_debug/detail/stats.h"

#define AOTID_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

aoti_debug::TensorView make_view(const void* data, int32_t dtype, int64_t ndim, const int64_t* sizes,
                                 const int64_t* strides, int32_t device_type, int32_t device_index) {
  return aoti_debug::TensorView{data, dtype, ndim, sizes, strides, device_type, device_index};
}

// Copies text into buf (NUL-terminated when it fits); returns its length, so
// the caller can retry with a larger buffer.
int64_t give(const std::string& text, char* buf, int64_t cap) {
  const int64_t n = static_cast<int64_t>(text.size());
  if (buf != nullptr && cap > n) std::memcpy(buf, text.c_str(), static_cast<size_t>(n) + 1);
  return n;
}

}  // namespace

AOTID_EXPORT const char* aotid_version() noexcept { return AOTI_DEBUG_VERSION; }

AOTID_EXPORT int32_t aotid_registry_abi() noexcept { return AOTI_DEBUG_REGISTRY_ABI; }

AOTID_EXPORT int64_t aotid_stats_size() noexcept { return sizeof(aoti_debug::Stats); }

AOTID_EXPORT int32_t aotid_vector_width() noexcept { return aoti_debug::detail::stats_vector_width(); }

// Statistics of a CPU tensor into *out; 0 on success.
AOTID_EXPORT int32_t aotid_compute_stats(const void* data, int32_t dtype, int64_t ndim,
                                         const int64_t* sizes, const int64_t* strides,
                                         int32_t hash, int32_t max_threads, int32_t isa_limit,
                                         aoti_debug::Stats* out) noexcept {
  try {
    *out = aoti_debug::compute_stats(make_view(data, dtype, ndim, sizes, strides, 0, -1), hash != 0,
                                     max_threads, isa_limit);
    return 0;
  } catch (...) {
    return -1;
  }
}

// 1 when a CPU tensor holds no NaN (and, with count_inf, no Inf), 0 when it
// does, -1 on error: the NaN/Inf check's clean path.
AOTID_EXPORT int32_t aotid_all_finite(const void* data, int32_t dtype, int64_t ndim,
                                      const int64_t* sizes, const int64_t* strides,
                                      int32_t count_inf) noexcept {
  try {
    return aoti_debug::all_finite(make_view(data, dtype, ndim, sizes, strides, 0, -1), count_inf != 0)
               ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

AOTID_EXPORT int64_t aotid_dequant_stats_size() noexcept { return sizeof(aoti_debug::DequantStats); }

// One float4_e2m1fn value from its nibble (detail::e2m1_value), for the Python side's decode.
AOTID_EXPORT double aotid_e2m1_value(int32_t nibble) noexcept {
  return aoti_debug::detail::e2m1_value(static_cast<uint8_t>(nibble));
}

// The dequantized statistics of a scaled operand (aoti_debug::dequant_stats): `views`
// holds {data, dtype, ndim, sizes, strides} of the operand, its scale and (when
// `with_global`) the tensor-wide second scale, as three rows of five words; `spec`
// {layout, block, swizzled, kdim, isa_limit}.  0 on success.
AOTID_EXPORT int32_t aotid_dequant_stats(const int64_t* views, int32_t with_global, const int32_t* spec,
                                         aoti_debug::DequantStats* out) noexcept {
  try {
    aoti_debug::TensorView v[3];
    for (int k = 0; k < (with_global ? 3 : 2); ++k) {
      const int64_t* w = views + 5 * k;
      v[k] = make_view(reinterpret_cast<const void*>(w[0]), static_cast<int32_t>(w[1]), w[2],
                       reinterpret_cast<const int64_t*>(w[3]), reinterpret_cast<const int64_t*>(w[4]), 0, -1);
    }
    const aoti_debug::DequantSpec sp{spec[0], spec[1], spec[2], spec[3]};
    *out = aoti_debug::dequant_stats(v[0], v[1], with_global ? &v[2] : nullptr, sp, spec[4]);
    return 0;
  } catch (...) {
    return -1;
  }
}

// The lines a scale argument's Tensor block adds at level >= 5 (detail::scale_lines).
AOTID_EXPORT int64_t aotid_render_scale_lines(const void* data, int32_t dtype, int64_t ndim,
                                              const int64_t* sizes, const int64_t* strides,
                                              int32_t device_type, int32_t device_index,
                                              const char* scale, int32_t indent, char* buf,
                                              int64_t cap) noexcept {
  try {
    std::string out;
    {
      aoti_debug::detail::Text text(out);  // written into `out` when it goes
      const aoti_debug::Value val(make_view(data, dtype, ndim, sizes, strides, device_type, device_index));
      aoti_debug::detail::scale_lines(text, val, scale, indent);
    }
    return give(out, buf, cap);
  } catch (...) {
    return -1;
  }
}

// The Tensor block as the C++ shim writes it ("Tensor(" at `indent` spaces).
AOTID_EXPORT int64_t aotid_render_tensor_block(const void* data, int32_t dtype, int64_t ndim,
                                               const int64_t* sizes, const int64_t* strides,
                                               int32_t device_type, int32_t device_index,
                                               int32_t requires_grad, int32_t level, int32_t indent,
                                               char* buf, int64_t cap) noexcept {
  try {
    std::string out;
    aoti_debug::Value v(make_view(data, dtype, ndim, sizes, strides, device_type, device_index));
    v.b = requires_grad != 0;
    aoti_debug::detail::append_tensor_block(out, v, level, indent);
    return give(out, buf, cap);
  } catch (...) {
    return -1;
  }
}

// Section-2 number format; buf needs 48 bytes.
AOTID_EXPORT int32_t aotid_format_number(double x, char* buf) noexcept {
  const int n = aoti_debug::detail::format_double(x, buf);
  buf[n] = '\0';
  return n;
}

// Writes complete record text to a destination setting (stdout, stderr or a
// path with %i), after that destination's banner when first used.
AOTID_EXPORT int32_t aotid_sink_write(const char* dest, const char* text, int64_t len, const char* torch_version,
                                      const aoti_debug::detail::WaitHooks* hooks) noexcept {
  try {
    aoti_debug::detail::write_record(dest, std::string(text, static_cast<size_t>(len)), torch_version, hooks);
    return 0;
  } catch (...) {
    return -1;
  }
}

// torch.compile's launch, in one call: the `launch model:R.K kernel` record
// with `body` (its lines at level >= 3), then, when `mark` is set, the launch
// marked in flight on this thread, in detail::before_launch's order. The
// header is the C++ shim's own, so both runtimes write it alike.  `hooks`:
// the launch extension's GIL (write_record), null from ctypes.
AOTID_EXPORT int32_t aotid_write_launch(const char* dest, const char* model, int64_t run, int64_t launch,
                                        const char* kernel, const char* body, int64_t len, int32_t mark,
                                        const char* torch_version,
                                        const aoti_debug::detail::WaitHooks* hooks) noexcept {
  namespace d = aoti_debug::detail;
  int32_t rc = 0;
  try {
    std::string rec = d::header_line("launch", d::launch_id(model, run, launch), kernel, std::string(),
                                     96 + std::strlen(model) + std::strlen(kernel) + static_cast<size_t>(len));
    rec.append(body, static_cast<size_t>(len));
    d::write_record(dest, std::move(rec), torch_version, hooks);
  } catch (...) {
    rc = -1;
  }
  if (mark != 0) d::set_inflight(run, launch, kernel, model);
  return rc;
}

// A note the user must see (detail::tell): a record at level >= 1, stderr
// lines at level 0; once != 0: only the first time this process sees it.
AOTID_EXPORT int32_t aotid_write_note(const char* dest, const char* topic, const char* lines,
                                      int32_t once, int32_t level, const char* torch_version) noexcept {
  try {
    aoti_debug::detail::tell(level, dest, topic, lines, torch_version, once != 0);
    return 0;
  } catch (...) {
    return -1;
  }
}

AOTID_EXPORT int64_t aotid_next_call_number() noexcept {
  return aoti_debug::detail::next_call_number();
}

// The record name of a newly loaded model (`name`, then `name#2`...) into buf;
// returns its length, or -1 when it does not fit.
AOTID_EXPORT int64_t aotid_instance_name(const char* name, char* buf, int64_t cap) noexcept {
  try {
    const std::string s = aoti_debug::detail::instance_name(name);
    if (static_cast<int64_t>(s.size()) >= cap) return -1;
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return static_cast<int64_t>(s.size());
  } catch (...) {
    return -1;
  }
}

AOTID_EXPORT void aotid_set_inflight(int64_t run, int64_t launch, const char* name, const char* model) noexcept {
  aoti_debug::detail::set_inflight(run, launch, name, model);
}

AOTID_EXPORT void aotid_clear_inflight() noexcept { aoti_debug::detail::clear_inflight(); }

AOTID_EXPORT void aotid_install_crash_handler() noexcept {
  try {
    aoti_debug::detail::install_crash_handler();
  } catch (...) {
  }
}

// The registry variable this process published (or attached to).
AOTID_EXPORT int32_t aotid_registry_attach() noexcept {
  return aoti_debug::detail::registry() != nullptr ? 0 : -1;
}

AOTID_EXPORT int32_t aotid_glob_match(const char* pattern, const char* text) noexcept {
  try {
    // as the kernel filter applies it (an empty origin never matches)
    const auto pats = aoti_debug::detail::parse_kernels(pattern);
    return aoti_debug::detail::any_glob_matches(pats, text) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// Reads settings from `env` (NULL-terminated "NAME=VALUE" strings) with an
// artifact's compiled values as fallbacks.  Output: one line per problem,
// a line "--", then "field=value" lines of the result.
AOTID_EXPORT int64_t aotid_read_settings(const char* const* env, int32_t level, const char* kernels,
                                         const char* nan_check, int32_t check_inputs,
                                         const char* memcheck, int64_t blackbox, char* buf,
                                         int64_t cap) noexcept {
  try {
    namespace d = aoti_debug::detail;
    d::Settings fallback;
    fallback.level = level;
    fallback.kernels = d::parse_kernels(kernels ? kernels : "");
    std::string err;
    d::parse_nan(nan_check ? nan_check : "off", &fallback.nan_check, &err);
    fallback.check_inputs = check_inputs != 0;
    d::parse_memcheck(memcheck ? memcheck : "off", &fallback.memcheck, &err);
    fallback.blackbox = blackbox;
    std::vector<std::string> problems;
    const d::Settings s = d::read_settings(d::Env{env}, fallback, &problems);
    std::string out;
    for (const std::string& p : problems) out += p + "\n";
    out += "--\n";
    out += "level=" + std::to_string(s.level) + "\n";
    out += "logdest=" + s.logdest + "\n";
    out += "kernels=" + d::join_kernels(s.kernels) + "\n";
    out += std::string("check_inputs=") + (s.check_inputs ? "1" : "0") + "\n";
    out += "nan_check=" + s.nan_check.str() + "\n";
    out += std::string("nan_check_sat=") + (s.nan_check_sat ? "1" : "0") + "\n";
    out += std::string("memcheck=") + d::memcheck_name(s.memcheck) + "\n";
    out += "blackbox=" + std::to_string(s.blackbox) + "\n";
    out += "blackbox_max_mb=" + std::to_string(s.blackbox_max_mb) + "\n";
    out += std::string("sync=") + (s.sync ? "1" : "0") + "\n";
    out += "dump_dir=" + s.dump_dir + "\n";
    out += "dump_max_size_gb=" + d::py_float_repr(s.dump_max_size_gb) + "\n";
    out += "dump_max_count=" + std::to_string(s.dump_max_count) + "\n";
    out += "rank=" + std::to_string(s.rank) + "\n";
    out += "world=" + std::to_string(s.world) + "\n";
    return give(out, buf, cap);
  } catch (...) {
    return -1;
  }
}

// ---------------------------------------------------------------- the black box

// `aoti-debug blackbox recover`: the ring file `ring` of a process that has
// ended, written as a dump folder <pid>-blackbox under `out_dir`.  Output:
// "ok\n" + what the folder holds, or "live\n" / "error\n" + why not.
constexpr int32_t kMaxPid = 4194304;  // PID_MAX_LIMIT of 64-bit Linux

AOTID_EXPORT int64_t aotid_blackbox_recover(const char* ring, const char* out_dir, char* buf, int64_t cap) noexcept {
  try {
    namespace d = aoti_debug::detail;
    // read, not mapped: a file cut short while mapped would be SIGBUS, not a note
    const int fd = ::open(ring, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const int err = fd < 0 ? errno : EINVAL;
      if (fd >= 0) ::close(fd);
      return give("error\n" + d::py_repr(ring) + ": " + (err == EINVAL ? "not a regular file" : d::errno_text(err)),
                  buf, cap);
    }
    std::string data;
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, &data[got], data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    data.resize(got);
    d::ParsedRing parsed;
    std::string why;
    if (!d::box_parse(data.data(), data.size(), &parsed, &why)) return give("error\n" + d::py_repr(ring) + ": " + why, buf, cap);
    // a ring is data: 0 and -1 would name a process group or every process to kill(2)
    if (parsed.pid <= 0 || parsed.pid > kMaxPid)
      return give("error\n" + d::py_repr(ring) + ": its process id " + std::to_string(parsed.pid) +
                      " is not valid (a process id is 1 to " + std::to_string(kMaxPid) +
                      "): the ring is damaged or not a black box's, and is not recovered",
                  buf, cap);
    const uint64_t now = d::proc_start_ticks(parsed.pid);
    if (now != 0 ? now == parsed.start_ticks : ::kill(parsed.pid, 0) == 0 || errno == EPERM)
      return give("live\n" + d::py_repr(ring) + ": process " + std::to_string(parsed.pid) +
                      " is still running, so its ring is left alone (it dumps on SIGUSR2: kill -USR2 " +
                      std::to_string(parsed.pid) + ")",
                  buf, cap);
    d::Settings s;
    s.dump_dir = out_dir;
    d::BoxSummary summary;
    why = d::box_write(parsed, s, "stderr", "", std::to_string(parsed.pid) + "-blackbox", nullptr, &summary);
    if (!why.empty()) return give("error\n" + why, buf, cap);
    return give("ok\n" + d::box_summary_text(summary, parsed), buf, cap);
  } catch (...) {
    return -1;
  }
}

// aoti_debug.blackbox.dump(): this process's ring as a dump folder now.
AOTID_EXPORT int64_t aotid_blackbox_dump(const char* reason, char* buf, int64_t cap) noexcept {
  try {
    namespace d = aoti_debug::detail;
    std::string text;
    const std::string why = d::box_dump(d::Settings(), "stderr", "", nullptr, &text);
    (void)reason;
    return give(why.empty() ? "ok\n" + text : "error\n" + why, buf, cap);
  } catch (...) {
    return -1;
  }
}

// The whole entries of a ring image (`size` bytes at `data`), for tests and
// tools: "ok\n" then one line per entry, "run <seq> <R> <state> <model>" or
// "launch <seq> <R.K> <state> <model> <kernel> <items>", then "note: ..."
// lines; or "error\n" + why it is not a ring.
AOTID_EXPORT int64_t aotid_blackbox_entries(const char* data, int64_t size, char* buf, int64_t cap) noexcept {
  try {
    namespace d = aoti_debug::detail;
    d::ParsedRing ring;
    std::string why;
    if (size < 0 || !d::box_parse(data, static_cast<uint64_t>(size), &ring, &why)) return give("error\n" + why, buf, cap);
    static const char* const states[] = {"?", "writing", "ready", "done"};
    std::vector<const d::BoxEntry*> all;
    for (const auto& e : ring.runs) all.push_back(&e);
    for (const auto& e : ring.launch_entries) all.push_back(&e);
    std::sort(all.begin(), all.end(), [](const d::BoxEntry* a, const d::BoxEntry* b) { return a->seq < b->seq; });
    std::string out = "ok\n";
    for (const d::BoxEntry* e : all) {
      const char* state = e->state <= 3 ? states[e->state] : "?";
      if (e->kind == d::kBoxRun)
        out += "run " + std::to_string(e->seq) + " " + std::to_string(e->run) + " " + state + " " + e->str(0) + "\n";
      else
        out += "launch " + std::to_string(e->seq) + " " + d::run_launch_id(e->run, e->launch) + " " + state + " " +
               e->str(0) + " " + e->str(1) + " " + std::to_string(e->items.size()) + "\n";
    }
    for (const std::string& n : ring.notes) out += "note: " + n + "\n";
    return give(out, buf, cap);
  } catch (...) {
    return -1;
  }
}

// ---------------------------------------------------------------- the Python logger's black box
//
// torch.compile's wrapper (aoti_debug/runtime/blackbox.py) keeps its launches
// in the process's one ring with the artifacts' own writer: one file, one
// lock, one layout.

namespace {

// Arguments from Python (aoti_debug/native/core.py, box_words): eight words
// per value, {kind, dtype, i, bits of d, data, ndim, device type, device
// index}, and each tensor's sizes then strides in `dims`, in value order.  A
// tensor's i is 1 for a weight (a parameter: described, not copied).
constexpr int kWordsPerValue = 8;

struct PyValues {
  std::vector<aoti_debug::Value> values;
  std::vector<uint8_t> constant;
  aoti_debug::Values all() const { return aoti_debug::Values::of(values.data(), values.size()); }
};

PyValues py_values(int32_t n, const int64_t* words, const int64_t* dims) {
  using aoti_debug::Value;
  PyValues py;
  py.values.resize(static_cast<size_t>(n > 0 ? n : 0));
  py.constant.resize(py.values.size() + 1);
  std::vector<Value>& out = py.values;
  for (int32_t k = 0; k < n; ++k) {
    const int64_t* w = words + static_cast<ptrdiff_t>(k) * kWordsPerValue;
    Value& v = out[static_cast<size_t>(k)];
    switch (w[0]) {
      case Value::kTensor:
        v.kind = Value::kTensor;
        v.t = make_view(reinterpret_cast<const void*>(w[4]), static_cast<int32_t>(w[1]), w[5], dims, dims + w[5],
                        static_cast<int32_t>(w[6]), static_cast<int32_t>(w[7]));
        dims += 2 * w[5];
        py.constant[static_cast<size_t>(k)] = (w[2] & 1) != 0;  // flags: 1 a weight, 2 requires_grad
        v.b = (w[2] & 2) != 0;
        break;
      case Value::kIntList:
        v.kind = Value::kIntList, v.list = dims, v.i = w[2];
        dims += w[2];
        break;
      case Value::kBool: v.kind = Value::kBool, v.b = w[2] != 0; break;
      case Value::kInt: v.kind = Value::kInt, v.i = w[2]; break;
      case Value::kDouble: v.kind = Value::kDouble, std::memcpy(&v.d, &w[3], sizeof v.d); break;
      default: v.kind = Value::kNone;
    }
  }
  return py;
}

// What the Python side said when it opened the ring (its settings, its log).
struct PyBox {
  aoti_debug::detail::Settings settings;  // its logdest: where the black box's notes go
  std::string tv;
  bool set = false;
};
PyBox& py_box() {
  static PyBox* box = new PyBox();  // never freed: a launch may race the interpreter's exit
  return *box;
}

// A launch site of the Python wrapper, with the strings it points to.
struct PySite {
  std::string kernel, nodes, source, lines, ops;
  std::vector<std::string> names, scales, dequants;
  std::vector<aoti_debug::ArgSpec> args;
  aoti_debug::Site site{};
};

}  // namespace

// Opens the process's ring (or finds it open): 1 on, 0 off (a note says why).
AOTID_EXPORT int32_t aotid_blackbox_open(int64_t launches, int32_t level, const char* dest, const char* tv,
                                         const char* dump_dir, int64_t max_mb, double dump_max_size_gb,
                                         int64_t dump_max_count, int64_t rank, int64_t world) noexcept {
  try {
    namespace d = aoti_debug::detail;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    PyBox& box = py_box();
    if (!box.set) {  // the first model's settings: one ring, one dump directory per process
      box.settings.dump_dir = dump_dir ? dump_dir : "aoti_debug_dumps";
      box.settings.blackbox = launches;
      box.settings.blackbox_max_mb = max_mb;
      box.settings.dump_max_size_gb = dump_max_size_gb;
      box.settings.dump_max_count = dump_max_count;
      box.settings.rank = rank, box.settings.world = world;
      box.settings.logdest = dest ? dest : "stdout";
      box.tv = tv ? tv : "";
      box.set = true;
    }
    pthread_mutex_unlock(&mu);
    return d::box_open(box.settings, launches, level, box.settings.logdest, box.tv.c_str()) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// A site handle for the calls below (freed with aotid_blackbox_site_free).
AOTID_EXPORT void* aotid_blackbox_site(const char* kernel, const char* nodes, const char* source, const char* lines,
                                       const char* ops, int32_t nargs, const char* const* names,
                                       const int32_t* roles, const int32_t* constants,
                                       const char* const* scales, const char* const* dequants) noexcept {
  try {
    PySite* p = new PySite();
    p->kernel = kernel ? kernel : "", p->nodes = nodes ? nodes : "", p->source = source ? source : "";
    p->lines = lines ? lines : "", p->ops = ops ? ops : "";
    p->names.reserve(static_cast<size_t>(nargs));
    p->scales.reserve(static_cast<size_t>(nargs));
    p->dequants.reserve(static_cast<size_t>(nargs));
    for (int32_t k = 0; k < nargs; ++k) p->names.push_back(names[k] ? names[k] : "");
    for (int32_t k = 0; k < nargs; ++k) p->scales.push_back(scales[k] ? scales[k] : "");
    for (int32_t k = 0; k < nargs; ++k) p->dequants.push_back(dequants && dequants[k] ? dequants[k] : "");
    for (int32_t k = 0; k < nargs; ++k) {  // scales[k] null: not read as a scale; dequants[k] null: no operand
      aoti_debug::ArgSpec a{p->names[k].c_str(), static_cast<aoti_debug::Role>(roles[k]), constants[k] != 0,
                            scales[k] ? p->scales[k].c_str() : nullptr};
      a.dequant = dequants && dequants[k] ? p->dequants[k].c_str() : nullptr;
      p->args.push_back(a);
    }
    p->site.kernel = p->kernel.c_str(), p->site.nodes = p->nodes.c_str(), p->site.source = p->source.c_str();
    p->site.module = "", p->site.args = p->args.data(), p->site.nargs = nargs;
    p->site.lines = p->lines.c_str(), p->site.ops = p->ops.c_str();
    return p;
  } catch (...) {
    return nullptr;
  }
}

AOTID_EXPORT void aotid_blackbox_site_free(void* site) noexcept { delete static_cast<PySite*>(site); }

// Whether reading the values takes long enough (more than 2^24 elements in all:
// a level-5 record's statistics, 2 ms to 6 ms; the black box's copy of them
// into its ring) that other Python threads should run meanwhile, the GIL
// released around it and not only where a write would wait.  Below it, the
// read takes less than about the interpreter's switch interval (5 ms), for
// which any thread may hold the GIL; releasing it would cost the launch a
// wait of up to that interval to take it back from a busy thread
// (bench/bench_gil.py).
static bool reads_long(const aoti_debug::Value* values, int32_t n) {
  constexpr int64_t kLongRead = int64_t{1} << 24;  // elements
  int64_t total = 0;
  for (int32_t k = 0; k < n; ++k) {
    if (values[k].kind != aoti_debug::Value::kTensor) continue;
    total += aoti_debug::detail::numel_of(values[k].t);  // a tensor's numel fits int64 (torch's own bound)
    if (total > kLongRead) return true;
  }
  return false;
}
static bool reads_long(const PyValues& py) { return reads_long(py.values.data(), static_cast<int32_t>(py.values.size())); }

// Whether another thread holds the black box's ring: a dump holds its lock for
// the whole write of a folder, so the GIL goes first, as for any wait (an append
// holds it briefly; one that starts after this look is waited for with the GIL).
static bool ring_busy() {
  aoti_debug::detail::BoxState* b = aoti_debug::detail::box_state();
  if (b == nullptr || __atomic_load_n(&b->status, __ATOMIC_ACQUIRE) != 1) return false;
  if (pthread_mutex_trylock(&b->lock) != 0) return true;
  pthread_mutex_unlock(&b->lock);
  return false;
}

// A run's model inputs.  `hooks`: the caller's lock (the GIL: native/core.py
// calls the black box's per-run and per-launch entry points through
// ctypes.PyDLL), released around a long copy.
AOTID_EXPORT void aotid_blackbox_run(const char* model, int64_t run, int32_t n, const char* const* names,
                                     const int64_t* words, const int64_t* dims,
                                     const aoti_debug::detail::WaitHooks* hooks) noexcept {
  try {
    const PyValues py = py_values(n, words, dims);
    aoti_debug::detail::Released released(hooks);
    if (ring_busy() || reads_long(py)) released.now();
    const aoti_debug::Run r{0, run, 0, nullptr};
    aoti_debug::detail::box_run(r, model, "", names, py.all(), py_box().settings, py.constant.data());
  } catch (...) {
  }
}

// Before launch R.K at `site` (its arguments in site order): out[0..2] the
// entry {seq, pos, region}, for aotid_blackbox_done (seq 0: not kept).
// `hooks` as aotid_blackbox_run's, released too before a dump SIGUSR2 asked for.
AOTID_EXPORT void aotid_blackbox_launch(void* site, const char* model, int64_t run, int64_t launch, int32_t level,
                                        int32_t n, const int64_t* words, const int64_t* dims, int64_t* out,
                                        const aoti_debug::detail::WaitHooks* hooks) noexcept {
  try {
    namespace d = aoti_debug::detail;
    PyBox& box = py_box();
    d::Released released(hooks);
    const d::BoxState* b = d::box_state();
    if ((b != nullptr && b->requested) || ring_busy()) released.now();  // box_serve_request writes a dump folder
    d::box_serve_request(box.settings, box.settings.logdest, box.tv.c_str(), level);
    const PyValues py = py_values(n, words, dims);
    if (reads_long(py)) released.now();
    const aoti_debug::Run r{level, run, launch, nullptr};
    const d::BoxRef ref =
        d::box_launch(static_cast<PySite*>(site)->site, r, model, py.all(), box.settings, py.constant.data());
    out[0] = static_cast<int64_t>(ref.seq), out[1] = static_cast<int64_t>(ref.pos), out[2] = ref.region;
  } catch (...) {
    out[0] = 0;
  }
}

// The launch whose entry aotid_blackbox_launch wrote to `ref` has returned.
// `hooks` as aotid_blackbox_run's.
AOTID_EXPORT void aotid_blackbox_done(const int64_t* ref, const aoti_debug::detail::WaitHooks* hooks) noexcept {
  aoti_debug::detail::BoxRef r;
  r.seq = static_cast<uint64_t>(ref[0]), r.pos = static_cast<uint64_t>(ref[1]), r.region = static_cast<int>(ref[2]);
  aoti_debug::detail::Released released(hooks);
  if (ring_busy()) released.now();
  aoti_debug::detail::box_done(r);
}

// A check fired at launch R.K (`site` null: no launch, e.g. at the run's
// end): the ring goes to a dump folder, the failing launch's outputs with it.
AOTID_EXPORT void aotid_blackbox_fired(const char* what, const char* model, int64_t run, int64_t launch,
                                       int32_t level, void* site, int32_t n, const int64_t* words,
                                       const int64_t* dims) noexcept {
  try {
    PyBox& box = py_box();
    const PyValues py = py_values(n, words, dims);
    aoti_debug::detail::box_fired_dump(box.settings, box.settings.logdest, box.tv.c_str(), level, what, model, run, launch,
                                       site ? &static_cast<PySite*>(site)->site : nullptr, py.all());
  } catch (...) {
  }
}

namespace {

// A run's texts, made once a run (aotid_record_texts): `c` the C strings
// aotid_write_values and aotid_write_record take as `texts` (first, so that
// the RunTexts is that array), and the destination and model name as the
// strings write_record and launch_record take, so that a record copies
// neither (the C++ shim's Model keeps them so too).
struct RunTexts {
  const char* c[4];
  std::string dest, model, torch_version, facts;
};
static_assert(std::is_standard_layout<RunTexts>::value && offsetof(RunTexts, c) == 0, "a RunTexts* is its `c`");

const RunTexts& run_texts(const char* const* texts) { return *reinterpret_cast<const RunTexts*>(texts); }

}  // namespace

// {destination, model, torch version, a run record's facts} as a RunTexts
// (its address is the `texts` of aotid_write_values / aotid_write_record);
// null on failure.  Freed by aotid_record_texts_free.
AOTID_EXPORT void* aotid_record_texts(const char* dest, const char* model, const char* torch_version,
                                      const char* facts) noexcept {
  try {
    RunTexts* t = new RunTexts{{}, dest, model, torch_version, facts};
    t->c[0] = t->dest.c_str(), t->c[1] = t->model.c_str(), t->c[2] = t->torch_version.c_str();
    t->c[3] = t->facts.c_str();
    return t;
  } catch (...) {
    return nullptr;
  }
}

AOTID_EXPORT void aotid_record_texts_free(void* texts) noexcept { delete static_cast<RunTexts*>(texts); }

// The layout of PyRecord and Value this core was built with (py_record.h):
// the launch extension calls aotid_write_values only when it built the same.
AOTID_EXPORT uint64_t aotid_py_record_abi() noexcept { return aoti_debug::detail::py_record_abi(); }

// torch.compile's launch extension's records (pylaunch.cpp): aotid_write_record's
// kinds 0 and 1 without a statistics `out`, the values handed over as the
// shim's own Value structs (py_record.h).  0, or -1 when nothing was written.
AOTID_EXPORT int32_t aotid_write_values(const aoti_debug::detail::PyRecord* rec) noexcept {
  namespace d = aoti_debug::detail;
  if (rec->site == nullptr || (rec->kind != 0 && rec->kind != 1) || rec->n < 0) return -1;
  const aoti_debug::Site& s = static_cast<PySite*>(rec->site)->site;
  const bool end = rec->kind == 1, mark = rec->mark != 0;
  int32_t rc = 0;
  if (mark && end) d::clear_inflight();
  try {
    const aoti_debug::Run r{rec->level, rec->run, rec->launch, nullptr};
    const aoti_debug::Values args = aoti_debug::Values::of(rec->values, static_cast<size_t>(rec->n));
    const RunTexts& t = run_texts(rec->texts);
    d::Released released(rec->hooks);
    if (rec->level >= 5 && reads_long(rec->values, rec->n)) released.now();
    d::write_record(t.dest, d::launch_record(t.model, r, s, args, end, false), rec->texts[2],
                    released.done() ? nullptr : rec->hooks);
  } catch (...) {
    rc = -1;
  }
  if (mark && !end) d::set_inflight(rec->run, rec->launch, s.kernel, rec->texts[1]);
  return rc;
}

// torch.compile's records, rendered by the C++ shim's own code (launch-inl.h)
// and written in one call.  `head`: {kind, R, K, level, mark, n, where the
// dims start}, then n values' words and their dims (py_values), in one array:
// each argument of a ctypes call costs more than the word it passes.  `kind`
// 0 a `launch` record (then, with `mark`, the launch marked in flight, in
// before_launch's order), 1 `launch-end` (with `mark`, the mark cleared
// first, in after_launch's order), 2 `run` (`names` its inputs' labels), 3
// `run-end`.  `site`: an aotid_blackbox_site handle, for launches.
// `texts`: {destination, model, torch version, a run record's facts}, an
// aotid_record_texts.  With
// `out` (level >= 5), out[k] gets value k's statistics as the record computed
// them, kind -1 where it computed none: the NaN/Inf check after a launch
// reads nothing twice.  `hooks`: the caller's lock (the GIL: native/core.py
// calls this through ctypes.PyDLL, which holds it), released as
// aotid_write_values does.  0, or -1 when nothing was written.
AOTID_EXPORT int32_t aotid_write_record(const int64_t* head, void* site, const char* const* texts,
                                        const char* const* names, aoti_debug::Stats* out,
                                        const aoti_debug::detail::WaitHooks* hooks) noexcept {
  namespace d = aoti_debug::detail;
  const int64_t kind = head[0], run = head[1], launch = head[2];
  const int32_t level = static_cast<int32_t>(head[3]), n = static_cast<int32_t>(head[5]);
  const aoti_debug::Site* s = kind <= 1 && site != nullptr ? &static_cast<PySite*>(site)->site : nullptr;
  int32_t rc = 0;
  if (head[4] != 0 && kind == 1) d::clear_inflight();
  try {
    const PyValues py = py_values(n, head + 7, head + head[6]);
    const aoti_debug::Run r{level, run, launch, nullptr};
    const std::string& model = run_texts(texts).model;
    d::Released released(hooks);
    if (level >= 5 && reads_long(py)) released.now();
    std::string rec;
    if (s != nullptr) {
      rec = d::launch_record(model, r, *s, py.all(), kind == 1, false);
    } else if (kind >= 2) {
      rec = d::run_record(kind == 2 ? "run" : "run-end", model, r, kind == 2 ? texts[3] : "",
                          kind == 2 ? "in" : "out", names, py.all());
    } else {
      return -1;
    }
    if (out != nullptr) {
      // the entries this record added (the memo was opened for it: level >= 5)
      const d::StatsMemo& memo = d::stats_memo();
      for (int32_t k = 0; k < n; ++k) {
        const aoti_debug::Value& v = py.values[static_cast<size_t>(k)];
        const aoti_debug::Stats* got = level >= 5 && v.kind == aoti_debug::Value::kTensor ? memo.find(v.t) : nullptr;
        if (got != nullptr) out[k] = *got;
        else out[k].kind = -1;
      }
    }
    d::write_record(run_texts(texts).dest, std::move(rec), texts[2], released.done() ? nullptr : hooks);
  } catch (...) {
    rc = -1;
  }
  if (head[4] != 0 && kind == 0 && s != nullptr) d::set_inflight(run, launch, s->kernel, texts[1]);
  return rc;
}
