// The process registry (docs/log-format.md sections 4-6) and the crash trailer (1.6).
//
// Every copy of this header in a process (one per artifact, one in the Python
// logger's helper library) must share one write lock, one table of open
// destinations with their banner flags, and one "launch in flight" table.
// Copies are compiled into different shared objects with hidden symbols, so
// they cannot share a C++ variable: the first one creates the registry and
// publishes its address as AOTI_DEBUG_RUNTIME_REGISTRY=<pid>:<address>:<abi>;
// the others attach.  A forked child sees another pid and starts its own (the
// parent's lock may have been held at fork time).
//
// Records: built by the caller, written here with ONE write(2) while the lock
// is held, after the banner when a destination is first used.
//
// Crash trailer: handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
// installed once per process.  The handler uses async-signal-safe calls only
// (no malloc, stdio, locks or localtime), writes the trailer to every
// destination in use, restores the previous action and re-raises, so the
// process ends exactly as it would have (the previous handler runs, or the
// default action kills it).
#pragma once

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "../config.h"
#include "number.h"
#include "settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

constexpr int kMaxDests = 16;
constexpr int kMaxInflight = 64;
constexpr int kMaxNotes = 256;
constexpr int kCrashSignals[5] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

struct DestEntry {
  char key[4096];     // "stdout", "stderr" or the path after %i expansion
  int32_t fd;
  int32_t target;     // entry actually written (itself, or stderr after a failed open)
  int32_t banner_done;
  int32_t used;       // a record went here: the crash trailer goes here too
  int32_t torn;       // the last failed write stopped inside a record
  int32_t lost_errno; // why records were lost (0: none lost)
  int64_t lost;       // records not written since the last successful write
};

struct InflightSlot {
  int32_t tid;        // owning thread, 0 = free
  int32_t active;     // fields valid (written last, cleared first)
  int64_t run;        // < 0: a call, id is the launch/call number alone
  int64_t launch;
  uint64_t seq;       // newest active slot wins when the crashing thread has none
  char name[200];
  char model[128];    // the launch's model instance (`ranker#2`), "" for a call
};

// The level-10 recorder's process-wide ledger (detail/dump.h).
struct DumpLedger {
  pthread_mutex_t lock;
  int32_t stopped;      // a limit or a write error stopped the recorder
  int32_t bytes_known;  // `bytes` includes what was in the directory before
  int64_t count;        // launches dumped (AOTI_DEBUG_DUMP_MAX_COUNT)
  int64_t bytes;        // bytes in the dump directory (AOTI_DEBUG_DUMP_MAX_SIZE_GB)
  int64_t reserved;
};

// Loaded models by name, for distinct names in records (`ranker`, `ranker#2`).
constexpr int kMaxModelNames = 128;
struct ModelName {
  uint64_t hash;   // fnv1a of the compiled name
  int32_t count;   // instances loaded so far
};

// The black box (detail/blackbox.h): one ring file per process, shared by
// every model and thread.
struct BoxState {
  pthread_mutex_t lock;   // held while an entry is written or the ring is dumped
  pthread_mutex_t site_lock;  // held while a launch site's entry is looked up or written (then `lock`)
  int32_t status;         // 0: not opened yet, 1: open, -1: could not be opened (said once)
  int32_t signal_installed;
  volatile sig_atomic_t requested;  // SIGUSR2 arrived: the next launch dumps the ring
  int32_t launches;       // N, fixed by the first model that opened it
  char* base;             // the shared mapping of the ring file
  uint64_t size;
  int64_t dumps;          // folders written so far
  char path[4096];        // the ring file
};

