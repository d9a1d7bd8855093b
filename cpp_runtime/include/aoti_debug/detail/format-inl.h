// format.h's out-of-line part: what only the core functions' bodies use.
// format.h includes it at its end wherever the bodies are compiled (config.h:
// AOTI_DEBUG_CORE_BODIES): header-only code and the core object (src/core.cpp).
#pragma once

#include <new>
#include <vector>

#include "format.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- the record formatting of the core functions ----

// A staging buffer in front of a record's std::string.  Each append to a
// std::string is an out-of-line call into libstdc++ (its members are extern
// templates); a Tensor block is some forty small pieces, so it is built here
// with inline copies and reaches the string in one append per kSize bytes.
// The pieces are written in place (room, commit): literals with their length
// known when compiled (put), indents as one fixed-size copy of spaces, numbers
// formatted straight into the buffer -- no strlen, no call for a short copy.
class Text {
 public:
  static constexpr size_t kSize = 2048;
  explicit Text(std::string& out) : out_(out) {}
  ~Text() { flush(); }
  Text(const Text&) = delete;
  Text& operator=(const Text&) = delete;
  // Where k (<= kSize) more bytes go; commit(m) then keeps the first m of them.
  AOTI_DEBUG_ALWAYS_INLINE char* room(size_t k) {
    if (AOTI_DEBUG_UNLIKELY(n_ + k > kSize)) flush();
    return b_ + n_;
  }
  AOTI_DEBUG_ALWAYS_INLINE void commit(size_t m) { n_ += m; }
  Text& append(const char* p, size_t k) {
    if (AOTI_DEBUG_UNLIKELY(k > kSize)) {
      flush();
      out_.append(p, k);
      return *this;
    }
    std::memcpy(room(k), p, k);
    n_ += k;
    return *this;
  }
  Text& append(size_t k, char c) {
    for (size_t m = 0; k > 0; k -= m) {
      m = k < 64 ? k : 64;
      std::memset(room(m), c, m);
      n_ += m;
    }
    return *this;
  }
  Text& operator+=(const char* s) { return append(s, std::strlen(s)); }
  AOTI_DEBUG_ALWAYS_INLINE Text& operator+=(char c) {
    *room(1) = c;
    n_ += 1;
    return *this;
  }
  void flush() {
    if (n_ != 0) out_.append(b_, n_);
    n_ = 0;
  }
  // The string behind it, all staged bytes in it (for what is appended there directly).
  std::string& str() {
    flush();
    return out_;
  }

 private:
  std::string& out_;
  size_t n_ = 0;
  char b_[kSize];
};

// A cursor without checks, into room a caller made for all it writes (a
// Tensor block within its bound, tensor_block): the same pieces as a Text
// (room, commit), its position kept in a register.
struct Raw {
  char* p;
  AOTI_DEBUG_ALWAYS_INLINE char* room(size_t) { return p; }
  AOTI_DEBUG_ALWAYS_INLINE void commit(size_t m) { p += m; }
  AOTI_DEBUG_ALWAYS_INLINE Raw& operator+=(char c) {
    *p++ = c;
    return *this;
  }
  Raw& append(size_t k, char c) {
    std::memset(p, c, k);
    p += k;
    return *this;
  }
  Raw& operator+=(const char* s) {
    const size_t k = std::strlen(s);
    std::memcpy(p, s, k);
    p += k;
    return *this;
  }
};

// A string literal, its length known when compiled.
template <class W, size_t N>
AOTI_DEBUG_ALWAYS_INLINE void put(W& out, const char (&s)[N]) {
  std::memcpy(out.room(N - 1), s, N - 1);
  out.commit(N - 1);
}
template <size_t N>
inline void put(std::string& out, const char (&s)[N]) { out.append(s, N - 1); }

// A short name (a dtype's, a device's: < 32 bytes) copied byte by byte.
template <class W>
AOTI_DEBUG_ALWAYS_INLINE void put_short(W& out, const char* s) {
  char* const d = out.room(32);
  size_t m = 0;
  while (s[m] != '\0' && m < 32) d[m] = s[m], ++m;
  out.commit(m);
  if (AOTI_DEBUG_UNLIKELY(s[m] != '\0')) out += s + m;
}

template <class W>
AOTI_DEBUG_ALWAYS_INLINE void put_i64(W& out, int64_t v) {
  char* const d = out.room(24);
  out.commit(static_cast<size_t>(format_i64(v, d)));
}

// `n` spaces: one fixed-size copy for the usual depths.
template <class W>
AOTI_DEBUG_ALWAYS_INLINE void put_spaces(W& out, int n) {
  static const char spaces[32] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
                                  ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
  if (AOTI_DEBUG_UNLIKELY(n < 0 || n > 32)) {
    out.append(static_cast<size_t>(n < 0 ? 0 : n), ' ');
    return;
  }
  std::memcpy(out.room(32), spaces, 32);
  out.commit(static_cast<size_t>(n));
}

