// Run-time settings: the C++ mirror of aoti_debug/settings.py.
//
// Same variables, aliases, precedence (AOTI_DEBUG_* first; the alias only
// when the primary name is absent), grammar (ASCII only: see "the grammar"
// in settings-inl.h) and message wording (`NAME='value' is not valid: accepted`).
// Unlike Python, a bad value never raises: the message gets `; keeping
// <fallback>` appended, where the fallback is the artifact's compiled-in value
// for compile + run variables and the default otherwise (`*` for no kernel
// filter), and is written once as a `note` record.
//
// Also the kernel filter: comma-separated, case-insensitive fnmatch-style
// globs (`*`, `?`, `[seq]`, `[!seq]`).
#pragma once

#include <algorithm>
#include <clocale>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../config.h"
#include "number.h"

extern char** environ;  // the process's variables (POSIX), for the names that are not ours

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

constexpr size_t kSuggestMax = 100;  // a longer name gets no "did you mean" (settings.py:SUGGEST_MAX)

enum NanAction : int { kNanOff = 0, kNanWarn = 1, kNanRaise = 2 };

struct NanCheck {
  int action = kNanOff;
  bool count_inf = false;  // naninf: +-Inf fails too
  // settings.py's str(NanCheck): off, warn:nan, raise:naninf, ...
  std::string str() const {
    if (action == kNanOff) return "off";
    return std::string(action == kNanWarn ? "warn" : "raise") + (count_inf ? ":naninf" : ":nan");
  }
};

// AOTI_DEBUG_SYNC's notes, word for word as settings.py's SYNC_NEEDS_LEVEL and SYNC_CAPTURE
constexpr const char* kSyncNeedsLevel =
    "AOTI_DEBUG_SYNC=1 waits for the launches of a logged run: at level 0 no launch is waited for "
    "(set AOTI_DEBUG_LOGLEVEL=1 with it)";
constexpr const char* kSyncCapture =
    "AOTI_DEBUG_SYNC=1: the stream is being captured into a CUDA graph, so its launches are not waited "
    "for during capture (run the model uncaptured to pin a fault to its launch)";

struct Settings {
  int level = 0;
  std::string logdest = "stdout";
  std::vector<std::string> kernels;  // lowercased globs; empty = every kernel
  bool check_inputs = false;
  NanCheck nan_check;
  bool nan_check_sat = false;  // AOTI_DEBUG_NAN_CHECK_SAT: saturated float8 values fail the check too
  int memcheck = kNanOff;  // AOTI_DEBUG_MEMCHECK: kNanOff, kNanWarn or kNanRaise (off, warn, raise)
  bool sync = false;
  std::string dump_dir = "aoti_debug_dumps";
  double dump_max_size_gb = 20.0;
  int64_t dump_max_count = 1000;
  int64_t blackbox = 0;            // AOTI_DEBUG_BLACKBOX: launches kept (0: off)
  int64_t blackbox_max_mb = 256;   // AOTI_DEBUG_BLACKBOX_MAX_MB: the ring file's size
  int64_t rank = -1, world = -1;  // the process's rank and world size; -1: unknown (process_rank)
  // "Set at run time": for each value run time may lower (Model::init), the "NAME='value'" that
  // set it validly, empty where no variable did (settings.py's Settings.set_at_run_time).
  // (The kernel filter needs none: unset, it is the fallback's, which Model reads as is.)
  enum Lowered { kLevel, kCheckInputs, kNanCheck, kMemcheck, kBlackbox, kLoweredCount };
  std::string set_from[kLoweredCount];
  const std::string* set_at_run_time(Lowered field) const {
    return set_from[field].empty() ? nullptr : &set_from[field];
  }
};

constexpr int64_t kBlackboxMaxLaunches = 1000000;
constexpr int64_t kBlackboxMaxMb = 1048576;

// Where variables come from: the process environment, or (tests) a block
// of NAME=VALUE strings.
struct Env {
  const char* const* block = nullptr;  // null: use getenv
  bool get(const char* name, std::string* value) const {
    if (block == nullptr) {
      const char* v = std::getenv(name);
      if (v == nullptr) return false;
      *value = v;
      return true;
    }
    const size_t n = std::strlen(name);
    for (const char* const* e = block; *e; ++e)
      if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
        *value = *e + n + 1;
        return true;
      }
    return false;
  }
};

// The process's rank: RANK, else LOCAL_RANK (torchrun sets both), as a whole
// number; the world size from WORLD_SIZE (LOCAL_WORLD_SIZE with LOCAL_RANK).
// -1 where unknown.  aoti_debug/settings.py:process_rank is the same rule.
struct ProcessRank {
  int64_t rank = -1, world = -1;
};

// Their bodies, and the helpers only they use, are in settings-inl.h: a wrapper
// linked with the core object (config.h) parses none of them.

// Python's repr() of the str that os.environ gives for these bytes
// (undecodable bytes arrive as surrogate escapes \udcXX).
AOTI_DEBUG_CORE_DECL std::string py_repr(const std::string& s);
AOTI_DEBUG_CORE_DECL ProcessRank process_rank(const Env& env);
// Whether any of the kernel filter's (lowercased) globs matches `text` (any case).
AOTI_DEBUG_CORE_DECL bool any_glob_matches(const std::vector<std::string>& pats, const char* text);

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "settings-inl.h"
#endif