// Shared by every copy of the runtime in the process: a layout change needs a
// new AOTI_DEBUG_REGISTRY_ABI.
struct Registry {
  char magic[8];      // "AOTIDBG"
  int32_t abi;
  int32_t pid;
  uint64_t size;
  pthread_mutex_t lock;  // the process-wide write lock
  int32_t ndest;
  DestEntry dest[kMaxDests];
  InflightSlot inflight[kMaxInflight];
  uint64_t inflight_seq;
  int32_t crash_installed;
  int32_t crash_in_progress;
  void (*crash_handler)(int, siginfo_t*, void*);  // handler of the copy that installed
  struct sigaction prev[5];
  int64_t last_call;     // call numbers N, shared with the Python logger
  int32_t nnotes;
  uint64_t notes[kMaxNotes];  // hashes of notes already written (each once per process)
  DumpLedger dump;            // ABI 2
  int32_t nmodels;            // ABI 3
  int32_t models_loaded;
  ModelName models[kMaxModelNames];
  void* memcheck;             // ABI 4: the guarding allocator (detail/memcheck.h's GuardApi)
  BoxState box;               // ABI 5
};

// ---- async-signal-safe helpers ----

inline size_t cstr_len(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

// Writes all n bytes unless write(2) fails; returns how many were written
// (errno tells why when fewer).
inline size_t write_full(int fd, const char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (w == 0) {  // no progress and no error: treat as a full device
      errno = ENOSPC;
      break;
    }
    done += static_cast<size_t>(w);
  }
  return done;
}

// The signals a write raises instead of only failing: SIGPIPE (a pipe or
// socket whose reader went away: EPIPE) and SIGXFSZ (a file past the
// process's file-size limit, RLIMIT_FSIZE: EFBIG).  Either would kill a
// process that left its default action (a C++ server), and a failed write
// must never stop the model.  Held in this thread alone while it writes: the
// one a write raised is taken back with sigtimedwait; the disposition, other
// threads and a signal that was already pending are left as they were.
// Async-signal-safe (the crash trailer uses it).
class HeldSignals {
 public:
  HeldSignals() {
    sigemptyset(&held_);
    sigaddset(&held_, SIGPIPE);
    sigaddset(&held_, SIGXFSZ);
    ok_ = pthread_sigmask(SIG_BLOCK, &held_, &old_) == 0;
    sigemptyset(&pending_);
    if (ok_) sigpending(&pending_);  // ours would merge into one pending already: not ours to take
  }
  ~HeldSignals() {
    if (!ok_) return;
    const int err = errno;
    sigset_t unblock;
    sigemptyset(&unblock);
    for (const int sig : {SIGPIPE, SIGXFSZ}) {
      const bool was_blocked = sigismember(&old_, sig) == 1;
      if (!(was_blocked && sigismember(&pending_, sig) == 1)) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&one, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
      if (!was_blocked) sigaddset(&unblock, sig);
    }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
    errno = err;
  }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t held_, old_, pending_;
  bool ok_ = false;
};

// write_full() with HeldSignals around it.
inline size_t write_held(int fd, const char* p, size_t n) {
  HeldSignals held;
  return write_full(fd, p, n);
}

// Whether this process has a file-size limit (then a write to a regular file
// can raise SIGXFSZ); looked at once per copy of the runtime.
inline bool file_size_limited() {
  static const int limited = [] {
    struct rlimit rl;
    return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? 1 : 0;
  }();
  return limited == 1;
}

inline void write_all(int fd, const char* p, size_t n) { (void)write_held(fd, p, n); }

// "YYYY-MM-DD hh:mm:ss.micro" (UTC) of `secs`.`micro` into buf (>= 27 bytes);
// returns 26.  Async-signal-safe.
inline int format_time(char* buf, int64_t secs, int64_t micro) {
  int64_t days = secs / 86400, rem = secs % 86400;
  if (rem < 0) rem += 86400, --days;
  // civil date from days since 1970-01-01 (proleptic Gregorian)
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const int64_t fields[7] = {year, month, day, rem / 3600, rem / 60 % 60, rem % 60, micro};
  const int widths[7] = {4, 2, 2, 2, 2, 2, 6};
  const char seps[7] = {'-', '-', ' ', ':', ':', '.', '\0'};
  int n = 0;
  for (int f = 0; f < 7; ++f) {
    int64_t v = fields[f];
    for (int k = widths[f] - 1; k >= 0; --k, v /= 10) buf[n + k] = static_cast<char>('0' + v % 10);
    n += widths[f];
    if (seps[f]) buf[n++] = seps[f];
  }
  buf[n] = '\0';
  return n;
}

