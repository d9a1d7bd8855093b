// banner.h's out-of-line part: what only the core functions' bodies use.
// banner.h includes it at its end wherever the bodies are compiled (config.h:
// AOTI_DEBUG_CORE_BODIES): header-only code and the core object (src/core.cpp).
#pragma once

#include "banner.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// ---- header lines ----

// "[timestamp] [pid N] " -- the start of every header line -- into buf
// (>= kLinePrefixMax bytes); returns its length.
constexpr size_t kLinePrefixMax = 64;
inline int format_line_prefix(char* buf) {
  buf[0] = '[';
  int n = 1 + format_timestamp_fast(buf + 1);
  std::memcpy(buf + n, "] [pid ", 7);
  n += 7;
  n += format_i64(current_pid(), buf + n);
  buf[n++] = ']';
  buf[n++] = ' ';
  return n;
}

// The same with the time left as zeros, for a record that write_record
// stamps with the time of its write (restamp), so that a record reads the
// clock once.
inline int format_line_prefix_unstamped(char* buf) {
  static const char kBlank[] = "[0000-00-00 00:00:00.000000] [pid ";
  int n = static_cast<int>(sizeof kBlank) - 1;
  std::memcpy(buf, kBlank, static_cast<size_t>(n));
  n += format_i64(current_pid(), buf + n);
  buf[n++] = ']';
  buf[n++] = ' ';
  return n;
}

inline void append_line_prefix(std::string& out) {
  char b[kLinePrefixMax];
  out.append(b, static_cast<size_t>(format_line_prefix(b)));
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

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
