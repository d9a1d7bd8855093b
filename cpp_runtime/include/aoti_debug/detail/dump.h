// Level-10 flight recorder of the C++ shim (docs/dumps.md).
//
// Per model run, a folder <AOTI_DEBUG_DUMP_DIR>/<pid>-<model>-run<R>/ with
// the run's inputs (inputs.pt), each launch's in/inout tensors written before
// the launch and out/inout tensors after it, and manifest.jsonl (one line per
// event).  Tensor files are written in torch.save's zip format by hand
// (standard library only): an uncompressed ZIP holding archive/data.pkl
// (pickle protocol 2 calling torch._utils._rebuild_tensor_v2), the raw bytes
// in archive/data/<key>, archive/version and archive/byteorder, so
// torch.load(path, weights_only=True) reads them.
//
// A tensor file holds the smallest storage that covers the view (so an
// expanded tensor keeps its zero strides and stays small); shape, strides
// and dtype are kept, the storage offset is not (it is 0 in the file).
//
// The limits (AOTI_DEBUG_DUMP_MAX_COUNT launches, AOTI_DEBUG_DUMP_MAX_SIZE_GB
// bytes in the dump directory, manifest lines included) are hard and per
// process: the ledger lives in the process registry, shared by every copy of
// the runtime.  Reaching one, or a folder/file that cannot be written, writes
// one note and stops the recorder for the process; logging goes on at level 5.
#pragma once

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../config.h"
#include "format.h"
#include "registry.h"

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
      case Value::kTensor: return tensor(v.t);
    }
    error = "value not supported";
    return false;
  }

  bool tensor(const TensorView& t) {
    const char* cls = storage_class(t.dtype);
    const DtypeInfo* info = dtype_info(t.dtype);
    if (cls == nullptr || info == nullptr) {
      error = std::string("dtype not supported (") + (info ? info->name : "?") + ")";
      return false;
    }
    if (t.device_type != 0) {
      error = "device not supported";
      return false;
    }
    // The smallest storage covering the view.
    int64_t span = 1;
    for (int64_t d = 0; d < t.ndim; ++d) {
      if (t.sizes[d] == 0) span = 0;
      if (t.strides[d] < 0) {
        error = "negative stride";
        return false;
      }
    }
    if (span != 0)
      for (int64_t d = 0; d < t.ndim; ++d) span += (t.sizes[d] - 1) * t.strides[d];
    if (span > 0 && t.data == nullptr) {
      error = "no data";
      return false;
    }
    const std::string key = std::to_string(storages.size());
    storages.emplace_back(key, std::string(static_cast<const char*>(t.data),
                                           static_cast<size_t>(span * info->itemsize)));
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

// Process-wide ledger: in the registry when there is one (shared by every
// copy of the runtime), else this copy's own.
inline DumpLedger* dump_ledger() {
  Registry* r = registry();
  if (r != nullptr) return &r->dump;
  static DumpLedger local = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0};
  return &local;
}

inline int64_t dir_bytes(const std::string& path, int depth = 0) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr || depth > 16) {
    if (d) closedir(d);
    return 0;
  }
  int64_t total = 0;
  while (struct dirent* e = readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    const std::string p = path + "/" + e->d_name;
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) total += dir_bytes(p, depth + 1);
    else if (S_ISREG(st.st_mode)) total += st.st_size;
  }
  closedir(d);
  return total;
}

inline bool mkdirs(const std::string& path, int* err) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      *err = errno;
      return false;
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = ENOTDIR;
    return false;
  }
  return true;
}

// Where this artifact's code lives (the model .so), for replay.
inline std::string artifact_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&artifact_path), &info) != 0 && info.dli_fname) {
    char buf[4096];
    if (realpath(info.dli_fname, buf)) return buf;
    return info.dli_fname;
  }
  return "";
}

// One recorder per Model: knows the settings and where notes go.
class Recorder {
 public:
  Recorder(const Settings& s, const std::string& model, const std::string& dest, const char* tv)
      : settings_(s), model_(model), dest_(dest), torch_version_(tv) {}

  bool stopped() const { return __atomic_load_n(&dump_ledger()->stopped, __ATOMIC_ACQUIRE) != 0; }

  std::string folder(int64_t run) const {
    std::string name = model_;
    for (char& c : name)
      if (c == '/' || c == '\0') c = '_';
    std::string f = settings_.dump_dir;
    while (f.size() > 1 && f.back() == '/') f.pop_back();
    return f + "/" + std::to_string(getpid()) + "-" + name + "-run" + std::to_string(run);
  }

  // Writes `data` to folder/name (or appends, for the manifest) within the
  // limits.  False when it was not written (the recorder then stops).
  bool write_file(const std::string& dir, const std::string& name, const std::string& data, bool append) {
    return write_file(dir, name, data, append, nullptr, static_cast<int64_t>(data.size()));
  }

  // Copies the file `src` (size `size`) to folder/name within the limits.
  bool copy_file(const std::string& dir, const std::string& name, const std::string& src) {
    struct stat st;
    if (stat(src.c_str(), &st) != 0) return false;
    return write_file(dir, name, std::string(), false, src.c_str(), static_cast<int64_t>(st.st_size));
  }

