// crash_handler.h's out-of-line part: what only the core functions' bodies use.
// crash_handler.h includes it at its end wherever the bodies are compiled
// (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the core object
// (src/core.cpp).
#pragma once

#include "crash_handler.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

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

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
