// dumpdir.h's out-of-line part: what only the core functions' bodies use.
// dumpdir.h includes it at its end wherever the bodies are compiled (config.h:
// AOTI_DEBUG_CORE_BODIES): header-only code and the core object (src/core.cpp).
#pragma once

#include "dumpdir.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// The n-th name tried for stem + ext (n = 1: the name itself).
inline std::string nth_name(const std::string& stem, const std::string& ext, int n) {
  return n <= 1 ? stem + ext : stem + "." + std::to_string(n) + ext;
}

// Creates a new folder parent/<stem> (or the first free alternative when
// `alternatives`): 0 with the number of its name in *n (1: <stem> itself),
// or the errno.
inline int make_folder(const std::string& parent, const std::string& stem, bool alternatives, int* n) {
  for (*n = 1; *n <= (alternatives ? kNameTries : 1); ++*n) {
    if (::mkdir((parent + "/" + nth_name(stem, "", *n)).c_str(), 0700) == 0) return 0;
    if (errno != EEXIST) return errno;
  }
  *n = 1;
  return EEXIST;
}

// Creates a new file dir/<name> (or the first free alternative when
// `alternatives`, the number going before the extension): the descriptor
// with its name in *chosen, or -errno.  `access`: O_WRONLY, or O_RDWR for a
// file that is mapped.
inline int create_file(const std::string& dir, const std::string& name, bool alternatives,
                       std::string* chosen, int access = O_WRONLY, mode_t mode = 0600) {
  const size_t dot = name.rfind('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  const std::string ext = name.substr(stem.size());
  for (int n = 1; n <= (alternatives ? kNameTries : 1); ++n) {
    *chosen = nth_name(stem, ext, n);
    const std::string path = dir + "/" + *chosen;
    int fd;
    do fd = ::open(path.c_str(), access | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return -errno;
  }
  *chosen = name;
  return -EEXIST;
}

// Bytes of the regular files under `path` (links are not followed; 16 levels deep).
inline int64_t dir_bytes(const std::string& path, int depth = 0) {
  DIR* d = depth > 16 ? nullptr : opendir(path.c_str());
  if (d == nullptr) return 0;
  int64_t total = 0;
  while (struct dirent* e = readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    const std::string p = path + "/" + e->d_name;
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) total += dir_bytes(p, depth + 1);
    else if (S_ISREG(st.st_mode)) total += st.st_size;
  }
  closedir(d);
  return total;
}

// mkdir -p (0700); false with *err set when `path` is not, in the end, a directory the
// user owns, reached through no link another user owns.
inline bool mkdirs(const std::string& path, int* err) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = errno;
      return false;
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != geteuid()) {
    *err = kErrForeignLink;
    return false;
  }
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = ENOTDIR;
    return false;
  }
  if (st.st_uid != geteuid()) {  // dumps hold the model's inputs and weights: the user's own folder only
    *err = kErrNotOwned;
    return false;
  }
  return true;
}

inline bool parse_ledger(const char* buf, ssize_t n, LedgerCounts* c) {
  if (n != kLedgerBytes || std::memcmp(buf, "bytes ", 6) != 0 || std::memcmp(buf + 26, " count ", 7) != 0 ||
      buf[53] != '\n')
    return false;
  int64_t v[2] = {0, 0};
  for (int k = 0; k < 2; ++k)
    for (int i = k ? 33 : 6, end = i + 20; i < end; ++i) {
      if (buf[i] < '0' || buf[i] > '9' || v[k] > (INT64_MAX - 9) / 10) return false;
      v[k] = v[k] * 10 + (buf[i] - '0');
    }
  c->bytes = v[0], c->count = v[1];
  return true;
}

// Runs `update(LedgerCounts&) -> bool` (true: write the counts back) on the
// ledger of `dir` under an exclusive flock(); "" or what went wrong, e.g.
// "cannot write 'dumps/.aoti-debug-ledger' (Too many levels of symbolic links)".
template <class Update>
std::string with_ledger(const std::string& dir, Update update) {
  const std::string path = dir + "/" + kLedgerName;
  int fd;
  do fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  while (fd < 0 && errno == EINTR);
  int err = fd < 0 ? errno : 0;
  struct stat st;
  std::string why;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) why = "not a regular file";
  while (fd >= 0 && why.empty() && err == 0 && flock(fd, LOCK_EX) != 0)
    if (errno != EINTR) err = errno;
  if (fd >= 0 && why.empty() && err == 0) {
    char buf[kLedgerBytes + 1];
    ssize_t n;
    do n = ::pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    LedgerCounts c;
    const bool fresh = !parse_ledger(buf, n, &c);
    if (fresh) c = {dir_bytes(dir) - static_cast<int64_t>(st.st_size) + kLedgerBytes, 0};
    if (update(c) || fresh) {
      char text[kLedgerBytes + 1];
      std::snprintf(text, sizeof text, "bytes %020lld count %020lld\n", static_cast<long long>(c.bytes),
                    static_cast<long long>(c.count));
      ssize_t w;
      do w = ::pwrite(fd, text, kLedgerBytes, 0);
      while (w < 0 && errno == EINTR);
      if (w != kLedgerBytes) err = w < 0 ? errno : ENOSPC;
      if (fresh && err == 0 && st.st_size > kLedgerBytes && ::ftruncate(fd, kLedgerBytes) != 0) err = errno;
    }
  }
  if (fd >= 0) ::close(fd);  // releases the lock
  if (err != 0) why = errno_text(err);
  return why.empty() ? why : "cannot write " + py_repr(path) + " (" + why + ")";
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
