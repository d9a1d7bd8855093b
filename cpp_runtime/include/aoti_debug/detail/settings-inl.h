// settings.h's out-of-line part: the bodies of its core functions and the
// helpers only they use.  settings.h includes it at its end wherever the bodies
// are compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the
// core object (src/core.cpp).
#pragma once

#include "settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- Python-compatible text helpers ----

inline bool py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
         (c >= '\x1c' && c <= '\x1f');
}

inline std::string py_strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && py_space(s[b])) ++b;
  while (e > b && py_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

inline std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// Code points Python's str.isprintable() rejects, as far as logs meet them.
inline bool py_unprintable(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad || (cp >= 0x2000 && cp <= 0x200f) ||
         (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 ||
         (cp >= 0xd800 && cp <= 0xf8ff) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);
}

AOTI_DEBUG_CORE_FN std::string py_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      if (c == '\\') out += "\\\\";
      else if (c == static_cast<unsigned char>(q)) (out += '\\') += q;
      else if (c == '\t') out += "\\t";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c < 0x20 || c == 0x7f) append_hex(out, "\\x", c, 2);
      else out += static_cast<char>(c);
      continue;
    }
    // Decode one UTF-8 sequence strictly (as Python does).
    int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (c >= 0xf5) len = 0;
    uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char cc = p[i + k];
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
               (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
      ok = false;
    if (!ok) {
      append_hex(out, "\\udc", c, 2);
      ++i;
      continue;
    }
    if (py_unprintable(cp)) {
      if (cp <= 0xff) append_hex(out, "\\x", cp, 2);
      else if (cp <= 0xffff) append_hex(out, "\\u", cp, 4);
      else append_hex(out, "\\U", cp, 8);
    } else {
      out.append(s, i, static_cast<size_t>(len));
    }
    i += static_cast<size_t>(len);
  }
  out += q;
  return out;
}

// settings.problem(): the one wording of a bad-value message.
inline std::string problem(const std::string& name, const std::string& value,
                           const std::string& accepted) {
  return name + "=" + py_repr(value) + " is not valid: " + accepted;
}

// Python's repr(float) for the finite positive values a size limit holds.
inline std::string py_float_repr(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {  // shortest round-trip digits
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf = d.ddde[+-]XX -> digits and decimal exponent
  std::string digits;
  const char* e = std::strchr(buf, 'e');
  for (const char* c = buf; c < e; ++c)
    if (*c >= '0' && *c <= '9') digits += *c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp = std::atoi(e + 1);
  std::string out = v < 0 ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  if (static_cast<int>(digits.size()) <= exp + 1)
    return out + digits + std::string(static_cast<size_t>(exp + 1 - digits.size()), '0') + ".0";
  return out + digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
         digits.substr(static_cast<size_t>(exp + 1));
}

// ---- the grammar, the same in settings.py ----
//
// ASCII only: surrounding ASCII whitespace is ignored, words are matched
// ignoring ASCII case, a whole number is ASCII digits, a decimal is ASCII
// digits with at most one '.'.  No sign, underscore, exponent, nan or inf.

inline bool setting_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline std::string setting_strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && setting_space(s[b])) ++b;
  while (e > b && setting_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

inline std::string setting_word(const std::string& s) { return ascii_lower(setting_strip(s)); }

// ASCII digits, leading zeros allowed; saturates at INT64_MAX (as settings.py
// does: a limit that large is no limit either way).
inline bool whole_number(const std::string& t, int64_t* out) {
  const std::string s = setting_strip(t);
  if (s.empty()) return false;
  int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    const int d = c - '0';
    v = v > (INT64_MAX - d) / 10 ? INT64_MAX : v * 10 + d;
  }
  *out = v;
  return true;
}

// ASCII digits with at most one '.' (0.5, 2, .5, 5.), at least one digit.
inline bool decimal_number(const std::string& t, double* out) {
  std::string s = setting_strip(t);
  bool digit = false, dot = false;
  for (const char c : s) {
    if (c >= '0' && c <= '9') digit = true;
    else if (c == '.' && !dot) dot = true;
    else return false;
  }
  if (!digit) return false;
  // strtod honours LC_NUMERIC: hand it the locale's decimal point.
  const char* dp = std::localeconv()->decimal_point;
  if (dp && std::strcmp(dp, ".") != 0) {
    const size_t pos = s.find('.');
    if (pos != std::string::npos) s.replace(pos, 1, dp);
  }
  *out = std::strtod(s.c_str(), nullptr);
  return true;
}

