// The crash trailer (docs/log-format.md section 1.6): handlers for SIGSEGV,
// SIGBUS, SIGILL, SIGFPE, SIGABRT, installed once per process.  The handler
// uses async-signal-safe calls only (no malloc, stdio, locks or localtime),
// writes the trailer to every destination in use, restores the previous
// action and re-raises, so the process ends exactly as it would have (the
// previous handler runs, or the default action kills it).  It names the
// launch in flight (process_registry.h).  Included by registry.h.
#pragma once

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "../config.h"
#include "banner.h"
#include "number.h"
#include "process_registry.h"
#include "sink.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- async-signal-safe helpers ----

inline size_t cstr_len(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

// The handler and install_crash_handler() are in crash_handler-inl.h,
// compiled with the core functions' bodies (config.h).

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "crash_handler-inl.h"
#endif
