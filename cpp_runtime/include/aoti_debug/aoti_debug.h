// aoti-debug's public C++ API for hand-written ops (custom kernels, C++
// extensions): the same records, levels and filter as the Python logger's
// log_api decorator.
//
//   Value my_op(const TensorView& x, int64_t k) {
//     AOTI_DEBUG_SCOPE(scope, "mylib::my_op", aoti_debug::Value(x), k);
//     ...
//     AOTI_DEBUG_SCOPE_RETURN(scope, aoti_debug::Value(y));
//   }
//
// AOTI_DEBUG_SCOPE writes `call N name` before the body (level >= 3: the
// arguments, labelled `arg[i] <expression>`, without an aoti_debug::tensor()
// or Value() around it); AOTI_DEBUG_SCOPE_RETURN writes
// `return N name` with `output` (level >= 3).  A scope left without RETURN
// logs `output: None`; one left by an exception writes `raise N name`.
// Arguments are only evaluated when the scope is active.  The level is
// AOTI_DEBUG_LOGLEVEL (capped at AOTI_DEBUG_SCOPE_MAX_LEVEL); the filter,
// AOTI_DEBUG_KERNELS, is matched against the name.  Tensor adapters:
// aoti_debug/aoti.h (AtenTensorHandle), aoti_debug/torch.h (at::Tensor).
#pragma once

#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include "config.h"
#include "launch.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// This copy's view of the environment, read once (defaults as fallbacks).
inline const Settings& process_settings() {
  static const Settings s = [] {
    std::vector<std::string> problems;
    Settings r = read_settings(Env{}, Settings{}, &problems);
    std::string lines;
    for (const std::string& p : problems) lines += (lines.empty() ? "" : "\n") + p;
    if (!lines.empty()) tell(r.level, r.logdest, "settings", lines, AOTI_DEBUG_TORCH_VERSION, true);
    if (r.level >= 1 && AOTI_DEBUG_SCOPE_MAX_LEVEL >= 1) install_crash_handler();
    return r;
  }();
  return s;
}

// "aoti_debug::tensor(x)" -> "x": the adapters (tensor, Value) are how the
// argument is passed, not what it is; the user knows it by the inner name.
inline std::string unwrap_adapter(const std::string& label) {
  std::string s = label;
  if (s.rfind("::", 0) == 0) s = s.substr(2);
  if (s.rfind("aoti_debug::", 0) == 0) s = s.substr(12);
  for (const char* adapter : {"tensor(", "Value("}) {
    const size_t n = std::char_traits<char>::length(adapter);
    if (s.size() <= n + 1 || s.compare(0, n, adapter) != 0 || s.back() != ')') continue;
    int depth = 0;  // the adapter's ')' must be the last character
    for (size_t i = n - 1; i < s.size(); ++i) {
      if (s[i] == '(') ++depth;
      if (s[i] == ')' && --depth == 0) return i == s.size() - 1 ? py_strip(s.substr(n, i - n)) : label;
    }
  }
  return label;
}