// The current time, as format_time() writes it.  Async-signal-safe.
inline int format_timestamp(char* buf) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return format_time(buf, ts.tv_sec, ts.tv_nsec / 1000);
}

// The same, for records: the date and time of day are formatted once per
// second and thread, only the microseconds on every record.  Not for signal
// handlers (thread-local storage).
inline int format_timestamp_fast(char* buf) {
  static thread_local int64_t second = -1;
  static thread_local char text[32];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t micro = ts.tv_nsec / 1000;
  if (AOTI_DEBUG_UNLIKELY(ts.tv_sec != second)) {
    format_time(text, ts.tv_sec, 0);
    second = ts.tv_sec;
  }
  std::memcpy(buf, text, 20);  // "YYYY-MM-DD hh:mm:ss."
  int64_t v = micro;
  for (int k = 25; k >= 20; --k, v /= 10) buf[k] = static_cast<char>('0' + v % 10);
  buf[26] = '\0';
  return 26;
}

// Keeps this copy's shared object loaded for good: code of it that outlives
// an unload (a signal handler, the deleter of memory it handed out) stays.
inline void pin_this_object() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pin_this_object), &info) != 0 && info.dli_fname != nullptr)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

// Bumped in a forked child (pthread_atfork): per-process caches start again.
inline unsigned& fork_generation() {
  static unsigned g = 0;
  return g;
}

// The signal handler's version: a plain syscall, no thread-local storage.
inline int32_t current_tid_raw() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// Every launch asks for it twice: a syscall each time is the largest part of
// a level-1 record on some kernels, so it is kept per thread.
inline int32_t current_tid() {
  static thread_local unsigned gen = ~0u;
  static thread_local int32_t tid = 0;
  const unsigned g = __atomic_load_n(&fork_generation(), __ATOMIC_RELAXED);
  if (AOTI_DEBUG_UNLIKELY(gen != g)) {
    tid = current_tid_raw();
    gen = g;
  }
  return tid;
}

// ---- finding or creating the registry ----

#if AOTI_DEBUG_CORE_BODIES
// Attaching must never crash on a stale value (e.g. inherited across exec):
// check that the page is mapped before reading it, then check its contents.
inline Registry* validate_registry(uintptr_t addr, pid_t pid) {
  const long page = sysconf(_SC_PAGESIZE);
  if (addr == 0 || page <= 0 || addr % alignof(Registry) != 0) return nullptr;
  const uintptr_t start = addr & ~static_cast<uintptr_t>(page - 1);
  const size_t len = (addr + sizeof(Registry)) - start;
  unsigned char vec[64];
  if ((len + page - 1) / page > sizeof vec) return nullptr;
  if (mincore(reinterpret_cast<void*>(start), len, vec) != 0) return nullptr;
  Registry* r = reinterpret_cast<Registry*>(addr);
  if (std::memcmp(r->magic, "AOTIDBG", 8) != 0 || r->abi != AOTI_DEBUG_REGISTRY_ABI ||
      r->pid != pid || r->size != sizeof(Registry))
    return nullptr;
  return r;
}

