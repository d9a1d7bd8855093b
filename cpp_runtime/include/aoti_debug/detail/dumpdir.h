// The dump directory is shared (docs/dumps.md, "A shared dump directory"):
// other processes write into it at the same time, and whoever else may write
// to it may have put names there first.  The Python recorder
// (aoti_debug/runtime/dumpdir.py) keeps the same rules, so both honour one ledger:
//
// - Folders and files are created, never opened: mkdir() failing on EEXIST,
//   open(O_CREAT | O_EXCL | O_NOFOLLOW), so a link planted at a name the
//   recorder will use is never followed.  A name in the dump directory itself
//   that is taken gives way to the next free one of <stem>.2<ext> ..
//   <stem>.100<ext> (the caller says so in a note); in a folder the recorder
//   created (mode 0700: nobody else can add to it or read it) a taken name is an error.
// - The limits hold for the directory, whatever writes into it: the ledger
//   file .aoti-debug-ledger holds the bytes and dumps written so far, read
//   and rewritten in place under flock().  It is created with the bytes
//   already in the directory (what earlier processes left) and zero dumps.
#pragma once

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "../config.h"
#include "registry.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

constexpr int kNameTries = 100;                       // <stem><ext>, <stem>.2<ext> .. <stem>.100<ext>
constexpr const char* kLedgerName = ".aoti-debug-ledger";
constexpr int kLedgerBytes = 54;                      // "bytes %020d count %020d\n"

struct LedgerCounts {
  int64_t bytes;  // in the directory (AOTI_DEBUG_DUMP_MAX_SIZE_GB), the ledger's own included
  int64_t count;  // launches and calls dumped (AOTI_DEBUG_DUMP_MAX_COUNT)
};

// Names, folders and files (nth_name, make_folder, create_file, mkdirs) and the
// ledger (with_ledger) are in dumpdir-inl.h, compiled with the core functions'
// bodies (config.h).

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "dumpdir-inl.h"
#endif