// "<indent spaces>key=" (key: a literal ending in '=')
template <class W, size_t N>
AOTI_DEBUG_ALWAYS_INLINE void put_key(W& out, int indent, const char (&key)[N]) {
  put_spaces(out, indent);
  put(out, key);
}

// A new record's storage: this thread's spare (sink.h SpareRecord: empty,
// or the last record's cleared storage), `reserve` bytes at least.
inline std::string record_storage(size_t reserve) {
  std::string out;
  SpareRecord& spare = spare_record();
  if (!spare.gone) out.swap(spare.text);
  out.reserve(reserve);
  return out;
}

// "[timestamp] [pid N] kind " -- the time left for write_record to stamp.
inline void put_header_start(Text& t, const char* kind) {
  t.commit(static_cast<size_t>(format_line_prefix_unstamped(t.room(kLinePrefixMax))));
  t += kind;
  t += ' ';
}

// "[timestamp] [pid N] kind id name<facts>\n" (facts: header_facts, run and
// call records), the timestamp stamped by write_record (restamp).
inline std::string header_line(const char* kind, const std::string& id, const char* name,
                               const std::string& facts = std::string(), size_t reserve = 160) {
  std::string out = record_storage(reserve);  // 160: a level-1 record in one allocation
  {
    Text t(out);
    put_header_start(t, kind);
    t.append(id.data(), id.size());
    t += ' ';
    t += name && *name ? name : "-";
    t.append(facts.data(), facts.size());
    t += '\n';
  }
  return out;
}

inline std::string run_launch_id(int64_t run, int64_t launch) {
  std::string id;
  append_i64(id, run);
  id += '.';
  append_i64(id, launch);
  return id;
}

// The id of a launch record, `model:R.K`: two loaded models (or two instances
// of one, `ranker#2`) count R and K each on their own.
inline std::string launch_id(const std::string& model, int64_t run, int64_t launch) {
  std::string id;
  id.reserve(model.size() + 24);
  id += model;
  id += ':';
  append_i64(id, run);
  id += '.';
  append_i64(id, launch);
  return id;
}

// A device's error as a record's one line: its first line (torch's CUDA
// errors go on with advice), "unknown error" when there is none.
inline std::string one_line(const char* text) {
  std::string s = text ? text : "";
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  return s.empty() ? "unknown error" : s;
}

template <class Out>
inline void append_indent(Out& out, int n) { out.append(static_cast<size_t>(n), ' '); }

// Python-tuple form: (), (5,), (2, 3)
template <class Out>
inline void append_tuple(Out& out, const int64_t* v, int64_t n) {
  out += '(';
  for (int64_t k = 0; k < n; ++k) {
    if (k) out += ", ";
    append_i64(out, v[k]);
  }
  if (n == 1) out += ',';
  out += ')';
}

template <class Out>
inline void append_device(Out& out, int32_t type, int32_t index) {
  static const char* const names[] = {
      "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "fpga", "maia", "xla", "vulkan",
      "metal", "xpu", "mps", "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone"};
  if (type < 0 || type > 20) {
    out += "device";
    append_i64(out, type);
  } else {
    out += names[type];
  }
  if (type != 0) {  // non-CPU devices always carry an index (none given: 0)
    out += ':';
    append_i64(out, index >= 0 ? index : 0);
  }
}

// The same two for a Text or a Raw, written in place.
template <class W>
AOTI_DEBUG_ALWAYS_INLINE void write_tuple(W& out, const int64_t* v, int64_t n) {
  out += '(';
  for (int64_t k = 0; k < n; ++k) {
    char* const d = out.room(26);
    size_t m = 0;
    if (k) d[0] = ',', d[1] = ' ', m = 2;
    out.commit(m + static_cast<size_t>(format_i64(v[k], d + m)));
  }
  if (n == 1) out += ',';
  out += ')';
}

template <class W>
AOTI_DEBUG_ALWAYS_INLINE void write_device(W& out, int32_t type, int32_t index) {
  if (type == 0) {
    put(out, "cpu");
    return;
  }
  static const char* const names[] = {
      "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "fpga", "maia", "xla", "vulkan",
      "metal", "xpu", "mps", "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone"};
  if (type < 0 || type > 20) {
    put(out, "device");
    put_i64(out, type);
  } else {
    put_short(out, names[type]);
  }
  out += ':';  // non-CPU devices always carry an index (none given: 0)
  put_i64(out, index >= 0 ? index : 0);
}

// Inline form of a string: double-quoted, \ and " escaped, \n \t \r, other
// control characters (< 0x20 and 0x7f) as \xNN (lowercase hex).
inline void append_quoted(std::string& out, const char* s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s); *p; ++p) {
    const unsigned char c = *p;
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) (((out += "\\x") += hex[c >> 4]) += hex[c & 15]);
    else out += static_cast<char>(c);
  }
  out += '"';
}

