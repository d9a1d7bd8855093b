// sink.h's out-of-line part: the bodies of its core functions and the helpers
// only they use.  sink.h includes it at its end wherever the bodies are compiled
// (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core object
// (src/core.cpp).
#pragma once

#include "sink.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- records ----

// English strerror() text for what opening a log file can meet (fixed, so
// tests and logs do not depend on the locale).
// Not errnos: a path another user controls, which dumps and logs never use.
constexpr int kErrNotOwned = -1001;     // a directory another user owns
constexpr int kErrForeignLink = -1002;  // a symbolic link another user owns

inline std::string errno_text(int e) {
  switch (e) {
    case kErrNotOwned: return "owned by another user, who could read what is written there";
    case kErrForeignLink: return "a symbolic link another user owns, which is not followed";
    case EACCES: return "Permission denied";
    case ENOENT: return "No such file or directory";
    case ENOTDIR: return "Not a directory";
    case EISDIR: return "Is a directory";
    case EROFS: return "Read-only file system";
    case ENOSPC: return "No space left on device";
    case ELOOP: return "Too many levels of symbolic links";
    case ENAMETOOLONG: return "File name too long";
    case EPERM: return "Operation not permitted";
    case EEXIST: return "File exists";
    case EMFILE: return "Too many open files";
    case EFBIG: return "File too large";
    case EIO: return "Input/output error";
    case EPIPE: return "Broken pipe";
    case EBADF: return "Bad file descriptor";
    case ENXIO: return "No such device or address";
    case EDQUOT: return "Disk quota exceeded";
    default: {
      std::string s = "errno ";
      append_i64(s, e);
      return s;
    }
  }
}

inline std::string expand_dest(const std::string& dest) {
  std::string out;
  for (size_t i = 0; i < dest.size(); ++i) {
    if (dest[i] == '%' && i + 1 < dest.size() && dest[i + 1] == 'i') {
      append_i64(out, current_pid());
      ++i;
    } else {
      out += dest[i];
    }
  }
  return out;
}

// mkdir -p of the path's parent directory (private: what is written there is the user's).
inline void make_parent_dirs(const std::string& path) {
  for (size_t i = 1; i < path.size(); ++i)
    if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0700);  // errors show up at open()
}

// Opens the log `path` to append to, the way aoti_debug/runtime/sink.py does: never
// through a symbolic link another user owns, never into a regular file another user
// owns (a link planted in a sticky, world-writable /tmp); a new file is 0600.  The
// descriptor, or -1 with *err (an errno) or *why set.
inline int open_own_log(const std::string& path, int* err, const char** why) {
  struct stat ln;
  const bool link = lstat(path.c_str(), &ln) == 0 && S_ISLNK(ln.st_mode);
  if (link && ln.st_uid != geteuid()) {
    *why = "a symbolic link another user owns, which is not followed";
    return -1;
  }
  int fd;
  // O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking
  // the model until one comes; writes block again as for a file.
  do fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | (link ? 0 : O_NOFOLLOW), 0600);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid != geteuid()) {
    ::close(fd);
    *why = "a file another user owns, which is not appended to";
    return -1;
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags != -1) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// What a write to an opened path's descriptor can meet, looked at once (fstat,
// fstatfs): kFdSignals, SIGPIPE (a FIFO or a socket); kFdWaits, a wait on
// something other than this machine's memory and disks (anything but a
// regular file on a local file system, or /dev/null: a pipe's reader, a
// terminal, a network file system's server).
constexpr int8_t kFdSignals = 1, kFdWaits = 2;

inline bool local_file_system(int fd) {
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<uint64_t>(fs.f_type)) {
    case 0xEF53:      // ext2, ext3, ext4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x858458F6:  // ramfs
    case 0x794C7630:  // overlayfs (containers)
    case 0xF2F52010:  // f2fs
      return true;
    default:
      return false;
  }
}

inline int8_t fd_kind(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return kFdSignals | kFdWaits;
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) return kFdSignals | kFdWaits;
  if (S_ISREG(st.st_mode)) return local_file_system(fd) ? 0 : kFdWaits;
  if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) return 0;  // /dev/null
  return kFdWaits;
}

// fd_kind of entry i, cached per copy of the runtime (the entries are shared,
// this cache is not; an entry's fd never changes).  Lock held.
inline int8_t dest_kind(const DestEntry& e, int i) {
  static unsigned gen = ~0u;
  static int8_t kind[kMaxDests];  // -1: not looked at
  const unsigned g = __atomic_load_n(&fork_generation(), __ATOMIC_RELAXED);
  if (gen != g) {  // a forked child numbers its entries again
    std::memset(kind, -1, sizeof kind);
    gen = g;
  }
  if (kind[i] < 0) kind[i] = fd_kind(e.fd);
  return kind[i];
}

// Whether a write to entry i can raise SIGPIPE or SIGXFSZ (and so goes through
// write_held): stdout and stderr always, as the process may point them at a
// pipe at any time; any path under a file-size limit; an opened FIFO or
// socket.  Lock held.
inline bool may_raise_signal(const DestEntry& e, int i) {
  return e.fd <= 2 || file_size_limited() || (dest_kind(e, i) & kFdSignals) != 0;
}

