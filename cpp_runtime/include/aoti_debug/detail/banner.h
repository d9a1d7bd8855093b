// What starts a destination and every header line of a record
// (docs/log-format.md section 1): the banner (System Information) a
// destination begins with, the `[timestamp] [pid N] ` prefix and its UTC
// timestamps (an async-signal-safe version for the crash trailer), and the
// thread and rank a run or call header names.  Included by registry.h;
// sink.h writes the banner.
#pragma once

#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "../config.h"
#include "number.h"
#include "process_registry.h"
#include "settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

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
  const char* const pairs = digit_pairs();
  const unsigned m = static_cast<unsigned>(micro), hi = m / 10000, mid = m / 100 % 100, lo = m % 100;
  buf[20] = pairs[2 * hi], buf[21] = pairs[2 * hi + 1];
  buf[22] = pairs[2 * mid], buf[23] = pairs[2 * mid + 1];
  buf[24] = pairs[2 * lo], buf[25] = pairs[2 * lo + 1];
  buf[26] = '\0';
  return 26;
}

// The header lines (append_line_prefix, header_facts, the banner) are in
// banner-inl.h: the core functions' bodies write them (config.h).

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "banner-inl.h"
#endif
