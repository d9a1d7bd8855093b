// The sink: records written to their destinations (docs/log-format.md
// sections 4-5).  Records are built by the caller, written here with ONE
// write(2) while the process lock (process_registry.h) is held, after the
// banner (banner.h) when a destination is first used.  A destination's file
// is opened once per process, its descriptor kept in the registry; a failed
// write never stops the model (the signals it may raise are held), it is said
// once on stderr and the records lost are counted.  Included by registry.h.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "../config.h"
#include "banner.h"
#include "number.h"
#include "process_registry.h"
#include "settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- async-signal-safe helpers ----

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

// ---- records ----

// How a caller holding a lock of its own (Python's GIL, in torch.compile's
// launch extension) lets other threads run while a write waits: `release`
// before waiting, `reacquire` after with what `release` returned.
struct WaitHooks {
  void* (*release)();
  void (*reacquire)(void*);
};

// Writes one complete record (or several, already concatenated) to `dest`
// with one write(2) under the process lock, after the destination's banner
// the first time.  `torch_version` is only used for the banner.  A failed or
// short write is said once on stderr and counted; the next write that
// succeeds starts with a note saying how many records were lost.  With
// `hooks`, the caller's lock is released only where the write would wait:
// for the process lock (another thread holds it), to open the destination,
// or for a destination that can keep a write waiting (dest_waits).
AOTI_DEBUG_CORE_DECL void write_record(const std::string& dest, std::string text, const char* torch_version,
                                       const WaitHooks* hooks = nullptr);
// Something the user must see (a NaN-check warning, a refused setting).  With
// records on (level >= 1) it is a note in the log; at level 0 the log stays
// empty (no banner either) and each line goes to stderr as
// `aoti-debug <topic>: <line>`, in one write.  `once`: first time per process.
AOTI_DEBUG_CORE_DECL void tell(int level, const std::string& dest, const std::string& topic,
                 const std::string& lines, const char* torch_version, bool once);

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "sink-inl.h"
#endif