// ---- parsers: true on success, else *err = the accepted-values text ----

inline bool parse_level(const std::string& t, int* v, std::string* err) {
  int64_t x;
  if (!whole_number(t, &x)) x = -1;
  if (x != 0 && x != 1 && x != 3 && x != 5 && x != 10) {
    *err = "expected one of 0, 1, 3, 5, 10";
    return false;
  }
  *v = static_cast<int>(x);
  return true;
}

inline bool parse_upstream_level(const std::string& t, int* v, std::string* err) {
  int64_t x;
  if (!whole_number(t, &x)) x = -1;
  if (x == 0) *v = 0;
  else if (x == 1) *v = 10;
  else if (x == 2) *v = 5;
  else if (x == 3) *v = 1;
  else {
    *err = "expected one of 0, 1, 2, 3 (1 -> level 10, 2 -> level 5, 3 -> level 1)";
    return false;
  }
  return true;
}

inline bool parse_bool(const std::string& t, bool* v, std::string* err) {
  const std::string s = setting_word(t);
  if (s == "1" || s == "true" || s == "yes" || s == "on") *v = true;
  else if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) *v = false;
  else {
    *err = "expected one of 0, 1, true, false, yes, no, on, off";
    return false;
  }
  return true;
}

// A check's mode as a word, with "", "0", "false" and "no" meaning off.
inline std::string setting_mode(const std::string& t) {
  const std::string s = setting_word(t);
  return s.empty() || s == "0" || s == "false" || s == "no" ? "off" : s;
}

inline bool parse_nan(const std::string& t, NanCheck* v, std::string* err) {
  const std::string s = setting_mode(t);
  static const char* const modes[] = {"off", "warn", "raise", "warn:nan", "raise:nan",
                                      "warn:naninf", "raise:naninf"};
  bool known = false;
  for (const char* m : modes) known = known || s == m;
  if (!known) {
    *err = "expected one of off, warn, raise, warn:nan, raise:nan, warn:naninf, raise:naninf";
    return false;
  }
  NanCheck n;
  if (s != "off") {
    n.action = s.compare(0, 4, "warn") == 0 ? kNanWarn : kNanRaise;
    n.count_inf = s.size() > 7 && s.compare(s.size() - 6, 6, "naninf") == 0;
  }
  *v = n;
  return true;
}

// What run time does with a value compiled in (Model::init): lowers it, never raises it.
// Ordered values (level, check_inputs, memcheck, blackbox) by their order; a NaN check by its
// action, counting Inf only where both do (runtime/nan_checks.py's asks_for_more, effective).
template <class T>
bool asks_for_more(const T& compiled, const T& wanted) { return wanted > compiled; }
template <class T>
T lowest(const T& compiled, const T& wanted) { return wanted < compiled ? wanted : compiled; }
inline bool asks_for_more(const NanCheck& c, const NanCheck& r) {
  return r.action > c.action || (r.count_inf && !c.count_inf);
}
inline NanCheck lowest(const NanCheck& c, const NanCheck& r) {
  NanCheck n;
  n.action = r.action < c.action ? r.action : c.action;
  n.count_inf = n.action != kNanOff && c.count_inf && r.count_inf;
  return n;
}

inline const char* memcheck_name(int action) {
  return action == kNanRaise ? "raise" : action == kNanWarn ? "warn" : "off";
}


inline std::string blackbox_name(int64_t launches) { return launches > 0 ? std::to_string(launches) : "off"; }

// AOTI_DEBUG_BLACKBOX: off (or 0), or how many launches the ring keeps.
inline bool parse_blackbox(const std::string& t, int64_t* v, std::string* err) {
  int64_t n = 0;
  if (setting_mode(t) == "off") n = 0;
  else if (!whole_number(t, &n) || n > kBlackboxMaxLaunches) {
    *err = "expected off, or a number of launches from 0 to " + std::to_string(kBlackboxMaxLaunches) +
           " (0: off), e.g. 64";
    return false;
  }
  *v = n;
  return true;
}

inline bool parse_memcheck(const std::string& t, int* v, std::string* err) {
  const std::string s = setting_mode(t);
  if (s == "off") *v = kNanOff;
  else if (s == "warn") *v = kNanWarn;
  else if (s == "raise") *v = kNanRaise;
  else {
    *err = "expected one of off, warn, raise";
    return false;
  }
  return true;
}

