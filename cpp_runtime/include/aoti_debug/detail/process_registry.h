// The process registry (docs/log-format.md sections 4-6): what every copy of
// the runtime in a process shares.
//
// Every copy of the runtime in a process (one per artifact, one in the Python
// logger's helper library) must share one write lock, one table of open
// destinations with their banner flags, and one "launch in flight" table.
// Copies are compiled into different shared objects with hidden symbols, so
// they cannot share a C++ variable: the first one creates the registry and
// publishes its address as AOTI_DEBUG_RUNTIME_REGISTRY=<pid>:<address>:<abi>;
// the others attach.  A forked child sees another pid and starts its own (the
// parent's lock may have been held at fork time).
//
// Also kept here, as they live in the registry: notes said once per process,
// model instance names, call numbers and the launch in flight.  Included by
// registry.h, with the headers that use it (banner.h, sink.h, crash_handler.h).
#pragma once

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../config.h"
#include "number.h"

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
AOTI_DEBUG_CORE_DECL Registry* registry_slow();

// Every record asks for the registry: one load once attached (no getpid
// syscall, no lock); a forked child starts over through pthread_atfork.
inline Registry* registry() {
  Registry* r = __atomic_load_n(&registry_fast(), __ATOMIC_ACQUIRE);
  return AOTI_DEBUG_LIKELY(r != nullptr) ? r : registry_slow();
}

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

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "process_registry-inl.h"
#endif