// Whether a write to entry i can wait on someone else (kFdWaits); stdout and
// stderr always.  Lock held.
inline bool dest_waits(const DestEntry& e, int i) { return e.fd <= 2 || (dest_kind(e, i) & kFdWaits) != 0; }

// Whether `key` is the NUL-terminated `s` (inline: a record looks its
// destination up on every write).
inline bool same_key(const std::string& key, const char* s) {
  const size_t n = key.size();
  return std::memcmp(key.data(), s, n) == 0 && s[n] == '\0';
}

inline int find_dest(Registry* r, const std::string& key) {
  for (int i = 0; i < r->ndest; ++i)
    if (key.size() < sizeof(r->dest[i].key) && same_key(key, r->dest[i].key)) return i;
  return -1;
}

inline int add_dest(Registry* r, const std::string& key, int fd, int target) {
  if (r->ndest >= kMaxDests || key.size() >= sizeof(r->dest[0].key)) return -1;
  DestEntry& e = r->dest[r->ndest];
  std::memcpy(e.key, key.c_str(), key.size() + 1);
  e.fd = fd;
  e.target = target < 0 ? r->ndest : target;
  return r->ndest++;
}

// The entry written for `dest` if it has one already, else -1 (resolve_dest
// makes it).  Lock held.
inline int known_dest(Registry* r, const std::string& dest) {
  const int i = std::memchr(dest.data(), '%', dest.size()) == nullptr ? find_dest(r, dest)
                                                                      : find_dest(r, expand_dest(dest));
  return i < 0 ? -1 : r->dest[i].target;
}

// Index of the entry to write for `dest` (the setting's text).  Opens files
// on first use; a failed open maps the path to stderr and sets *note_text
// (written to stderr before the record).  Lock held.
inline int resolve_dest(Registry* r, const std::string& dest, std::string* note_text) {
  const bool is_stdout = dest.size() == 6 && same_key(dest, "stdout");
  if (is_stdout || (dest.size() == 6 && same_key(dest, "stderr"))) {
    int i = find_dest(r, dest);
    if (i < 0) i = add_dest(r, dest, is_stdout ? 1 : 2, -1);
    return i < 0 ? 0 : r->dest[i].target;
  }
  // a path without '%' (the common case) is looked up without a copy
  const bool pattern = std::memchr(dest.data(), '%', dest.size()) != nullptr;
  const std::string expanded = pattern ? expand_dest(dest) : std::string();
  const std::string& path = pattern ? expanded : dest;
  int i = find_dest(r, path);
  if (i >= 0) return r->dest[i].target;
  make_parent_dirs(path);
  int fd = -1;
  int err = 0;
  const char* why = nullptr;
  if (r->ndest < kMaxDests - 2) {  // keep room for stdout/stderr
    fd = open_own_log(path, &err, &why);
  } else {
    err = EMFILE;
  }
  if (fd >= 0) {
    i = add_dest(r, path, fd, -1);
    if (i >= 0) return i;
    ::close(fd);
    err = ENAMETOOLONG;
  }
  int se = find_dest(r, "stderr");
  if (se < 0) se = add_dest(r, "stderr", 2, -1);
  add_dest(r, path, 2, se);  // later records for this path go to stderr without a new note
  *note_text = "AOTI_DEBUG_LOGDEST=" + py_repr(dest) + " is not valid: cannot open " + path +
               " (" + (why ? std::string(why) : errno_text(err)) + "); keeping stderr";
  return se < 0 ? 0 : se;
}