inline Registry* create_registry(pid_t pid) {
  void* mem = mmap(nullptr, sizeof(Registry), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  Registry* r = static_cast<Registry*>(mem);  // zero-filled
  std::memcpy(r->magic, "AOTIDBG", 8);
  r->abi = AOTI_DEBUG_REGISTRY_ABI;
  r->pid = pid;
  r->size = sizeof(Registry);
  pthread_mutex_init(&r->lock, nullptr);
  pthread_mutex_init(&r->dump.lock, nullptr);
  pthread_mutex_init(&r->box.lock, nullptr);
  pthread_mutex_init(&r->box.site_lock, nullptr);
  return r;
}

// Parses "<pid>:<address>:<abi>".
inline bool parse_registry_var(const char* v, long* pid, uintptr_t* addr, long* abi) {
  char* end = nullptr;
  *pid = std::strtol(v, &end, 10);
  if (*end != ':') return false;
  *addr = static_cast<uintptr_t>(std::strtoull(end + 1, &end, 16));
  if (*end != ':') return false;
  *abi = std::strtol(end + 1, &end, 10);
  return *end == '\0';
}

#endif  // AOTI_DEBUG_CORE_BODIES

// This process's registry (created on first use); null only if mmap fails.
inline Registry*& registry_fast() {  // this copy's attached registry; reset on fork
  static Registry* r = nullptr;
  return r;
}

inline void registry_after_fork_child() {
  __atomic_store_n(&registry_fast(), nullptr, __ATOMIC_RELAXED);
  __atomic_add_fetch(&fork_generation(), 1, __ATOMIC_RELAXED);
}

// Per-process caches (the registry pointer, the pid) start again in a forked
// child; registered once per copy of the runtime, by whichever asks first.
inline void watch_forks() {
  static const int atfork = pthread_atfork(nullptr, nullptr, registry_after_fork_child);
  (void)atfork;
}

// getpid() without a system call per record: cached, and read again after a fork.
inline pid_t current_pid() {
  static uint64_t cached = 0;  // generation << 32 | pid; 0 = not read yet
  watch_forks();
  const uint64_t gen = __atomic_load_n(&fork_generation(), __ATOMIC_RELAXED) + 1u;
  uint64_t c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (AOTI_DEBUG_UNLIKELY(c >> 32 != gen)) {
    c = gen << 32 | static_cast<uint32_t>(getpid());
    __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
  }
  return static_cast<pid_t>(static_cast<uint32_t>(c));
}

// Attaches to (or creates) the registry: once per copy and process.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN Registry* registry_slow();
#else
AOTI_DEBUG_CORE_FN Registry* registry_slow() {
  static Registry* cached = nullptr;  // guarded by `mu` (per copy)
  static pid_t cached_pid = 0;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  watch_forks();
  const pid_t pid = getpid();
  pthread_mutex_lock(&mu);
  if (cached == nullptr || cached_pid != pid) {
    Registry* r = nullptr;
    long vpid = 0, abi = 0;
    uintptr_t addr = 0;
    const char* v = std::getenv("AOTI_DEBUG_RUNTIME_REGISTRY");
    const bool parsed = v && parse_registry_var(v, &vpid, &addr, &abi);
    if (parsed && vpid == pid && abi == AOTI_DEBUG_REGISTRY_ABI) r = validate_registry(addr, pid);
    if (r == nullptr) {
      r = create_registry(pid);
      // A live registry of another ABI keeps its name; we then run on our own.
      const bool other_abi_alive = parsed && vpid == pid && abi != AOTI_DEBUG_REGISTRY_ABI;
      if (r && !other_abi_alive) {
        char buf[96];
        int n = format_i64(pid, buf);
        buf[n++] = ':';
        n += std::snprintf(buf + n, sizeof buf - n, "0x%llx",
                           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(r)));
        buf[n++] = ':';
        n += format_i64(AOTI_DEBUG_REGISTRY_ABI, buf + n);
        buf[n] = '\0';
        setenv("AOTI_DEBUG_RUNTIME_REGISTRY", buf, 1);
      }
    }
    cached = r;
    cached_pid = pid;
  }
  Registry* r = cached;
  pthread_mutex_unlock(&mu);
  if (r != nullptr) __atomic_store_n(&registry_fast(), r, __ATOMIC_RELEASE);
  return r;
}

#endif  // AOTI_DEBUG_CORE_BODIES

// Every record asks for the registry: one load once attached (no getpid
// syscall, no lock); a forked child starts over through pthread_atfork.
inline Registry* registry() {
  Registry* r = __atomic_load_n(&registry_fast(), __ATOMIC_ACQUIRE);
  return AOTI_DEBUG_LIKELY(r != nullptr) ? r : registry_slow();
}