// Inline values (everything but tensors).
inline void append_inline(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::kNone: out += "None"; break;
    case Value::kBool: out += v.b ? "True" : "False"; break;
    case Value::kInt: append_i64(out, v.i); break;
    case Value::kDouble: append_double(out, v.d); break;
    case Value::kString: append_quoted(out, v.s); break;
    case Value::kIntList:
      out += '[';
      for (int64_t k = 0; k < v.i; ++k) {
        if (k) out += ", ";
        append_i64(out, v.list[k]);
      }
      out += ']';
      break;
    case Value::kTensor: out += "<Tensor>"; break;
  }
}

inline bool any_arg(size_t) { return true; }  // a prefetch of every Value

#if AOTI_DEBUG_ENABLE_STATS
// The statistics of the tensors of one record, kept while it is formatted
// and, for a launch-end record, for the NaN/Inf check that follows it on the
// same thread (checks.h): each tensor is read once for both, and a record's
// device tensors are fetched together before it is formatted (prefetch: one
// adapter call, one transfer, not one per tensor).  An entry matches a Value
// built from the same handle: same data, dtype and size/stride arrays.
struct StatsMemo {
  static constexpr int kSize = 32;  // past it, tensors are read one by one
  struct Entry {
    const void* data;
    const int64_t* sizes;
    const int64_t* strides;
    int32_t dtype;
    Stats s;
  };
  const void* run = nullptr;  // whose launch the entries describe (null: none)
  int64_t launch = 0;
  bool active = false;        // a record is being formatted: blocks read and fill it
  int n = 0;
  Entry e[kSize];

  void open(const void* r, int64_t k) { run = r, launch = k, n = 0, active = true; }
  // `keep`: the entries stay for the NaN/Inf check of launch `launch`.
  void close(bool keep) {
    active = false;
    if (!keep) run = nullptr;
  }
  bool holds(const void* r, int64_t k) const { return run == r && launch == k; }
  void add(const TensorView& v, const Stats& s) {
    if (n < kSize) e[n++] = Entry{v.data, v.sizes, v.strides, v.dtype, s};
  }
  const Stats* find(const TensorView& v) const {
    for (int i = 0; i < n; ++i)
      if (e[i].data == v.data && e[i].sizes == v.sizes && e[i].strides == v.strides && e[i].dtype == v.dtype)
        return &e[i].s;
    return nullptr;
  }
  // The statistics of the CUDA tensors among `vals` that `want` selects and
  // that are not here yet, by one call of their adapter.  Nothing during
  // graph capture; what the adapter cannot read is left to the caller.
  template <class Want>
  void prefetch(const Value* vals, size_t count, Want want) {
    const Value* ask[kSize];
    size_t m = 0;
    for (size_t i = 0; i < count && n + static_cast<int>(m) < kSize; ++i) {
      const Value& v = vals[i];
      if (v.kind == Value::kTensor && v.t.device_type == 1 && v.t.data != nullptr && v.device_stats != nullptr &&
          want(i) && numel_of(v.t) > 0 && stats_kind(v.t.dtype) != kStatsNone && find(v.t) == nullptr &&
          (m == 0 || v.device_stats == ask[0]->device_stats))
        ask[m++] = &v;
    }
    if (m == 0 || capturing_now()) return;
    Stats got[kSize];
    bool ok[kSize] = {};
    ask[0]->device_stats(ask, m, got, ok);
    for (size_t i = 0; i < m; ++i)
      if (ok[i]) add(ask[i]->t, got[i]);
  }
};

inline StatsMemo& stats_memo() {
  static thread_local StatsMemo m;
  return m;
}
#endif

#if AOTI_DEBUG_ENABLE_STATS
// `v` as eight lowercase hex digits at d, with no table and no loop: each
// nibble spread into a byte of its own, '0' added to all, 'a' - '0' - 10
// more to those of 10 and up (nibble + 6 carries into bit 4).
AOTI_DEBUG_ALWAYS_INLINE void hex8(uint32_t v, char* d) {
  uint64_t x = v;
  x = ((x & 0xFFFF0000ull) << 16) | (x & 0xFFFFull);
  x = ((x & 0x0000FF000000FF00ull) << 8) | (x & 0x000000FF000000FFull);
  x = ((x & 0x00F000F000F000F0ull) << 4) | (x & 0x000F000F000F000Full);  // byte k: nibble k
  const uint64_t letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
  x += 0x3030303030303030ull + letters * static_cast<uint64_t>('a' - '0' - 10);
  x = __builtin_bswap64(x);  // the most significant nibble first
  std::memcpy(d, &x, 8);
}