inline bool parse_upstream_nan(const std::string& t, NanCheck* v, std::string* err) {
  const std::string s = setting_word(t);
  if (s == "1" || s == "true") {
    v->action = kNanRaise, v->count_inf = true;
  } else if (s == "0" || s == "false" || s.empty()) {
    *v = NanCheck();
  } else {
    *err = "expected 0 or 1";
    return false;
  }
  return true;
}

// The globs of a filter already checked (an artifact's compiled-in one).
inline std::vector<std::string> parse_kernels(const std::string& t) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= t.size()) {
    size_t end = t.find(',', start);
    if (end == std::string::npos) end = t.size();
    const std::string p = setting_word(t.substr(start, end - start));
    if (!p.empty()) out.push_back(p);
    start = end + 1;
  }
  return out;
}

// Every '[' opens a set that ']' closes (the matcher below would quietly
// read it as a literal '[').
inline bool glob_sets_closed(const std::string& g) {
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != '[') continue;
    size_t j = i + 1;  // optional '!', then a ']' right after is a member
    if (j < g.size() && g[j] == '!') ++j;
    if (j < g.size() && g[j] == ']') ++j;
    j = g.find(']', j);
    if (j == std::string::npos) return false;
    i = j;
  }
  return true;
}

// An empty value means every kernel; otherwise no glob may be empty (a stray
// comma) and every set must be closed.
inline bool parse_kernel_filter(const std::string& t, std::vector<std::string>* v, std::string* err) {
  std::vector<std::string> globs = parse_kernels(t);
  size_t commas = 0;
  for (const char c : t) commas += c == ',';
  bool ok = setting_strip(t).empty() || globs.size() == commas + 1;
  for (const std::string& g : globs) ok = ok && glob_sets_closed(g);
  if (!ok) {
    *err = "expected comma-separated globs (*, ?, [...]), none of them empty, every [ closed by ]";
    return false;
  }
  *v = globs;
  return true;
}

inline std::string join_kernels(const std::vector<std::string>& k) {
  std::string s;
  for (size_t i = 0; i < k.size(); ++i) s += (i ? "," : "") + k[i];
  return s;
}

// ---- the glob matcher ----

// fnmatch-style match of an already-lowercased pattern against text (any case).
inline bool glob_match(const char* pat, const char* text) {
  const char* star_p = nullptr;  // backtrack point: pattern after the last '*'
  const char* star_t = nullptr;
  for (;;) {
    const char c = *text ? static_cast<char>(*text >= 'A' && *text <= 'Z' ? *text - 'A' + 'a' : *text)
                         : '\0';
    bool step = false;
    if (*pat == '*') {
      star_p = ++pat;
      star_t = text;
      continue;
    }
    if (*text == '\0') {
      if (*pat == '\0') return true;
    } else if (*pat == '?') {
      step = true;
    } else if (*pat == '[') {
      // A set; without its closing ']' the '[' is literal.
      const char* q = pat + 1;
      bool negate = false;
      if (*q == '!') negate = true, ++q;
      const char* first = q;
      if (*q == ']') ++q;
      while (*q && *q != ']') ++q;
      if (*q == ']') {
        bool hit = false;
        for (const char* r = first; r < q; ++r) {
          if (r + 2 < q && r[1] == '-') {
            if (c >= r[0] && c <= r[2]) hit = true;
            r += 2;
          } else if (*r == c) {
            hit = true;
          }
        }
        if (hit != negate) {
          pat = q + 1;
          ++text;
          continue;
        }
      } else if (c == '[') {
        step = true;
      }
    } else if (*pat == c) {
      step = true;
    }
    if (step) {
      ++pat, ++text;
      continue;
    }
    if (star_p == nullptr || *star_t == '\0') return false;
    pat = star_p;
    text = ++star_t;
  }
}

AOTI_DEBUG_CORE_FN bool any_glob_matches(const std::vector<std::string>& pats, const char* text) {
  if (text == nullptr || *text == '\0') return false;
  for (const std::string& p : pats)
    if (glob_match(p.c_str(), text)) return true;
  return false;
}

// ---- reading ----



AOTI_DEBUG_CORE_FN ProcessRank process_rank(const Env& env) {
  static const char* const names[2][2] = {{"RANK", "WORLD_SIZE"}, {"LOCAL_RANK", "LOCAL_WORLD_SIZE"}};
  ProcessRank r;
  std::string value;
  for (const auto& n : names) {
    int64_t x = 0;
    if (!env.get(n[0], &value) || !whole_number(value, &x)) continue;
    r.rank = x;
    if (env.get(n[1], &value) && whole_number(value, &x) && x > 0) r.world = x;
    break;
  }
  return r;
}

