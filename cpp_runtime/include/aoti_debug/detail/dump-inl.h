// dump.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  dump.h includes it at its end wherever the bodies are compiled
// (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core object
// (src/core.cpp).
#pragma once

#include "dump.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---------------------------------------------------------------- ZIP + pickle

inline uint32_t crc32(const char* p, size_t n) {
  static const struct Table {
    uint32_t v[256];
    Table() {
      for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        v[i] = c;
      }
    }
  } table;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table.v[(c ^ static_cast<unsigned char>(p[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// An uncompressed ("stored") ZIP archive of `entries` (name, data), no ZIP64:
// false when it would need it.
inline bool zip_stored(const std::vector<std::pair<std::string, std::string>>& entries, std::string* out) {
  std::string central;
  out->clear();
  for (const auto& e : entries) {
    if (out->size() + e.second.size() + 4096 >= 0xFFFFFFFFull) return false;
    const uint32_t crc = crc32(e.second.data(), e.second.size());
    const uint64_t offset = out->size();
    std::string common;  // version needed .. name length
    put_le(common, 20, 2);               // version needed
    put_le(common, 0, 2);                // flags
    put_le(common, 0, 2);                // method: stored
    put_le(common, 0, 2);                // time
    put_le(common, 0x21, 2);             // date: 1980-01-01
    put_le(common, crc, 4);
    put_le(common, e.second.size(), 4);  // compressed size
    put_le(common, e.second.size(), 4);  // uncompressed size
    put_le(common, e.first.size(), 2);
    put_le(*out, 0x04034b50, 4);
    *out += common;
    put_le(*out, 0, 2);  // extra length
    *out += e.first;
    *out += e.second;
    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);  // version made by
    central += common;
    put_le(central, 0, 2);   // extra
    put_le(central, 0, 2);   // comment
    put_le(central, 0, 2);   // disk
    put_le(central, 0, 2);   // internal attributes
    put_le(central, 0, 4);   // external attributes
    put_le(central, offset, 4);
    central += e.first;
  }
  const uint64_t cd_offset = out->size();
  *out += central;
  put_le(*out, 0x06054b50, 4);
  put_le(*out, 0, 2);
  put_le(*out, 0, 2);
  put_le(*out, entries.size(), 2);
  put_le(*out, entries.size(), 2);
  put_le(*out, central.size(), 4);
  put_le(*out, cd_offset, 4);
  put_le(*out, 0, 2);
  return true;
}

// The legacy storage class torch.load maps back to the dtype.
inline const char* storage_class(int32_t dtype) {
  switch (dtype) {
    case kByte: return "ByteStorage";
    case kChar: return "CharStorage";
    case kShort: return "ShortStorage";
    case kInt: return "IntStorage";
    case kLong: return "LongStorage";
    case kHalf: return "HalfStorage";
    case kFloat: return "FloatStorage";
    case kDouble: return "DoubleStorage";
    case kComplexFloat: return "ComplexFloatStorage";
    case kComplexDouble: return "ComplexDoubleStorage";
    case kBool: return "BoolStorage";
    case kBFloat16: return "BFloat16Storage";
    default: return nullptr;
  }
}

// Pickle protocol 2, the few opcodes torch's weights-only unpickler accepts.
struct Pickler {
  std::string s;
  Pickler() { s += "\x80\x02"; }
  void op(char c) { s += c; }
  void global(const char* module, const char* name) {
    s += 'c';
    s += module;
    s += '\n';
    s += name;
    s += '\n';
  }
  void str(const std::string& v) {
    s += 'X';
    put_le(s, v.size(), 4);
    s += v;
  }
  void integer(int64_t v) {
    if (v >= -2147483648LL && v <= 2147483647LL) {
      s += 'J';
      put_le(s, static_cast<uint64_t>(v), 4);
    } else {
      s += '\x8a';  // LONG1, 8 bytes two's complement
      s += '\x08';
      put_le(s, static_cast<uint64_t>(v), 8);
    }
  }
  void real(double v) {  // BINFLOAT: big-endian
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    s += 'G';
    for (int i = 7; i >= 0; --i) s += static_cast<char>((bits >> (8 * i)) & 0xFF);
  }
  void tuple(const int64_t* v, int64_t n) {
    s += '(';
    for (int64_t i = 0; i < n; ++i) integer(v[i]);
    s += 't';
  }
};

// A torch.save file in memory.
// The bytes of the smallest storage covering a CPU view (what a .pt file and
// the black box keep; `any_device`: a device view's too, which a dump copies
// to the host): "" or why it cannot be kept.  Sizes and strides are
// checked, not trusted: the black box's reader hands over what a file said.
inline std::string storage_span(const TensorView& t, uint64_t* bytes, bool any_device = false) {
  *bytes = 0;
  const char* cls = storage_class(t.dtype);
  const DtypeInfo* info = dtype_info(t.dtype);
  if (cls == nullptr || info == nullptr) return std::string("dtype not supported (") + (info ? info->name : "?") + ")";
  if (t.device_type != 0 && !any_device) return "device not supported";
  uint64_t span = 1;
  for (int64_t d = 0; d < t.ndim; ++d) {
    if (t.strides[d] < 0) return "negative stride";
    if (t.sizes[d] < 0) return "negative size";
    if (t.sizes[d] == 0) span = 0;
  }
  for (int64_t d = 0; d < t.ndim && span != 0; ++d) {
    uint64_t step;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.sizes[d] - 1), static_cast<uint64_t>(t.strides[d]), &step) ||
        __builtin_add_overflow(span, step, &span))
      return "larger than memory";
  }
  if (__builtin_mul_overflow(span, static_cast<uint64_t>(info->itemsize), bytes)) return "larger than memory";
  if (*bytes > 0 && t.data == nullptr) return "no data";
  return "";
}