// "x, f(a, b), y" -> {"x", "f(a, b)", "y"}: the labels of a scope's arguments.
inline std::vector<std::string> split_arg_text(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (const char* p = text ? text : ""; *p; ++p) {
    const char c = *p;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(py_strip(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!py_strip(cur).empty() || !out.empty()) out.push_back(py_strip(cur));
  for (std::string& label : out) label = unwrap_adapter(label);
  return out;
}

}  // namespace detail

// Static description of one AOTI_DEBUG_SCOPE (one per call site).
struct ScopeSite {
  const char* name;
  const char* arg_text;  // the macro's stringified arguments
  int32_t match_cache = -1;
};

class Scope {
 public:
  explicit Scope(ScopeSite& site) : site_(site) {
    const detail::Settings& s = detail::process_settings();
    level_ = s.level < AOTI_DEBUG_SCOPE_MAX_LEVEL ? s.level : AOTI_DEBUG_SCOPE_MAX_LEVEL;
    if (level_ != 0 && !s.kernels.empty()) {
      int32_t m = __atomic_load_n(&site.match_cache, __ATOMIC_RELAXED);
      if (m < 0) {
        m = detail::any_glob_matches(s.kernels, site.name) ? 1 : 0;
        __atomic_store_n(&site.match_cache, m, __ATOMIC_RELAXED);
      }
      if (m == 0) level_ = 0;
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  bool active() const { return level_ != 0; }

  // `call N name` with the arguments.
  AOTI_DEBUG_NOINLINE void enter(std::initializer_list<Value> args) {
    call_ = detail::next_call_number();
    exceptions_ = std::uncaught_exceptions();
    std::string rec = detail::header_line("call", std::to_string(call_), site_.name, detail::header_facts(-1, -1));
    if (level_ >= 3) {
      const std::vector<std::string> names = detail::split_arg_text(site_.arg_text);
      int k = 0;
      for (const Value& v : args) {
        std::string label = "arg[" + std::to_string(k) + "]";
        const std::string name = k < static_cast<int>(names.size()) ? names[k] : "-";
        detail::append_item(rec, 2, label.c_str(), name.c_str(), v, level_);
        ++k;
      }
    }
    write(rec);
    outer_ = detail::current_inflight();
    detail::set_inflight(-1, call_, site_.name);
    entered_ = true;
  }

  // `return N name` with the output(s): none -> None, several -> a tuple.
  AOTI_DEBUG_NOINLINE void leave(std::initializer_list<Value> outputs) {
    if (!entered_ || left_) return;
    left_ = true;
    restore_inflight();
    if (level_ < 3) return;  // a return without body is not written at level 1
    std::string rec = detail::header_line("return", std::to_string(call_), site_.name);
    if (outputs.size() == 0) detail::append_item(rec, 2, "output", nullptr, Value(), level_);
    else if (outputs.size() == 1) detail::append_item(rec, 2, "output", nullptr, *outputs.begin(), level_);
    else detail::append_tuple_item(rec, 2, "output", outputs.begin(), static_cast<int>(outputs.size()), level_);
    write(rec);
  }

  ~Scope() {
    if (!entered_ || left_) return;
    if (std::uncaught_exceptions() > exceptions_) {
      // The exception object is out of reach while unwinding.
      left_ = true;
      restore_inflight();
      std::string rec = detail::header_line("raise", std::to_string(call_), site_.name);
      rec += "  exception: C++ exception: left the scope while unwinding\n";
      write(rec);
    } else {
      leave({});
    }
  }

 private:
  // A crash after the scope, still inside the launch that ran the op, names
  // that launch again.
  void restore_inflight() {
    if (outer_.active) detail::set_inflight(outer_.run, outer_.launch, outer_.name.c_str(), outer_.model.c_str());
    else detail::clear_inflight();
  }

  void write(const std::string& rec) const {
    detail::write_record(detail::process_settings().logdest, rec, AOTI_DEBUG_TORCH_VERSION);
  }

  ScopeSite& site_;
  int level_ = 0;
  int64_t call_ = 0;
  int exceptions_ = 0;
  bool entered_ = false;
  bool left_ = false;
  detail::InflightMark outer_;
};

AOTI_DEBUG_NAMESPACE_END

#define AOTI_DEBUG_SCOPE(var, name, ...)                                   \
  static ::aoti_debug::ScopeSite var##_aotid_site{name, #__VA_ARGS__};     \
  ::aoti_debug::Scope var(var##_aotid_site);                               \
  if (AOTI_DEBUG_UNLIKELY(var.active())) var.enter({__VA_ARGS__})

#define AOTI_DEBUG_SCOPE_RETURN(var, ...)                                  \
  do {                                                                     \
    if (AOTI_DEBUG_UNLIKELY(var.active())) var.leave({__VA_ARGS__});       \
  } while (0)