// `dest` with %r replaced by the rank; false (and *err) when %r is there and the rank unknown.
inline bool expand_rank(std::string* dest, int64_t rank, std::string* err) {
  const size_t at = dest->find("%r");
  if (at == std::string::npos) return true;
  if (rank < 0) {
    *err = "%r becomes the process's rank, read from RANK, else LOCAL_RANK (torchrun sets both), "
           "and neither is set to a whole number";
    return false;
  }
  std::string out;
  for (size_t i = 0; i < dest->size(); ++i) {
    if ((*dest)[i] == '%' && i + 1 < dest->size() && (*dest)[i + 1] == 'r') {
      append_i64(out, rank);
      ++i;
    } else {
      out += (*dest)[i];
    }
  }
  *dest = out;
  return true;
}

// ---- the variables: one row each, read by one loop (settings.py's VARIABLES, read_with_problems) ----

// A path whose %r becomes the process's rank (AOTI_DEBUG_LOGDEST, AOTI_DEBUG_DUMP_DIR); `blank`
// is the accepted-values text for an empty one.
inline bool parse_ranked_path(const std::string& t, int64_t rank, const char* blank, std::string* v,
                              std::string* err) {
  std::string d = setting_strip(t);
  if (d.empty()) {
    *err = blank;
    return false;
  }
  if (!expand_rank(&d, rank, err)) return false;
  *v = d;
  return true;
}

inline bool parse_blackbox_mb(const std::string& t, int64_t* v, std::string* err) {
  int64_t x = 0;
  if (!whole_number(t, &x) || x < 1 || x > kBlackboxMaxMb) {
    *err = "expected a whole number of megabytes from 1 to " + std::to_string(kBlackboxMaxMb);
    return false;
  }
  *v = x;
  return true;
}

inline bool parse_size_gb(const std::string& t, double* v, std::string* err) {
  double x = -1.0;
  if (!decimal_number(t, &x) || !(x > 0 && x != __builtin_inf())) {
    *err = "expected a number of gigabytes > 0, e.g. 0.5";
    return false;
  }
  *v = x;
  return true;
}

inline bool parse_count(const std::string& t, int64_t* v, std::string* err) {
  if (whole_number(t, v)) return true;
  *err = "expected a whole number >= 0";
  return false;
}

// How a value is read into its field of the Settings being read: true when valid; else false,
// the field untouched, and *err = the accepted values.
using SettingParse = bool (*)(const std::string& text, Settings* s, std::string* err);

struct SettingVariable {
  const char* name;
  const char* alias;         // upstream's name, read where `name` is absent; null: none
  SettingParse parse;
  SettingParse alias_parse;  // how the alias's value is read (null with no alias)
  std::string (*kept)(const Settings& fallback);  // the fallback in "; keeping ...", as the variable would be set
  int set_at;                // the Settings::Lowered that records "set at run time"; -1: none
};

// A field's own parser as a row's: `parse` reads into `field` of the Settings being read.
template <auto field, auto parse>
bool parse_into(const std::string& text, Settings* s, std::string* err) {
  return parse(text, &(s->*field), err);
}
template <auto field>
std::string kept_number(const Settings& f) { return std::to_string(f.*field); }
template <auto field>
std::string kept_flag(const Settings& f) { return f.*field ? "1" : "0"; }
template <auto field>
std::string kept_text(const Settings& f) { return f.*field; }