// The statistics lines (section 3) for a computed Stats.
template <class W>
AOTI_DEBUG_ALWAYS_INLINE void append_stats_lines(W& out, int indent, const Stats& s) {
  auto dbl = [&](const char* key, size_t len, double x) {
    put_spaces(out, indent);
    char* const d = out.room(32 + 48);
    std::memcpy(d, key, 16);  // keys are padded to 16 bytes (below)
    out.commit(len + static_cast<size_t>(format_double(x, d + len)));
    out += '\n';
  };
  auto i64 = [&](const char* key, size_t len, int64_t x) {
    put_spaces(out, indent);
    char* const d = out.room(16 + 24);
    std::memcpy(d, key, 16);
    out.commit(len + static_cast<size_t>(format_i64(x, d + len)));
    out += '\n';
  };
  auto u64 = [&](const char* key, size_t len, uint64_t x) {
    put_spaces(out, indent);
    char* const d = out.room(16 + 24);
    std::memcpy(d, key, 16);
    out.commit(len + static_cast<size_t>(format_u64(x, d + len)));
    out += '\n';
  };
  // each key with its '=', padded to the 16 bytes copied at once
#define AOTI_DEBUG_KEY_(k) k "=\0\0\0\0\0\0\0\0\0\0\0\0\0\0", sizeof(k)
  switch (s.kind) {
    case kStatsFloat:
      dbl(AOTI_DEBUG_KEY_("min"), s.min);
      dbl(AOTI_DEBUG_KEY_("max"), s.max);
      dbl(AOTI_DEBUG_KEY_("mean"), s.mean);
      i64(AOTI_DEBUG_KEY_("nan_count"), s.nan_count);
      i64(AOTI_DEBUG_KEY_("inf_count"), s.inf_count);
      if (counts_saturation(s.dtype)) i64(AOTI_DEBUG_KEY_("sat_count"), s.sat_count);
      break;
    case kStatsComplex:
      dbl(AOTI_DEBUG_KEY_("abs_min"), s.min);
      dbl(AOTI_DEBUG_KEY_("abs_max"), s.max);
      dbl(AOTI_DEBUG_KEY_("abs_mean"), s.mean);
      i64(AOTI_DEBUG_KEY_("nan_count"), s.nan_count);
      i64(AOTI_DEBUG_KEY_("inf_count"), s.inf_count);
      break;
    case kStatsInt:
      i64(AOTI_DEBUG_KEY_("min"), s.imin);
      i64(AOTI_DEBUG_KEY_("max"), s.imax);
      dbl(AOTI_DEBUG_KEY_("mean"), s.mean);
      break;
    case kStatsUInt:
      u64(AOTI_DEBUG_KEY_("min"), s.umin);
      u64(AOTI_DEBUG_KEY_("max"), s.umax);
      dbl(AOTI_DEBUG_KEY_("mean"), s.mean);
      break;
    case kStatsBool:
      i64(AOTI_DEBUG_KEY_("true_count"), s.true_count);
      i64(AOTI_DEBUG_KEY_("false_count"), s.false_count);
      break;
    default:
      break;
  }
#undef AOTI_DEBUG_KEY_
  if (s.hashed) {
    put_key(out, indent, "hash=");
    char* const d = out.room(17);
    hex8(static_cast<uint32_t>(s.hash >> 32), d);
    hex8(static_cast<uint32_t>(s.hash), d + 8);
    d[16] = '\n';
    out.commit(17);
  }
}
#endif

// The head of a Tensor block: "Tensor(" at `indent` spaces and its lines up
// to the statistics (shape, stride, dtype, device, requires_grad,
// is_contiguous).
template <class W>
AOTI_DEBUG_ALWAYS_INLINE void block_head(W& out, const Value& val, int indent) {
  const TensorView& v = val.t;
  const int in = indent + 2;
  put_key(out, indent, "Tensor(\n");
  put_key(out, in, "shape=");
  write_tuple(out, v.sizes, v.ndim);
  out += '\n';
  put_key(out, in, "stride=");
  write_tuple(out, v.strides, v.ndim);
  out += '\n';
  put_key(out, in, "dtype=torch.");
  const char* dn = dtype_name(v.dtype);
  if (dn) put_short(out, dn);
  else put_i64(out, v.dtype);
  out += '\n';
  put_key(out, in, "device=");
  write_device(out, v.device_type, v.device_index);
  out += '\n';
  put_key(out, in, "requires_grad=");
  if (val.b) put(out, "True\n");  // adapters for inference artifacts leave it False
  else put(out, "False\n");
  put_key(out, in, "is_contiguous=");
  if (is_contiguous(v)) put(out, "True\n");
  else put(out, "False\n");
}