// The start of a manifest `files` entry: `{"name": N, "role": R`.
inline void json_str(std::string& out, const char* s);
inline void file_entry_start(std::string& files, const char* name, const char* role) {
  if (files.size() > 1) files += ", ";
  files += "{\"name\": ";
  json_str(files, name);
  files += ", \"role\": ";
  json_str(files, role);
}

// A manifest `files` entry for an argument that has no file, and why.
inline void append_unwritten(std::string& files, const char* name, const char* role, const char* why) {
  file_entry_start(files, name, role);
  files += ", \"file\": null, \"error\": ";
  json_str(files, why);
  files += "}";
}

struct PtWriter {
  Pickler pkl;
  std::vector<std::pair<std::string, std::string>> storages;
  std::string error;

  // Appends the pickle of one value; false (error set) if it cannot.
  bool value(const Value& v) {
    switch (v.kind) {
      case Value::kNone: pkl.op('N'); return true;
      case Value::kBool: pkl.op(v.b ? '\x88' : '\x89'); return true;
      case Value::kInt: pkl.integer(v.i); return true;
      case Value::kDouble: pkl.real(v.d); return true;
      case Value::kString: pkl.str(v.s); return true;
      case Value::kIntList:
        pkl.op(']');
        pkl.op('(');
        for (int64_t k = 0; k < v.i; ++k) pkl.integer(v.list[k]);
        pkl.op('e');
        return true;
      case Value::kTensor: return tensor(v);
    }
    error = "value not supported";
    return false;
  }