  bool write_file(const std::string& dir, const std::string& name, const std::string& data, bool append,
                  const char* src, int64_t size) {
    DumpLedger* l = dump_ledger();
    std::string why;
    pthread_mutex_lock(&l->lock);
    if (l->stopped) {
      pthread_mutex_unlock(&l->lock);
      return false;
    }
    if (!l->bytes_known) {  // what earlier processes left, counted once
      l->bytes = dir_bytes(settings_.dump_dir);
      l->bytes_known = 1;
    }
    const double max_bytes = settings_.dump_max_size_gb * 1073741824.0;
    const std::string path = dir + "/" + name;
    if (static_cast<double>(l->bytes) + static_cast<double>(size) > max_bytes) {
      char num[64];
      std::snprintf(num, sizeof num, "%g", settings_.dump_max_size_gb);
      why = std::string("AOTI_DEBUG_DUMP_MAX_SIZE_GB=") + num + " would be exceeded";
    } else {
      int fd;
      do fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
      while (fd < 0 && errno == EINTR);
      int err = fd < 0 ? errno : 0;
      auto put = [&](const char* p, size_t n) {
        size_t done = 0;
        while (fd >= 0 && err == 0 && done < n) {
          const ssize_t w = ::write(fd, p + done, n - done);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) err = w < 0 ? errno : ENOSPC;
          else done += static_cast<size_t>(w);
        }
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
      if (err == 0) {
        l->bytes += size;
      } else {
        if (fd >= 0 && !append) ::unlink(path.c_str());
        why = "cannot write " + py_repr(path) + " (" + errno_text(err) + ")";
      }
    }
    const bool ok = why.empty();
    if (!ok) l->stopped = 1;
    pthread_mutex_unlock(&l->lock);
    if (!ok) stop_note(why);
    return ok;
  }

  void stop(const std::string& why) {
    DumpLedger* l = dump_ledger();
    pthread_mutex_lock(&l->lock);
    const bool first = !l->stopped;
    l->stopped = 1;
    pthread_mutex_unlock(&l->lock);
    if (first) stop_note(why);
  }

  // Claims one launch against AOTI_DEBUG_DUMP_MAX_COUNT.
  bool claim() {
    DumpLedger* l = dump_ledger();
    pthread_mutex_lock(&l->lock);
    bool ok = !l->stopped && l->count < settings_.dump_max_count;
    const bool reached = !l->stopped && !ok;
    if (ok) ++l->count;
    if (reached) l->stopped = 1;
    pthread_mutex_unlock(&l->lock);
    if (reached) stop_note("AOTI_DEBUG_DUMP_MAX_COUNT=" + std::to_string(settings_.dump_max_count) + " reached");
    return ok;
  }

  // One tensor file; appends its manifest entry to `files` and its size to *bytes.
  void save(const std::string& dir, const std::string& file, const char* name, const char* role,
            const Value& v, std::string& files, int64_t* bytes) {
    if (stopped()) return;
    PtWriter w;
    std::string data;
    const bool ok = w.value(v) && w.finish(&data);
    if (files.size() > 1) files += ", ";
    files += "{\"name\": ";
    json_str(files, name);
    files += ", \"role\": ";
    json_str(files, role);
    if (!ok) {
      files += ", \"file\": null, \"error\": ";
      json_str(files, w.error.c_str());
      files += "}";
      return;
    }
    if (!write_file(dir, file, data, false)) {
      files += ", \"file\": null, \"error\": \"not written\"}";
      return;
    }
    files += ", \"file\": ";
    json_str(files, file.c_str());
    files += ", \"bytes\": " + std::to_string(data.size()) + "}";
    *bytes += static_cast<int64_t>(data.size());
  }

  void manifest(const std::string& dir, const std::string& line) { write_file(dir, "manifest.jsonl", line, true); }

  // A copy of the artifact's .so in the dump directory, made once per model
  // and process (a package's .so lives in a temporary folder removed at
  // exit): its path relative to a run folder, "" if none.
  std::string artifact_copy(const std::string& so) {
    pthread_mutex_lock(&mu_);
    if (!copy_tried_ && !so.empty()) {
      copy_tried_ = true;
      std::string name = model_;
      for (char& c : name)
        if (c == '/' || c == '\0') c = '_';
      name = std::to_string(getpid()) + "-" + name + "-artifact.so";
      std::string dir = settings_.dump_dir;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      if (copy_file(dir, name, so)) copy_ = "../" + name;
    }
    const std::string out = copy_;
    pthread_mutex_unlock(&mu_);
    return out;
  }

 private:
  void stop_note(const std::string& why) {
    note_once(dest_, "flight-recorder", why + "; no more dumps, logging goes on at level 5", torch_version_);
  }

  const Settings& settings_;
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
  bool copy_tried_ = false;
  std::string copy_;
  std::string model_, dest_;
  const char* torch_version_;
};

inline std::string json_time() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%06ld", static_cast<long long>(ts.tv_sec), ts.tv_nsec / 1000);
  return buf;
}

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