// A block head is a function of the view's metadata and the indent alone,
// and a launch site shows the same shapes call after call: each thread keeps
// the heads it wrote, keyed by that metadata compared in full (never by a
// pointer: a buffer's sizes array is new each call, and a freed one's
// address comes back holding other sizes), and copies one instead of
// formatting it again.  Direct-mapped; a collision formats and replaces.
struct HeadCache {
  static constexpr int kEntries = 128;  // slot() takes 7 bits
  static constexpr int kMaxDims = 6;     // deeper views are formatted each time
  static constexpr size_t kMaxText = 240;
  struct Entry {
    int32_t dtype = -1, ndim = -1, device_type = 0, device_index = 0, indent = -1, grad = 0;
    int64_t sizes[kMaxDims] = {}, strides[kMaxDims] = {};
    uint32_t len = 0;
    char text[kMaxText];
    bool holds(const Value& val, int in) const {
      const TensorView& v = val.t;
      if (ndim != v.ndim || dtype != v.dtype || indent != in || device_type != v.device_type ||
          device_index != v.device_index || grad != static_cast<int32_t>(val.b))
        return false;
      for (int64_t d = 0; d < v.ndim; ++d)
        if (sizes[d] != v.sizes[d] || strides[d] != v.strides[d]) return false;
      return true;
    }
    void keep(const Value& val, int in, const char* p, size_t n) {
      const TensorView& v = val.t;
      if (n > kMaxText) {
        ndim = -1;  // held nothing: no lookup matches
        return;
      }
      dtype = v.dtype, ndim = static_cast<int32_t>(v.ndim), device_type = v.device_type;
      device_index = v.device_index, indent = in, grad = val.b;
      for (int64_t d = 0; d < v.ndim; ++d) sizes[d] = v.sizes[d], strides[d] = v.strides[d];
      std::memcpy(text, p, n);
      len = static_cast<uint32_t>(n);
    }
  };
  Entry e[kEntries];

  // The entry for this metadata (holding it or to be filled), or nullptr
  // for views not kept (too many dimensions).
  Entry* slot(const Value& val, int indent) {
    const TensorView& v = val.t;
    if (v.ndim < 0 || v.ndim > kMaxDims) return nullptr;
    uint64_t h = static_cast<uint64_t>(v.dtype) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(v.ndim + 8 * indent);
    for (int64_t d = 0; d < v.ndim; ++d)
      h = (h ^ static_cast<uint64_t>(v.sizes[d])) * 0x100000001B3ull ^ static_cast<uint64_t>(v.strides[d]) * 31u;
    h ^= static_cast<uint64_t>(v.device_type) << 7 ^ static_cast<uint64_t>(v.device_index) << 13;
    return &e[(h * 0x9E3779B97F4A7C15ull) >> 57];  // the top 7 bits: kEntries
  }
};

// This thread's head cache, made on its first level-3 record (nullptr if
// that fails, or past the thread's exit).
struct HeadCacheSlot {
  HeadCache* cache = nullptr;
  bool gone = false;
  ~HeadCacheSlot() {
    delete cache;
    cache = nullptr;
    gone = true;
  }
};

inline HeadCache* head_cache() {
  static thread_local HeadCacheSlot slot;
  if (AOTI_DEBUG_UNLIKELY(slot.cache == nullptr) && !slot.gone) slot.cache = new (std::nothrow) HeadCache();
  return slot.cache;
}

// What follows the head at level >= 5: the statistics lines; returns why
// there are none (nullptr: there are, or level < 5), for the caller to say.
template <class W>
AOTI_DEBUG_ALWAYS_INLINE const char* block_stats(W& out, const Value& val, int level, int indent) {
  const char* skip = nullptr;
  if (level >= 5) {
#if AOTI_DEBUG_ENABLE_STATS
    const TensorView& v = val.t;
    StatsMemo& memo = stats_memo();  // once a block: in a shared object each look costs a call
    Stats s;
    if (numel_of(v) == 0) {
      skip = "empty tensor";
    } else if (stats_kind(v.dtype) == kStatsNone) {
      skip = "dtype not supported";
    } else if (const Stats* kept = memo.active ? memo.find(v) : nullptr) {
      s = *kept;
    } else if (v.device_type == 0 && v.data != nullptr) {
      s = compute_stats(v, true);
      if (memo.active) memo.add(v, s);
    } else if (!device_stats(val, &s, &skip)) {
      if (skip == nullptr) skip = "device not supported";
    }
    if (skip == nullptr) append_stats_lines(out, indent + 2, s);
#else
    (void)out, (void)val, (void)indent;
    skip = "statistics not compiled in";
#endif
  }
  return skip;
}

// A bound of what block_head and block_stats write, room made for their fixed-size copies
// included: fourteen lines (six of statistics) of at most `indent` + 2 + 64
// bytes, two tuples of ndim numbers; SIZE_MAX past the usual depths and ranks.
inline size_t block_bound(const TensorView& v, int indent) {
  if (indent < 0 || indent > 28 || v.ndim < 0 || v.ndim > 24) return ~static_cast<size_t>(0);
  return 16 * (static_cast<size_t>(indent) + 2 + 64) + 2 * 22 * static_cast<size_t>(v.ndim) + 128;
}