// In settings.py's order (its AOTI_DEBUG_COMPILE is read at compile time only); a problem is
// reported in this order.
inline constexpr SettingVariable kSettingVariables[] = {
    {"AOTI_DEBUG_LOGLEVEL", "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER",
     parse_into<&Settings::level, parse_level>, parse_into<&Settings::level, parse_upstream_level>,
     kept_number<&Settings::level>, Settings::kLevel},
    {"AOTI_DEBUG_LOGDEST", nullptr,
     [](const std::string& t, Settings* s, std::string* err) {
       return parse_ranked_path(
           t, s->rank, "expected stdout, stderr, or a file path (%i becomes the process id, %r its rank)",
           &s->logdest, err);
     },
     nullptr, kept_text<&Settings::logdest>, -1},
    {"AOTI_DEBUG_KERNELS", "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT",
     parse_into<&Settings::kernels, parse_kernel_filter>, parse_into<&Settings::kernels, parse_kernel_filter>,
     // the empty filter is spelled "*", as the variable would be set
     [](const Settings& f) { return f.kernels.empty() ? std::string("*") : join_kernels(f.kernels); }, -1},
    {"AOTI_DEBUG_CHECK_INPUTS", "AOTI_RUNTIME_CHECK_INPUTS",
     parse_into<&Settings::check_inputs, parse_bool>, parse_into<&Settings::check_inputs, parse_bool>,
     kept_flag<&Settings::check_inputs>, Settings::kCheckInputs},
    {"AOTI_DEBUG_NAN_CHECK", "TORCHINDUCTOR_NAN_ASSERTS",
     parse_into<&Settings::nan_check, parse_nan>, parse_into<&Settings::nan_check, parse_upstream_nan>,
     [](const Settings& f) { return f.nan_check.str(); }, Settings::kNanCheck},
    {"AOTI_DEBUG_NAN_CHECK_SAT", nullptr, parse_into<&Settings::nan_check_sat, parse_bool>, nullptr,
     kept_flag<&Settings::nan_check_sat>, -1},
    {"AOTI_DEBUG_MEMCHECK", nullptr, parse_into<&Settings::memcheck, parse_memcheck>, nullptr,
     [](const Settings& f) { return std::string(memcheck_name(f.memcheck)); }, Settings::kMemcheck},
    {"AOTI_DEBUG_BLACKBOX", nullptr, parse_into<&Settings::blackbox, parse_blackbox>, nullptr,
     kept_number<&Settings::blackbox>, Settings::kBlackbox},
    {"AOTI_DEBUG_BLACKBOX_MAX_MB", nullptr, parse_into<&Settings::blackbox_max_mb, parse_blackbox_mb>, nullptr,
     kept_number<&Settings::blackbox_max_mb>, -1},
    {"AOTI_DEBUG_SYNC", nullptr, parse_into<&Settings::sync, parse_bool>, nullptr, kept_flag<&Settings::sync>, -1},
    {"AOTI_DEBUG_DUMP_DIR", nullptr,
     [](const std::string& t, Settings* s, std::string* err) {
       return parse_ranked_path(t, s->rank, "expected a directory path (%r becomes the process's rank)",
                                &s->dump_dir, err);
     },
     nullptr, kept_text<&Settings::dump_dir>, -1},
    {"AOTI_DEBUG_DUMP_MAX_SIZE_GB", nullptr, parse_into<&Settings::dump_max_size_gb, parse_size_gb>, nullptr,
     [](const Settings& f) { return py_float_repr(f.dump_max_size_gb); }, -1},
    {"AOTI_DEBUG_DUMP_MAX_COUNT", nullptr, parse_into<&Settings::dump_max_count, parse_count>, nullptr,
     kept_number<&Settings::dump_max_count>, -1},
};

// ---- unknown names (aoti_debug/settings.py:unknown_variables, same rule and words) ----

// Python's difflib.SequenceMatcher(None, a, b): the characters of the matching
// blocks in a[alo:ahi] and b[blo:bhi].  Each block is the longest match, the
// earliest in a, then in b; the names compared are too short (< 200) for
// difflib's junk heuristic.
inline size_t difflib_matches(const std::string& a, size_t alo, size_t ahi, const std::string& b,
                              size_t blo, size_t bhi) {
  if (alo >= ahi || blo >= bhi) return 0;
  size_t besti = alo, bestj = blo, best = 0;
  std::vector<size_t> prev(bhi - blo + 1, 0), cur(bhi - blo + 1, 0);
  for (size_t i = alo; i < ahi; ++i) {
    for (size_t j = blo; j < bhi; ++j) {
      const size_t k = a[i] == b[j] ? prev[j - blo] + 1 : 0;
      cur[j - blo + 1] = k;
      if (k > best) besti = i + 1 - k, bestj = j + 1 - k, best = k;
    }
    prev.swap(cur);
  }
  if (best == 0) return 0;
  return best + difflib_matches(a, alo, besti, b, blo, bestj) +
         difflib_matches(a, besti + best, ahi, b, bestj + best, bhi);
}

// difflib.get_close_matches(word, possibilities, n=1, cutoff): the best ratio
// at least `cutoff`, ties to the greater name; "" when none.
inline std::string close_match(const std::string& word, const std::vector<std::string>& possibilities,
                               double cutoff) {
  std::string found;
  double found_score = -1.0;
  for (const std::string& x : possibilities) {
    const size_t length = x.size() + word.size();
    const double score = length ? 2.0 * difflib_matches(x, 0, x.size(), word, 0, word.size()) / length : 1.0;
    if (score >= cutoff && (score > found_score || (score == found_score && x > found)))
      found = x, found_score = score;
  }
  return found;
}

