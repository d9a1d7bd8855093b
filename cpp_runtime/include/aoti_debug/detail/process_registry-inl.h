// process_registry.h's out-of-line part: the bodies of its core functions and
// the helpers only they use.  process_registry.h includes it at its end wherever
// the bodies are compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code
// and the core object (src/core.cpp).
#pragma once

#include "process_registry.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- finding or creating the registry ----

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

// ---- notes said once ----

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


}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