// ---- records ----

#if AOTI_DEBUG_CORE_BODIES
// "[timestamp] [pid N] " -- the start of every header line.
inline void append_line_prefix(std::string& out) {
  char ts[32];
  const int n = format_timestamp_fast(ts);
  out += '[';
  out.append(ts, static_cast<size_t>(n));
  out += "] [pid ";
  append_i64(out, current_pid());
  out += "] ";
}

// The OS id of the calling thread (what profilers and `ps -L` show), cached per
// thread; a forked child's thread has another.
inline int64_t thread_id() {
  static thread_local pid_t cached_pid = 0;
  static thread_local int64_t tid = 0;
  const pid_t pid = current_pid();
  if (cached_pid != pid) tid = static_cast<int64_t>(syscall(SYS_gettid)), cached_pid = pid;
  return tid;
}

// What a run or call header says after its name: ` thread=T`, then ` rank=R/W`
// (` rank=R` without a world size) when the process has a rank.
inline std::string header_facts(int64_t rank, int64_t world) {
  std::string out = " thread=";
  append_i64(out, thread_id());
  if (rank >= 0) {
    out += " rank=";
    append_i64(out, rank);
    if (world > 0) {
      out += '/';
      append_i64(out, world);
    }
  }
  return out;
}

inline std::string banner(const char* torch_version) {
  const std::string rule(80, '=');
  std::string b = rule + "\n";
  append_line_prefix(b);  // stamped again with the write's time (restamp)
  b += "aoti-debug - System Information\n" + rule + "\n";
  b += "aoti-debug version: " AOTI_DEBUG_VERSION "\n";
  b += std::string("PyTorch version: ") + (torch_version && *torch_version ? torch_version : "unknown") + "\n";
  struct utsname u;
  if (uname(&u) == 0) b += std::string("Platform: ") + u.sysname + " " + u.machine + "\n";
  else b += "Platform: unknown\n";
  const ProcessRank pr = process_rank(Env{});
  if (pr.rank >= 0) {
    b += "Rank: ";
    append_i64(b, pr.rank);
    if (pr.world > 0) {
      b += " of ";
      append_i64(b, pr.world);
    }
    b += '\n';
  }
  return b + rule + "\n";
}

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

// Whether a write to entry i can raise SIGPIPE or SIGXFSZ (and so goes through
// write_held): stdout and stderr always, as the process may point them at a
// pipe at any time; any path under a file-size limit; an opened path when it
// is a FIFO or a socket, looked at once per copy of the runtime (the entries
// are shared, this cache is not; an entry's fd never changes).  Lock held.
inline bool may_raise_signal(const DestEntry& e, int i) {
  if (e.fd <= 2 || file_size_limited()) return true;
  static unsigned gen = ~0u;
  static int8_t kind[kMaxDests];  // -1: not looked at, 0: no, 1: yes
  const unsigned g = __atomic_load_n(&fork_generation(), __ATOMIC_RELAXED);
  if (gen != g) {  // a forked child numbers its entries again
    std::memset(kind, -1, sizeof kind);
    gen = g;
  }
  if (kind[i] < 0) {
    struct stat st;
    kind[i] = fstat(e.fd, &st) != 0 || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  }
  return kind[i] == 1;
}