  // A CPU tensor's bytes as they are; a CUDA tensor's copied to the host
  // (the file holds a CPU tensor, as torch.compile's dumps do), never while
  // its stream is being captured into a CUDA graph.
  bool tensor(const Value& v) {
    const TensorView& t = v.t;
    uint64_t bytes = 0;
    error = storage_span(t, &bytes, t.device_type == 1);
    if (!error.empty()) return false;
    std::string data;
    if (t.device_type == 0) {
      data.assign(static_cast<const char*>(t.data), static_cast<size_t>(bytes));
    } else if (v.device_read == nullptr) {
      error = "device not supported";
    } else if (capturing_now()) {
      error = "CUDA graph capture in progress";
    } else {
      data.resize(static_cast<size_t>(bytes));
      if (bytes > 0 && !v.device_read(v, &data[0], bytes)) error = "could not be copied from the device";
    }
    if (!error.empty()) return false;
    const char* cls = storage_class(t.dtype);
    const int64_t span = static_cast<int64_t>(bytes / static_cast<uint64_t>(dtype_info(t.dtype)->itemsize));
    const std::string key = std::to_string(storages.size());
    storages.emplace_back(key, std::move(data));
    pkl.global("torch._utils", "_rebuild_tensor_v2");
    pkl.op('(');
    pkl.op('(');
    pkl.str("storage");
    pkl.global("torch", cls);
    pkl.str(key);
    pkl.str("cpu");
    pkl.integer(span);
    pkl.op('t');
    pkl.op('Q');  // BINPERSID
    pkl.integer(0);
    pkl.tuple(t.sizes, t.ndim);
    pkl.tuple(t.strides, t.ndim);
    pkl.op('\x89');  // requires_grad=False
    pkl.global("collections", "OrderedDict");
    pkl.op(')');
    pkl.op('R');
    pkl.op('t');
    pkl.op('R');
    return true;
  }

  bool finish(std::string* out) {
    pkl.op('.');
    std::vector<std::pair<std::string, std::string>> entries;
    entries.emplace_back("archive/data.pkl", pkl.s);
    entries.emplace_back("archive/byteorder", "little");
    for (auto& st : storages) entries.emplace_back("archive/data/" + st.first, std::move(st.second));
    entries.emplace_back("archive/version", "3\n");
    if (!zip_stored(entries, out)) {
      error = "too large for a ZIP without ZIP64";
      return false;
    }
    return true;
  }
};

// ---------------------------------------------------------------- the recorder

inline void json_str(std::string& out, const char* s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : ""); *p; ++p) {
    if (*p == '"' || *p == '\\') (out += '\\') += static_cast<char>(*p);
    else if (*p == '\n') out += "\\n";
    else if (*p < 0x20) ((out += "\\u00") += hex[*p >> 4]) += hex[*p & 15];
    else out += static_cast<char>(*p);
  }
  out += '"';
}

// The process-wide stop flag: in the registry when there is one (shared by
// every copy of the runtime), else this copy's own.  (Its counts are no longer
// used: the limits are kept per directory, in the ledger of dumpdir.h.)
inline DumpLedger* dump_ledger() {
  Registry* r = registry();
  if (r != nullptr) return &r->dump;
  static DumpLedger local = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0};
  return &local;
}

AOTI_DEBUG_CORE_FN std::string artifact_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&artifact_path), &info) != 0 && info.dli_fname) {
    char buf[4096];
    if (realpath(info.dli_fname, buf)) return buf;
    return info.dli_fname;
  }
  return "";
}

// A model's name as a file name takes it: no '/' or NUL.
inline std::string file_safe_model(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\0') c = '_';
  return name;
}

// The name of run R's folder: <pid>-<model>-run<R>.
inline std::string run_folder_stem(int64_t pid, const std::string& model, int64_t run) {
  return std::to_string(pid) + "-" + file_safe_model(model) + "-run" + std::to_string(run);
}

// One recorder per Model: knows the settings and where notes go.
class Recorder {
 public:
  Recorder(const Settings& s, const std::string& model, const std::string& dest, const char* tv)
      : settings_(s), model_(model), dest_(dest), torch_version_(tv) {}

  bool stopped() const { return __atomic_load_n(&dump_ledger()->stopped, __ATOMIC_ACQUIRE) != 0; }

  std::string dump_dir() const {
    std::string d = settings_.dump_dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return d;
  }

  // Run R's folder: the n-th name of <pid>-<model>-run<R> (see make_run_folder).
  std::string folder(int64_t run, int n) const {
    return dump_dir() + "/" + nth_name(run_folder_stem(getpid(), model_, run), "", n);
  }