// A scale's element as a double: the floating formats with float_facts, float4 aside.
inline double scale_element(const char* p, int32_t code) {
  switch (code) {
    case kFloat: { float f; std::memcpy(&f, p, 4); return f; }
    case kDouble: { double d; std::memcpy(&d, p, 8); return d; }
    case kHalf: { uint16_t h; std::memcpy(&h, p, 2); return half_to_float(h); }
    case kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_float(h); }
    default: return float8_table(code)[*reinterpret_cast<const uint8_t*>(p)];
  }
}

// A scale's NaN and Inf elements and the logical index of its first zero, NaN or
// Inf (-1: none), for the NaN check (checks.h NanChecks::scales).
struct ScaleFaults {
  int64_t nans = 0, infs = 0, first = -1;
};

// Zeros and subnormals (finite, non-zero, under the format's smallest normal) of
// a CPU tensor of a floating format that a kernel uses as a scale; false when
// they are not counted (another device, no elements, another dtype).  Scales are
// small (one per tensor, row or block), so one plain pass; NaN and Inf are
// told apart on the bits, whatever the includer's math flags.
inline bool scale_counts(const TensorView& v, int64_t* zeros, int64_t* subnormals,
                         ScaleFaults* faults = nullptr) {
  const FloatFacts* facts = float_facts(v.dtype);
  const DtypeInfo* info = dtype_info(v.dtype);
  const int64_t n = numel_of(v);
  if (v.device_type != 0 || v.data == nullptr || n <= 0 || facts == nullptr || info == nullptr ||
      v.dtype == kFloat4_e2m1fn_x2)
    return false;
  *zeros = *subnormals = 0;
  int64_t index[32] = {0};
  if (v.ndim > 32) return false;
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (int64_t d = 0; d < v.ndim; ++d) offset += index[d] * v.strides[d];
    const double x = scale_element(static_cast<const char*>(v.data) + offset * info->itemsize, v.dtype);
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    const uint64_t magnitude = bits & 0x7fffffffffffffffull;
    double a;
    std::memcpy(&a, &magnitude, 8);
    if (magnitude == 0) ++*zeros;
    else if ((magnitude >> 52) != 0x7ff && a < facts->smallest_normal) ++*subnormals;
    if (faults != nullptr && (magnitude >> 52) == 0x7ff) ++((magnitude << 12) ? faults->nans : faults->infs);
    if (faults != nullptr && faults->first < 0 && (magnitude == 0 || (magnitude >> 52) == 0x7ff)) faults->first = k;
    for (int64_t d = v.ndim - 1; d >= 0; --d) {  // the next logical index
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
  return true;
}

// A device tensor as a host view of its storage span (from the view's first
// element to its last), copied by Value::device_read in one blocking copy: a
// CUDA tensor only, never while a CUDA graph is being captured.  nullptr when
// copied, else why not (what a skipped line says).  `host` holds the bytes.
inline const char* host_view(const Value& val, std::vector<char>& host, TensorView* out) {
  const TensorView& v = val.t;
  const DtypeInfo* info = dtype_info(v.dtype);
  if (v.device_type != 1 || info == nullptr || v.ndim > 32) return "device not supported";  // 1: CUDA
  if (capturing_now()) return "CUDA graph capture in progress";
  if (val.device_read == nullptr) return "device not supported";
  int64_t span = numel_of(v) > 0 ? 1 : 0;  // elements from the view's first to its last
  for (int64_t d = 0; d < v.ndim && span > 0; ++d) {
    if (v.strides[d] < 0) return "device not supported";
    span += (v.sizes[d] - 1) * v.strides[d];
  }
  host.resize(static_cast<size_t>(span * info->itemsize) + 1);  // + 1: an empty view's data is not null
  if (span > 0 && !val.device_read(val, host.data(), static_cast<uint64_t>(span * info->itemsize)))
    return "could not be copied from the device";
  *out = v;
  out->data = host.data();
  out->device_type = 0, out->device_index = -1;
  return nullptr;
}

// scale_counts of a scale wherever it is.  On a device: counted in its host
// view (a scale is one value per tensor, row or block, so small).  False where
// it is not read: no host view, or what scale_counts leaves out.
inline bool value_scale_counts(const Value& val, int64_t* zeros, int64_t* subnormals,
                               ScaleFaults* faults = nullptr) {
  const TensorView& v = val.t;
  if (v.device_type == 0) return scale_counts(v, zeros, subnormals, faults);
  if (float_facts(v.dtype) == nullptr || v.dtype == kFloat4_e2m1fn_x2 || numel_of(v) <= 0) return false;
  std::vector<char> host;
  TensorView h;
  return host_view(val, host, &h) == nullptr && scale_counts(h, zeros, subnormals, faults);
}

// The lines a scale argument's Tensor block adds at level >= 5, after the
// statistics (docs/log-format.md section 3): which of its op's scales it is,
// and its zero and subnormal counts where counted (value_scale_counts).
template <class W>
inline void scale_lines(W& out, const Value& val, const char* scale, int indent) {
  put_key(out, indent, "scale=");
  out += scale;
  out += '\n';
  int64_t zeros, subnormals;
  if (!value_scale_counts(val, &zeros, &subnormals)) return;
  put_key(out, indent, "zero_count=");
  put_i64(out, zeros);
  out += '\n';
  put_key(out, indent, "subnormal_count=");
  put_i64(out, subnormals);
  out += '\n';
}

// An operand's dequantization as its ArgSpec::dequant says (plan.dequant_spec:
// "<scale> <global or -1> <layout> <block> <swizzled> <kdim> <label>"), with the
// values of the scales it names, for its block's dequant lines.
struct DequantCall {
  int32_t layout = 0, block = 0, swizzled = 0, kdim = 0;  // a DequantSpec (stats.h: not always compiled in)
  int scale = -1, global = -1;  // argument indexes
  const char* label = "";       // the rest of the text: what scaled_by= says
  const Value* scale_value = nullptr;
  const Value* global_value = nullptr;
};

inline bool parse_dequant(const char* text, DequantCall* out) {
  if (text == nullptr) return false;
  char layout[16] = {0};
  int used = 0;
  if (std::sscanf(text, "%d %d %15s %d %d %d %n", &out->scale, &out->global, layout, &out->block,
                  &out->swizzled, &out->kdim, &used) != 6 || used <= 0)
    return false;
  out->label = text + used;
  // detail::DequantLayout's values
  out->layout = std::strcmp(layout, "tensorwise") == 0 ? 1
                : std::strcmp(layout, "rowwise") == 0  ? 2
                : std::strcmp(layout, "block") == 0    ? 3
                                                       : 0;
  return out->layout != 0 && out->scale >= 0;
}

#if AOTI_DEBUG_ENABLE_STATS
// What dequant=skipped (...) says for a status of dequant_stats (native/core.py DEQUANT_STATUS).
inline const char* dequant_skip(int32_t status) {
  switch (status) {
    case kDequantEmpty: return "empty tensor";
    case kDequantDevice: return "device not supported";
    case kDequantDtype: return "dtype not supported";
    case kDequantMismatch: return "scale shape not as compiled";
    case kDequantMemory: return "out of memory";
    default: return "not computed";
  }
}
#endif

// The lines a scaled operand's Tensor block adds at level >= 5, after its
// statistics (docs/log-format.md 3.3): which scale multiplies it and how, then
// the statistics of its dequantized values, or why there are none.
template <class W>
inline void dequant_lines(W& out, const Value& val, const DequantCall& dq, int indent) {
  put_key(out, indent, "scaled_by=");
  out += dq.label;
  out += '\n';
#if AOTI_DEBUG_ENABLE_STATS
  const Value* sv = dq.scale_value;
  const Value* gv = dq.global_value;
  const char* skip = nullptr;
  DequantStats d{};
  if (sv == nullptr || sv->kind != Value::kTensor || (dq.global >= 0 && (gv == nullptr || gv->kind != Value::kTensor))) {
    skip = "scale not a tensor";
  } else {
    // device tensors through their host views: the operand's whole span is copied
    const Value* const vals[3] = {&val, sv, dq.global >= 0 ? gv : nullptr};
    TensorView views[3];
    std::vector<char> hosts[3];
    for (int k = 0; k < 3 && skip == nullptr && vals[k] != nullptr; ++k) {
      views[k] = vals[k]->t;
      if (views[k].device_type != 0) skip = host_view(*vals[k], hosts[k], &views[k]);
    }
    if (skip == nullptr) {
      const DequantSpec spec{dq.layout, dq.block, dq.swizzled, dq.kdim};
      d = dequant_stats(views[0], views[1], vals[2] != nullptr ? &views[2] : nullptr, spec);
      if (d.status != kDequantDone) skip = dequant_skip(d.status);
    }
  }
  if (skip != nullptr) {
    put_key(out, indent, "dequant=skipped (");
    out += skip;
    out += ")\n";
    return;
  }
  auto dbl = [&](double x) {
    char* const p = out.room(48);
    out.commit(static_cast<size_t>(format_double(x, p)));
    out += '\n';
  };
  put_key(out, indent, "dequant_min=");
  dbl(d.min);
  put_key(out, indent, "dequant_max=");
  dbl(d.max);
  put_key(out, indent, "dequant_mean=");
  dbl(d.mean);
  put_key(out, indent, "dequant_nan_count=");
  put_i64(out, d.nan_count);
  out += '\n';
  put_key(out, indent, "dequant_inf_count=");
  put_i64(out, d.inf_count);
  out += '\n';
#else
  (void)val;
  put_key(out, indent, "dequant=skipped (statistics not compiled in)\n");
#endif
}

// The Tensor block, "Tensor(" at `indent` spaces.  Statistics at level >= 5;
// `scale`: the op's schema argument when the kernel uses the tensor as a scale.
// Its lines are written without a check per piece where they fit the buffer,
// its head copied from this thread's head cache where it holds it.
inline void tensor_block(Text& out, const Value& val, int level, int indent, const char* scale = nullptr,
                         const DequantCall* dq = nullptr) {
  const char* skip;
  const size_t bound = block_bound(val.t, indent);
  if (AOTI_DEBUG_LIKELY(bound <= Text::kSize)) {
    Raw raw{out.room(bound)};
    char* const start = raw.p;
    HeadCache* const heads = head_cache();
    HeadCache::Entry* const kept = heads != nullptr ? heads->slot(val, indent) : nullptr;
    if (kept != nullptr && kept->holds(val, indent)) {
      std::memcpy(raw.p, kept->text, kept->len);
      raw.p += kept->len;
    } else {
      block_head(raw, val, indent);
      if (kept != nullptr) kept->keep(val, indent, start, static_cast<size_t>(raw.p - start));
    }
    skip = block_stats(raw, val, level, indent);
    out.commit(static_cast<size_t>(raw.p - start));
  } else {
    block_head(out, val, indent);
    skip = block_stats(out, val, level, indent);
  }
  const int in = indent + 2;
  if (skip != nullptr) {
    put_key(out, in, "stats=skipped (");
    out += skip;
    put(out, ")\n");
  }
  if (dq != nullptr && level >= 5) dequant_lines(out, val, *dq, in);
  if (scale != nullptr && level >= 5) scale_lines(out, val, scale, in);
  put_key(out, indent, ")\n");
}

inline void append_tensor_block(std::string& out, const Value& val, int level, int indent) {
  Text text(out);
  tensor_block(text, val, level, indent);
}

// A tensor's argument item, "  label:\n" + block, into a Text.
inline void tensor_item(Text& t, int indent, const char* label_a, const char* label_b, const Value& v, int level,
                        const char* scale = nullptr, const DequantCall* dq = nullptr) {
  put_spaces(t, indent);
  t += label_a;
  if (label_b) {
    t += ' ';
    t += label_b;
  }
  put(t, ":\n");
  tensor_block(t, v, level, indent + 2, scale, dq);
}

// One argument item: "  label: inline\n" or "  label:\n" + block.
inline void append_item(std::string& out, int indent, const char* label_a, const char* label_b,
                        const Value& v, int level, const char* scale = nullptr) {
  if (v.kind == Value::kTensor) {  // the item and its block in one staging buffer
    Text t(out);
    tensor_item(t, indent, label_a, label_b, v, level, scale);
    return;
  }
  append_indent(out, indent);
  out += label_a;
  if (label_b) {
    out += ' ';
    out += label_b;
  }
  out += ": ";
  append_inline(out, v);
  out += '\n';
}

// The same into a Text (a record staged whole).
inline void append_item(Text& t, int indent, const char* label_a, const char* label_b, const Value& v,
                        int level, const char* scale = nullptr, const DequantCall* dq = nullptr) {
  if (v.kind == Value::kTensor) tensor_item(t, indent, label_a, label_b, v, level, scale, dq);
  else append_item(t.str(), indent, label_a, label_b, v, level);
}

// Several outputs of one call as a tuple block (section 1.4 containers).
inline void append_tuple_item(std::string& out, int indent, const char* label, const Value* vals,
                              int n, int level) {
  bool has_tensor = false;
  for (int k = 0; k < n; ++k) has_tensor = has_tensor || vals[k].kind == Value::kTensor;
  append_indent(out, indent);
  out += label;
  if (!has_tensor) {  // inline tuple
    out += ": (";
    for (int k = 0; k < n; ++k) {
      if (k) out += ", ";
      append_inline(out, vals[k]);
    }
    if (n == 1) out += ',';
    out += ")\n";
    return;
  }
  out += ":\n";
  append_indent(out, indent + 2);
  out += "tuple(len=";
  append_i64(out, n);
  out += ")\n";
  for (int k = 0; k < n; ++k) {
    char lab[32];
    int m = 0;
    lab[m++] = '[';
    m += format_i64(k, lab + m);
    lab[m++] = ']';
    lab[m] = '\0';
    append_item(out, indent + 4, lab, nullptr, vals[k], level);
  }
}


}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