inline int find_dest(Registry* r, const std::string& key) {
  for (int i = 0; i < r->ndest; ++i)
    if (key == r->dest[i].key) return i;
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

// Index of the entry to write for `dest` (the setting's text).  Opens files
// on first use; a failed open maps the path to stderr and sets *note_text
// (written to stderr before the record).  Lock held.
inline int resolve_dest(Registry* r, const std::string& dest, std::string* note_text) {
  if (dest == "stdout" || dest == "stderr") {
    int i = find_dest(r, dest);
    if (i < 0) i = add_dest(r, dest, dest == "stdout" ? 1 : 2, -1);
    return i < 0 ? 0 : r->dest[i].target;
  }
  // a path without '%' (the common case) is looked up without a copy
  const std::string expanded = dest.find('%') == std::string::npos ? std::string() : expand_dest(dest);
  const std::string& path = expanded.empty() ? dest : expanded;
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

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// True the first time the process sees this hash.  Lock held.
inline bool first_time_locked(Registry* r, uint64_t h) {
  for (int i = 0; i < r->nnotes; ++i)
    if (r->notes[i] == h) return false;
  if (r->nnotes < kMaxNotes) r->notes[r->nnotes++] = h;
  return true;
}

// True the first time this process sees `text` (every copy of the runtime
// counts): notes such as "bad value" are said once per process.
inline bool first_time(const std::string& text) {
  Registry* r = registry();
  if (r == nullptr) return true;
  pthread_mutex_lock(&r->lock);
  const bool first = first_time_locked(r, fnv1a(text));
  pthread_mutex_unlock(&r->lock);
  return first;
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

#endif  // AOTI_DEBUG_CORE_BODIES

// Writes one complete record (or several, already concatenated) to `dest`
// with one write(2) under the process lock, after the destination's banner
// the first time.  `torch_version` is only used for the banner.  A failed or
// short write is said once on stderr and counted; the next write that
// succeeds starts with a note saying how many records were lost.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void write_record(const std::string& dest, std::string text, const char* torch_version);
#else
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

AOTI_DEBUG_CORE_FN void write_record(const std::string& dest, std::string text, const char* torch_version) {
  Registry* r = registry();
  if (r == nullptr) {  // no registry (mmap failed): still never lose the record
    write_all(2, text.data(), text.size());
    return;
  }
  pthread_mutex_lock(&r->lock);
  std::string note;
  const int i = resolve_dest(r, dest, &note);
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
#endif

#if AOTI_DEBUG_CORE_BODIES
// Writes a note record unless the same topic + lines were written before.
inline void note_once(const std::string& dest, const std::string& topic, const std::string& lines,
                      const char* torch_version) {
  if (first_time(topic + "\n" + lines)) write_record(dest, note_record(topic, lines), torch_version);
}

#endif  // AOTI_DEBUG_CORE_BODIES

// Something the user must see (a NaN-check warning, a refused setting).  With
// records on (level >= 1) it is a note in the log; at level 0 the log stays
// empty (no banner either) and each line goes to stderr as
// `aoti-debug <topic>: <line>`, in one write.  `once`: first time per process.
#if !AOTI_DEBUG_CORE_BODIES
AOTI_DEBUG_CORE_FN void tell(int level, const std::string& dest, const std::string& topic,
                 const std::string& lines, const char* torch_version, bool once);
#else
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
#endif

#if AOTI_DEBUG_CORE_BODIES
// The name a newly loaded model writes in its records: its compiled name the
// first time, `name#2`, `name#3`... for later instances in the process (every
// copy of the runtime counts).  A full table numbers by the process's total.
inline std::string instance_name(const std::string& name) {
  Registry* r = registry();
  if (r == nullptr) return name;
  const uint64_t h = fnv1a(name);
  pthread_mutex_lock(&r->lock);
  const int32_t total = ++r->models_loaded;
  int32_t count = 0;
  for (int i = 0; i < r->nmodels && count == 0; ++i)
    if (r->models[i].hash == h) count = ++r->models[i].count;
  if (count == 0 && r->nmodels < kMaxModelNames) {
    r->models[r->nmodels++] = ModelName{h, 1};
    count = 1;
  }
  pthread_mutex_unlock(&r->lock);
  if (count == 0) count = total;
  if (count == 1) return name;
  std::string out = name + "#";
  append_i64(out, count);
  return out;
}

// Next call number N (from 1), shared by every runtime in the process.
inline int64_t next_call_number() {
  Registry* r = registry();
  static int64_t local = 0;  // only without a registry
  if (r == nullptr) return __atomic_add_fetch(&local, 1, __ATOMIC_RELAXED);
  return __atomic_add_fetch(&r->last_call, 1, __ATOMIC_RELAXED);
}

#endif  // AOTI_DEBUG_CORE_BODIES

// ---- the launch in flight ----

inline InflightSlot* own_slot(Registry* r, bool claim) {
  const int32_t tid = current_tid();
  for (auto& s : r->inflight)
    if (__atomic_load_n(&s.tid, __ATOMIC_RELAXED) == tid) return &s;
  if (!claim) return nullptr;
  for (auto& s : r->inflight) {  // a free slot, else one whose owner is idle
    int32_t expected = 0;
    if (__atomic_compare_exchange_n(&s.tid, &expected, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      return &s;
  }
  for (auto& s : r->inflight) {
    int32_t owner = __atomic_load_n(&s.tid, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&s.active, __ATOMIC_ACQUIRE) &&
        __atomic_compare_exchange_n(&s.tid, &owner, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      return &s;
  }
  return nullptr;
}

// Marks launch R.K of model instance `model` (or call K when run < 0) of kernel
// `name` as running on this thread: a crash until clear_inflight() names it in
// the trailer.
inline void set_inflight(int64_t run, int64_t launch, const char* name, const char* model = nullptr) {
  Registry* r = registry();
  if (r == nullptr) return;
  InflightSlot* s = own_slot(r, true);
  if (s == nullptr) return;
  __atomic_store_n(&s->active, 0, __ATOMIC_RELEASE);
  s->run = run;
  s->launch = launch;
  size_t n = name ? std::strlen(name) : 0;
  if (n >= sizeof s->name) n = sizeof s->name - 1;
  std::memcpy(s->name, name ? name : "", n);
  s->name[n] = '\0';
  n = model ? std::strlen(model) : 0;
  if (n >= sizeof s->model) n = sizeof s->model - 1;
  std::memcpy(s->model, model ? model : "", n);
  s->model[n] = '\0';
  s->seq = __atomic_add_fetch(&r->inflight_seq, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&s->active, 1, __ATOMIC_RELEASE);
}

// What this thread has in flight (a launch, when a scope opens inside one),
// so that the scope can hand the trailer back to it when it closes.
struct InflightMark {
  bool active = false;
  int64_t run = 0;
  int64_t launch = 0;
  std::string name;
  std::string model;
};

inline InflightMark current_inflight() {
  InflightMark m;
  Registry* r = registry();
  InflightSlot* s = r ? own_slot(r, false) : nullptr;
  if (s != nullptr && __atomic_load_n(&s->active, __ATOMIC_ACQUIRE)) {
    m.active = true, m.run = s->run, m.launch = s->launch, m.name = s->name, m.model = s->model;
  }
  return m;
}

inline void clear_inflight() {
  Registry* r = registry();
  if (r == nullptr) return;
  InflightSlot* s = own_slot(r, false);
  if (s != nullptr) __atomic_store_n(&s->active, 0, __ATOMIC_RELEASE);
}

#if AOTI_DEBUG_CORE_BODIES
// ---- the crash trailer ----

// The registry the installed handler reports to (set once, before install).
inline Registry*& crash_registry() {
  static Registry* r = nullptr;
  return r;
}

inline const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

// Async-signal-safe from here on: stack buffers and syscalls only.
inline int build_trailer(Registry* r, int sig, char* buf, int cap) {
  const InflightSlot* pick = nullptr;
  if (r != nullptr) {
    const int32_t tid = current_tid_raw();
    for (const auto& s : r->inflight)  // the crashing thread's launch first
      if (__atomic_load_n(&s.active, __ATOMIC_ACQUIRE) && s.tid == tid) pick = &s;
    if (pick == nullptr)  // e.g. abort() from another thread: the newest launch
      for (const auto& s : r->inflight)
        if (__atomic_load_n(&s.active, __ATOMIC_ACQUIRE) && (pick == nullptr || s.seq > pick->seq))
          pick = &s;
  }
  int n = 0;
  auto put = [&](const char* s, size_t len) {
    for (size_t i = 0; i < len && n < cap - 1; ++i) buf[n++] = s[i];
  };
  auto puts_ = [&](const char* s) { put(s, cstr_len(s)); };
  char num[32];
  puts_("[");
  put(num, static_cast<size_t>(format_timestamp(num)));
  puts_("] [pid ");
  put(num, static_cast<size_t>(format_i64(getpid(), num)));
  puts_("] crash ");
  if (pick != nullptr) {
    if (pick->run >= 0) {
      if (pick->model[0]) {  // `ranker#2:1.3`, as the launch record
        puts_(pick->model);
        puts_(":");
      }
      put(num, static_cast<size_t>(format_i64(pick->run, num)));
      puts_(".");
    }
    put(num, static_cast<size_t>(format_i64(pick->launch, num)));
    puts_(" ");
    puts_(pick->name[0] ? pick->name : "-");
  } else {
    puts_("- -");
  }
  puts_("\n  signal: ");
  puts_(signal_name(sig));
  puts_("\n");
  return n;
}

inline void crash_handler(int sig, siginfo_t*, void*) {
  const int saved_errno = errno;
  Registry* r = crash_registry();
  int idx = -1;
  for (int i = 0; i < 5; ++i)
    if (kCrashSignals[i] == sig) idx = i;
  // Only the first fatal signal writes (a second one may come from this very handler).
  if (r == nullptr || __atomic_exchange_n(&r->crash_in_progress, 1, __ATOMIC_ACQ_REL) == 0) {
    char buf[512];
    const int n = build_trailer(r, sig, buf, sizeof buf);
    bool wrote = false;
    if (r != nullptr) {
      const int nd = r->ndest < kMaxDests ? r->ndest : kMaxDests;
      for (int i = 0; i < nd; ++i) {
        const DestEntry& e = r->dest[i];
        if (e.used && e.target == i) {
          write_all(e.fd, buf, static_cast<size_t>(n));
          wrote = true;
        }
      }
    }
    if (!wrote) write_all(2, buf, static_cast<size_t>(n));
  }
  // Hand the signal back: previous action restored, raised again.  It stays
  // blocked until we return, then the previous handler or default action runs.
  if (r != nullptr && idx >= 0) sigaction(sig, &r->prev[idx], nullptr);
  else signal(sig, SIG_DFL);
  raise(sig);
  errno = saved_errno;
}

// Restores the previous handlers when the copy that installed them is
// unloaded (its handler code is about to disappear) or the process exits.
struct CrashHandlerOwner {
  bool owner = false;
  ~CrashHandlerOwner() {
    Registry* r = crash_registry();
    if (!owner || r == nullptr) return;
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < 5; ++i) {
      struct sigaction cur;
      if (sigaction(kCrashSignals[i], nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
          cur.sa_sigaction == &crash_handler)
        sigaction(kCrashSignals[i], &r->prev[i], nullptr);
    }
    if (r->crash_handler == &crash_handler) r->crash_installed = 0, r->crash_handler = nullptr;
    pthread_mutex_unlock(&r->lock);
  }
};

inline CrashHandlerOwner& crash_handler_owner() {
  static CrashHandlerOwner o;
  return o;
}

// Installs the crash handlers once per process (whichever copy asks first).
inline void install_crash_handler() {
  Registry* r = registry();
  if (r == nullptr) return;
  CrashHandlerOwner& owner = crash_handler_owner();  // constructed before use: destroyed after
  pthread_mutex_lock(&r->lock);
  if (!r->crash_installed) {
    crash_registry() = r;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 5; ++i) sigaction(kCrashSignals[i], &sa, &r->prev[i]);
    r->crash_handler = &crash_handler;
    r->crash_installed = 1;
    owner.owner = true;
  }
  pthread_mutex_unlock(&r->lock);
}

#endif  // AOTI_DEBUG_CORE_BODIES

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