// Every AOTI_DEBUG_* name known: the variables read, AOTI_DEBUG_COMPILE (read at compile time
// only), and names the project uses that are not settings (settings.py:OTHER_NAMES).
inline const std::vector<std::string>& setting_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const SettingVariable& v : kSettingVariables) n.push_back(v.name);
    for (const char* other : {"AOTI_DEBUG_COMPILE", "AOTI_DEBUG_CACHE_DIR", "AOTI_DEBUG_LAUNCH_EXTENSION",
                              "AOTI_DEBUG_RUNTIME_REGISTRY", "AOTI_DEBUG_VENV", "AOTI_DEBUG_CACHE",
                              "AOTI_DEBUG_FUZZ_EXAMPLES", "AOTI_DEBUG_PREFIX"})
      n.push_back(other);
    return n;
  }();
  return names;
}

inline const std::vector<std::string>& upstream_aliases() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const SettingVariable& v : kSettingVariables)
      if (v.alias) n.push_back(v.alias);
    return n;
  }();
  return names;
}

// One message per set variable that looks like ours and is not, in name order:
// an unknown AOTI_DEBUG_* name (compared without the prefix) or a near miss
// (ratio >= 0.9) of an upstream alias, with the closest known name.
inline std::vector<std::string> unknown_variables(const Env& env) {
  static const std::string prefix = "AOTI_DEBUG_";
  std::vector<std::string> names;
  for (const char* const* e = env.block ? env.block : environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    std::string name(*e, eq ? size_t(eq - *e) : std::strlen(*e));
    bool plain = !name.empty();
    for (char c : name)
      plain = plain && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (plain) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> ours, suffixes;
  for (const std::string& n : setting_names()) ours.push_back(n), suffixes.push_back(n.substr(prefix.size()));
  const std::vector<std::string>& aliases = upstream_aliases();
  std::vector<std::string> out;
  for (const std::string& name : names) {
    if (std::find(ours.begin(), ours.end(), name) != ours.end() ||
        std::find(aliases.begin(), aliases.end(), name) != aliases.end())
      continue;
    std::string close;
    if (name.compare(0, prefix.size(), prefix) == 0) {
      close = name.size() <= kSuggestMax ? close_match(name.substr(prefix.size()), suffixes, 0.6) : "";
      if (!close.empty()) close = prefix + close;
    } else if (name.compare(0, 13, "AOT_INDUCTOR_") == 0 || name.compare(0, 13, "AOTI_RUNTIME_") == 0 ||
               name.compare(0, 14, "TORCHINDUCTOR_") == 0) {
      close = name.size() <= kSuggestMax ? close_match(name, aliases, 0.9) : "";
      if (close.empty()) continue;  // one of upstream's own variables
    } else {
      continue;
    }
    out.push_back(name + " is not a variable aoti-debug reads" +
                  (close.empty() ? std::string() : " (did you mean " + close + "?)") + "; ignoring it");
  }
  return out;
}

// Reads every variable.  `fallback` holds what a bad or absent value leaves
// in place (compiled-in values for an artifact); each bad value appends
// "<problem>; keeping <fallback>" to *problems.
inline Settings read_settings(const Env& env, const Settings& fallback,
                              std::vector<std::string>* problems) {
  Settings s = fallback;
  for (std::string& from : s.set_from) from.clear();
  const ProcessRank pr = process_rank(env);  // before the paths, whose %r it becomes
  s.rank = pr.rank, s.world = pr.world;
  std::string value, err;
  for (const SettingVariable& v : kSettingVariables) {
    // the primary name if present (valid or not), else the alias
    const bool primary = env.get(v.name, &value);
    if (!primary && (v.alias == nullptr || !env.get(v.alias, &value))) continue;
    const char* name = primary ? v.name : v.alias;
    if (!(primary ? v.parse : v.alias_parse)(value, &s, &err))
      problems->push_back(problem(name, value, err) + "; keeping " + v.kept(fallback));
    else if (v.set_at >= 0)
      s.set_from[v.set_at] = std::string(name) + "=" + py_repr(value);
  }
  for (std::string& m : unknown_variables(env)) problems->push_back(m);  // after the bad values, as in Python
  return s;
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