// A note record: header plus one body line per message.
inline std::string note_record(const std::string& topic, const std::string& lines) {
  std::string out;
  append_line_prefix(out);
  out += "note - " + topic + "\n";
  size_t start = 0;
  while (start < lines.size()) {
    size_t end = lines.find('\n', start);
    if (end == std::string::npos) end = lines.size();
    out += "  " + lines.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// The one line a failed log write leaves on stderr, once per destination.
inline std::string lost_line(const std::string& path, int err) {
  return "aoti-debug: cannot write the log to " + path + " (" + errno_text(err) +
         "); records are lost until a write succeeds\n";
}

// Body of the note the next successful write starts with.
inline std::string lost_note(int64_t lost, const std::string& path, int err) {
  std::string s;
  append_i64(s, lost);
  return s + (lost == 1 ? " record" : " records") + " lost: writing " + path + " failed (" +
         errno_text(err) + ")";
}

// Gives every header line of `text` (`[timestamp] [pid N] ...`) the
// timestamp `ts` (format_timestamp's fixed width `n`).  Records are formatted
// before the lock is taken; stamped again under it, with the time of the
// write, a log's timestamps never go backwards, whichever thread or copy of
// the runtime formatted first.  Body lines are indented: only headers start
// with '['.
inline void restamp(std::string& text, const char* ts, size_t n) {
  char* const s = &text[0];
  const size_t len = text.size();
  // from '[' to '[' (rare in a record's body), not line by line
  for (size_t i = 0; i + n + 1 < len;) {
    if ((i == 0 || s[i - 1] == '\n') && s[i] == '[' && s[i + n + 1] == ']') std::memcpy(s + i + 1, ts, n);
    const void* next = std::memchr(s + i + 1, '[', len - i - 1);
    if (next == nullptr) break;
    i = static_cast<size_t>(static_cast<const char*>(next) - s);
  }
}

// The storage of this thread's last written record, handed back by
// write_record for the next one (header_line, format.h): a record costs no
// allocation and free of its size (a level-5 launch record is kilobytes).
constexpr size_t kSpareRecordMax = 64 * 1024;  // a larger one is not kept

struct SpareRecord {
  std::string text;
  bool gone = false;  // past its thread's exit: a record written later allocates its own
  ~SpareRecord() { gone = true; }
};

inline SpareRecord& spare_record() {
  static thread_local SpareRecord spare;
  return spare;
}

// The caller's lock (WaitHooks), released at most once a write.
class Released {
 public:
  explicit Released(const WaitHooks* hooks) : hooks_(hooks) {}
  ~Released() {
    if (held_) hooks_->reacquire(token_);
  }
  void now() {
    if (hooks_ == nullptr || held_) return;
    token_ = hooks_->release();
    held_ = true;
  }
  bool done() const { return hooks_ == nullptr || held_; }

 private:
  const WaitHooks* hooks_;
  void* token_ = nullptr;
  bool held_ = false;
};

AOTI_DEBUG_CORE_FN void write_record(const std::string& dest, std::string text, const char* torch_version,
                                     const WaitHooks* hooks) {
  Released released(hooks);
  Registry* r = registry();
  if (r == nullptr) {  // no registry (mmap failed): still never lose the record
    char ts[32];
    restamp(text, ts, static_cast<size_t>(format_timestamp_fast(ts)));
    released.now();
    write_all(2, text.data(), text.size());
    return;
  }
  if (released.done() || pthread_mutex_trylock(&r->lock) != 0) {
    released.now();
    pthread_mutex_lock(&r->lock);
  }
  std::string note;
  int i = known_dest(r, dest);
  if (!released.done() && (i < 0 || dest_waits(r->dest[i], i))) released.now();  // opening it may wait too
  if (i < 0) i = resolve_dest(r, dest, &note);
  DestEntry& e = r->dest[i];
  std::string buf;
  if (!e.banner_done) buf = banner(torch_version);
  if (!note.empty()) buf += note_record("settings", note);
  if (e.lost > 0) {
    if (e.torn) buf.insert(0, "\n");  // end the torn line: the note starts a record
    buf += note_record("log", lost_note(e.lost, e.key, e.lost_errno));
  }
  std::string* out = &text;
  if (!buf.empty()) {
    buf += text;
    out = &buf;
  }
  char ts[32];
  restamp(*out, ts, static_cast<size_t>(format_timestamp_fast(ts)));
  const size_t done = may_raise_signal(e, i) ? write_held(e.fd, out->data(), out->size())
                                              : write_full(e.fd, out->data(), out->size());
  if (done == out->size()) {
    e.banner_done = 1;
    e.lost = 0, e.torn = 0, e.lost_errno = 0;
  } else {
    const int err = errno;
    if (done > 0) e.banner_done = 1;
    e.torn = e.torn || done > 0;  // the file ends inside a record until the next success
    e.lost += 1;
    e.lost_errno = err;
    if (first_time_locked(r, fnv1a(std::string("log-write-failed\n") + e.key))) {
      const std::string line = lost_line(e.key, err);
      released.now();  // stderr may be a pipe
      write_all(2, line.data(), line.size());
    }
  }
  e.used = 1;
  pthread_mutex_unlock(&r->lock);
  SpareRecord& spare = spare_record();
  if (!spare.gone && text.capacity() <= kSpareRecordMax) {
    text.clear();
    spare.text.swap(text);
  }
}

// Writes a note record unless the same topic + lines were written before.
inline void note_once(const std::string& dest, const std::string& topic, const std::string& lines,
                      const char* torch_version) {
  if (first_time(topic + "\n" + lines)) write_record(dest, note_record(topic, lines), torch_version);
}

AOTI_DEBUG_CORE_FN void tell(int level, const std::string& dest, const std::string& topic,
                 const std::string& lines, const char* torch_version, bool once) {
  if (once && !first_time(topic + "\n" + lines)) return;
  if (level >= 1) {
    write_record(dest, note_record(topic, lines), torch_version);
    return;
  }
  std::string out;
  size_t start = 0;
  while (start < lines.size()) {
    size_t end = lines.find('\n', start);
    if (end == std::string::npos) end = lines.size();
    out += "aoti-debug " + topic + ": " + lines.substr(start, end - start) + "\n";
    start = end + 1;
  }
  write_all(2, out.data(), out.size());
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