  // Creates run R's folder, a new one: the number of its name (1 unless
  // that name was taken), or 0 when it could not be made (the recorder stops).
  int make_run_folder(int64_t run) {
    if (stopped()) return 0;
    const std::string dir = dump_dir(), stem = run_folder_stem(getpid(), model_, run);
    int err = 0, n = 1;
    if (mkdirs(dir, &err)) err = make_folder(dir, stem, true, &n);
    if (err != 0) {
      stop("cannot create dump folder " + py_repr(dir + "/" + stem) + " (" + errno_text(err) + ")");
      return 0;
    }
    if (n > 1) taken(dir + "/" + stem, folder(run, n));
    return n;
  }

  // Writes `data` to a new file dir/name (or appends, for the manifest)
  // within the limits.  False when it was not written (the recorder then stops).
  bool write_file(const std::string& dir, const std::string& name, const std::string& data, bool append) {
    return write_file(dir, name, data, append, nullptr, static_cast<int64_t>(data.size()), false, nullptr,
                      nullptr);
  }

  // Writes `data` (or `size` bytes of the file `src`) to a new file dir/name,
  // or appends it to dir/name.  With `alternatives`, a taken name gives way
  // to the next free one (*chosen), said in a note; `sha` hashes what is written.
  bool write_file(const std::string& dir, const std::string& name, const std::string& data, bool append,
                  const char* src, int64_t size, bool alternatives, std::string* chosen, Sha256* sha) {
    if (stopped()) return false;
    std::string why = reserve(size), used = name;
    if (why.empty()) {
      int fd, err = 0;
      if (append) {
        const std::string path = dir + "/" + name;
        do fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        while (fd < 0 && errno == EINTR);
        if (fd < 0) err = errno;
      } else {
        fd = create_file(dir, name, alternatives, &used);
        if (fd < 0) err = -fd;
      }
      if (used != name) taken(dir + "/" + name, dir + "/" + used);
      auto put = [&](const char* p, size_t n) {
        if (sha != nullptr) sha->update(p, n);
        if (fd < 0 || err != 0) return;
        // past a file-size limit: EFBIG, not a SIGXFSZ that kills the process (sink.h)
        if ((file_size_limited() ? write_held(fd, p, n) : write_full(fd, p, n)) < n) err = errno ? errno : ENOSPC;
      };
      if (src == nullptr) {
        put(data.data(), data.size());
      } else if (fd >= 0) {
        const int in = ::open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0) err = errno;
        std::vector<char> buf(1 << 20);
        int64_t copied = 0;
        while (in >= 0 && err == 0 && copied < size) {
          const ssize_t r = ::read(in, buf.data(), buf.size());
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) break;
          const int64_t n = r < size - copied ? r : size - copied;
          put(buf.data(), static_cast<size_t>(n));
          copied += n;
        }
        if (in >= 0) ::close(in);
      }
      if (fd >= 0 && ::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
      if (err != 0) {
        give_back(size);
        if (fd >= 0 && !append) ::unlink((dir + "/" + used).c_str());  // ours: it was created above
        why = "cannot write " + py_repr(dir + "/" + used) + " (" + errno_text(err) + ")";
      }
    }
    if (!why.empty()) {
      stop(why);
      return false;
    }
    if (chosen != nullptr) *chosen = used;
    return true;
  }

  void stop(const std::string& why) {
    DumpLedger* l = dump_ledger();
    pthread_mutex_lock(&l->lock);
    const bool first = !l->stopped;
    l->stopped = 1;
    pthread_mutex_unlock(&l->lock);
    if (first) note(why + "; no more dumps, logging goes on at level 5");
  }

  // Claims one launch against AOTI_DEBUG_DUMP_MAX_COUNT (counted in the directory's ledger).
  bool claim() {
    if (stopped()) return false;
    bool reached = false;
    std::string why = with_ledger(dump_dir(), [&](LedgerCounts& c) {
      reached = c.count >= settings_.dump_max_count;
      if (!reached) ++c.count;
      return !reached;
    });
    if (why.empty() && reached)
      why = "AOTI_DEBUG_DUMP_MAX_COUNT=" + std::to_string(settings_.dump_max_count) + " reached";
    if (!why.empty()) {
      stop(why);
      return false;
    }
    return true;
  }

  // One tensor file; appends its manifest entry to `files` and its size to *bytes.
  void save(const std::string& dir, const std::string& file, const char* name, const char* role,
            const Value& v, std::string& files, int64_t* bytes) {
    if (stopped()) return;
    PtWriter w;
    std::string data;
    if (!(w.value(v) && w.finish(&data))) return append_unwritten(files, name, role, w.error.c_str());
    if (!write_file(dir, file, data, false)) return append_unwritten(files, name, role, "not written");
    file_entry_start(files, name, role);
    files += ", \"file\": ";
    json_str(files, file.c_str());
    files += ", \"bytes\": " + std::to_string(data.size()) + "}";
    *bytes += static_cast<int64_t>(data.size());
  }

  void manifest(const std::string& dir, const std::string& line) { write_file(dir, "manifest.jsonl", line, true); }

  // A copy of the artifact's .so in the dump directory, made once per model
  // and process (a package's .so lives in a temporary folder removed at
  // exit): its path relative to a run folder ("" if none) and its sha256,
  // which replay checks before it loads the copy.
  std::string artifact_copy(const std::string& so, std::string* sha256) {
    pthread_mutex_lock(&mu_);
    struct stat st;
    if (!copy_tried_ && !so.empty()) {
      copy_tried_ = true;
      std::string used;
      Sha256 sha;
      if (stat(so.c_str(), &st) == 0 &&
          write_file(dump_dir(), std::to_string(getpid()) + "-" + file_safe_model(model_) + "-artifact.so", std::string(),
                     false, so.c_str(), static_cast<int64_t>(st.st_size), true, &used, &sha)) {
        copy_ = "../" + used;
        sha256_ = sha.hex();
      }
    }
    const std::string out = copy_;
    *sha256 = sha256_;
    pthread_mutex_unlock(&mu_);
    return out;
  }

  // Reserves `size` bytes against AOTI_DEBUG_DUMP_MAX_SIZE_GB: "" or why not.
  std::string reserve(int64_t size) {
    const double max_bytes = settings_.dump_max_size_gb * 1073741824.0;
    bool over = false;
    std::string why = with_ledger(dump_dir(), [&](LedgerCounts& c) {
      over = static_cast<double>(c.bytes) + static_cast<double>(size) > max_bytes;
      if (!over) c.bytes += size;
      return !over;
    });
    if (why.empty() && over) {
      char num[64];
      std::snprintf(num, sizeof num, "%g", settings_.dump_max_size_gb);
      why = std::string("AOTI_DEBUG_DUMP_MAX_SIZE_GB=") + num + " would be exceeded";
    }
    return why;
  }

 private:
  // What a file that could not be written had reserved.
  void give_back(int64_t size) {
    with_ledger(dump_dir(), [&](LedgerCounts& c) {
      c.bytes = c.bytes > size ? c.bytes - size : 0;
      return true;
    });
  }

  void taken(const std::string& path, const std::string& instead) {
    note(py_repr(path) + " already exists; writing " + py_repr(instead) + " instead");
  }

  void note(const std::string& text) { note_once(dest_, "flight-recorder", text, torch_version_); }

  const Settings& settings_;
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
  bool copy_tried_ = false;
  std::string copy_, sha256_;
  std::string model_, dest_;
  const char* torch_version_;
};

// Microseconds since 1970 (CLOCK_REALTIME).
inline int64_t now_us() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// A manifest's `time`: seconds since 1970, to the microsecond.
inline std::string json_time(int64_t us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(us / 1000000),
                static_cast<long long>(us % 1000000));
  return buf;
}

inline std::string json_time() { return json_time(now_us()); }

// File-name safe form of an argument name.
inline std::string safe_name(const char* s) {
  std::string out = s && *s ? s : "arg";
  for (char& c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      c = '_';
  return out;
}


}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
