// The black box (docs/dumps.md, "The black box"): the last N launches of every
// model of the process, each with its input tensors, and the model inputs of
// their runs, kept in a ring file under the dump directory.
//
// The ring is a file-backed shared mapping, so whatever ends the process
// (SIGSEGV, abort, SIGKILL, an illegal memory access) leaves it on disk: no
// signal handler does any work for it.  One ring per process: its state lives
// in the registry, so every artifact (and the Python logger) appends to the
// same file under one lock.
//
// File layout (little-endian; docs/dumps.md has the table):
//   RingHeader (4096 bytes), then an index of RingSlot{seq, pos} for runs and
//   one for launches, then the data: the sites (each launch site's strings,
//   appended once, never overwritten), then the runs' and the launches' byte
//   rings.  An entry never wraps: when it does not fit before its region's
//   end, the writer starts again at the region's beginning.
//   entry: EntryHead (144 bytes), strings (u32 length + bytes each), the value
//   table (ItemHead + name + text + sizes + strides each, 8-aligned), then the
//   tensor bytes, each 64-aligned.
//
// An entry is whole when its head says so (magic, its own position and seq,
// state ready or done), it lies inside the region and the file, it was not
// overwritten (pos >= head - capacity) and its checksum matches.  The reader
// trusts nothing else: a ring on disk is data, possibly torn or truncated.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "../config.h"
#include "dump.h"
#include "dumpdir.h"
#include "../launch.h"
#include "registry.h"
#include "settings.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

constexpr char kRingMagic[8] = {'A', 'O', 'T', 'I', 'D', 'B', 'X', '1'};
constexpr uint32_t kRingVersion = 1;
constexpr uint64_t kRingHeaderBytes = 4096;
constexpr uint32_t kEntryMagic = 0x31584242;  // "BBX1"
constexpr uint32_t kMaxItemDims = 64;
enum : uint32_t { kBoxRun = 1, kBoxLaunch = 2, kBoxSite = 3 };     // EntryHead::kind, region kind - 1
enum : uint32_t { kBoxWriting = 1, kBoxReady = 2, kBoxDone = 3 };  // EntryHead::state

struct RingRegion {
  uint64_t index_off, nslots, data_off, cap;
  uint64_t head;   // logical end of the last entry
  uint64_t count;  // entries written here: the next one's slot is count % nslots
};

struct RingHeader {
  char magic[8];
  uint32_t version, header_bytes;
  uint64_t file_bytes;
  uint32_t launches;     // N
  int32_t pid;
  uint64_t start_ticks;  // the process's start time (/proc/<pid>/stat field 22): pid reuse
  int64_t created_us;
  uint64_t seq;          // entries written so far
  RingRegion region[3];  // kBoxRun - 1, kBoxLaunch - 1, kBoxSite - 1 (sites: appended, never overwritten)
};

struct RingSlot {
  uint64_t seq, pos;
};

struct EntryHead {
  uint32_t magic, kind, state, nitems;
  uint64_t seq, pos, length, sum;  // sum: entry_sum()
  int64_t run, launch, thread, time_us;
  int32_t rank, world;
  uint32_t nstrings, reserved;
  uint64_t strings_len, table_len, data_off, data_len;  // data_off: from the entry's start
  uint64_t site_pos, site_seq;  // a launch whose site strings are a site entry (site_seq 0: its own)
};
static_assert(sizeof(EntryHead) == 144, "EntryHead is 144 bytes");

struct ItemHead {
  int32_t kind, role, dtype, ndim;  // kind: Value::Kind; role: Role
  int64_t i;                        // kInt, kBool; kIntList: length
  double d;
  uint64_t off, bytes;              // in the entry's data area; bytes 0 and a text: not kept (why)
  uint32_t name_len, text_len;      // text: kString's value, or why a tensor was not kept
};
static_assert(sizeof(ItemHead) == 56, "ItemHead is 56 bytes");

// ---------------------------------------------------------------- writing

struct BoxRef {
  uint64_t seq = 0, pos = 0;
  int region = 0;
};

// What one item of an entry holds: a value of the launch (or run), by name and role.
struct BoxItem {
  const char* name;
  int32_t role;
  const Value* value;  // nullptr: a value of the other side, named only
  bool constant = false;  // the artifact's (a weight): described, never copied
};

// ItemHead::off of a constant: described (dtype, sizes, strides), its bytes not in the ring.
constexpr uint64_t kConstantOff = ~0ull;

inline BoxState* box_state() {
  Registry* r = registry();
  return r != nullptr ? &r->box : nullptr;
}

// Opens the ring on first use (every later call: one load).  False when the
// black box cannot be kept; the note saying why is written once.
AOTI_DEBUG_CORE_DECL bool box_open(const Settings& s, int64_t launches, int level, const std::string& dest, const char* tv);

// The launch of `ref` has returned (unless its entry was overwritten since).
inline void box_done(const BoxRef& ref) {
  BoxState* b = box_state();
  if (ref.seq == 0 || b == nullptr) return;
  pthread_mutex_lock(&b->lock);
  RingRegion& reg = reinterpret_cast<RingHeader*>(b->base)->region[ref.region];
  EntryHead* eh = reinterpret_cast<EntryHead*>(b->base + reg.data_off + ref.pos % reg.cap);
  if (ref.pos + reg.cap >= reg.head && eh->seq == ref.seq && eh->pos == ref.pos)
    __atomic_store_n(&eh->state, kBoxDone, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&b->lock);
}

// ---------------------------------------------------------------- reading

struct BoxValue {
  int32_t kind = 0, role = 0, dtype = 0;
  std::string name, text;
  int64_t i = 0;
  double d = 0;
  std::vector<int64_t> sizes, strides;
  const char* data = nullptr;
  uint64_t bytes = 0;
  bool constant = false;  // the artifact's: described, its bytes not in the ring

  bool kept() const { return kind != Value::kTensor || (text.empty() && !constant); }
  Value value() const {
    switch (kind) {
      case Value::kBool: return Value(i != 0);
      case Value::kInt: return Value(static_cast<long long>(i));
      case Value::kDouble: return Value(d);
      case Value::kString: return Value(text.c_str());
      case Value::kIntList: return Value::int_list(reinterpret_cast<const int64_t*>(data), i);
      case Value::kTensor:
        return Value(TensorView{data, dtype, static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), 0, 0});
      default: return Value();
    }
  }
};

struct BoxEntry {
  uint32_t kind = 0, state = 0;
  uint64_t seq = 0;
  int64_t run = 0, launch = 0, thread = 0, time_us = 0;
  int32_t rank = -1, world = -1;
  std::vector<std::string> strings;  // run: model, so; launch: model, kernel, nodes, source, lines, ops
  std::vector<BoxValue> items;
  std::string str(size_t k) const { return k < strings.size() ? strings[k] : std::string(); }
};

struct ParsedRing {
  int32_t pid = 0;
  uint64_t start_ticks = 0;
  uint32_t launches = 0;
  std::vector<BoxEntry> runs, launch_entries;  // whole entries, by seq
  std::vector<BoxEntry> writing;               // heads of entries being written when it stopped
  std::vector<std::string> notes;              // what was not whole, in words
};

// ---------------------------------------------------------------- dump folders

// The launch whose check fired: its outputs go after its inputs.
struct BoxFailing {
  std::string model;
  int64_t run = 0, launch = 0;
  const Site* site = nullptr;
  Values args;  // in Site::args order
};

// What a dump folder holds, in words (a note, or the CLI's output).
struct BoxSummary {
  std::string folder;
  int64_t launches = 0, runs = 0;
  std::vector<std::string> inflight;  // "launch R.K kernel of model 'm' (thread T)"
};

// A check of model `m` fired in `run` (at `site`, whose arguments are `args`;
// no site for an input guard): the ring goes to a dump folder and a note says
// where, once per run.
AOTI_DEBUG_CORE_DECL void box_fired(const Model& m, const Run& run, const char* what, const Site* site, Values args);

// A dump asked for with SIGUSR2 is written at the next launch, outside the
// signal handler.
AOTI_DEBUG_CORE_DECL void box_serve_request(const Settings& s, const std::string& dest, const char* tv, int level);

// A run's model inputs (`artifact`: the .so, "" for torch.compile's wrapper;
// `constant`: which inputs are weights, described and not copied).
AOTI_DEBUG_CORE_DECL void box_run(const Run& run, const std::string& model, const std::string& artifact, const char* const* names,
                    Values vals, const Settings& s, const uint8_t* constant = nullptr);

// A launch's record and its in/inout arguments (`args` in Site::args order;
// out-only ones are named, their values not read).  `constant`: arguments
// that are weights beyond the site's own constants (torch.compile's
// parameters, passed as inputs).
AOTI_DEBUG_CORE_DECL BoxRef box_launch(const Site& site, const Run& run, const std::string& model, Values args, const Settings& s,
                         const uint8_t* constant = nullptr);

}  // namespace detail

// One per run of an artifact compiled with AOTI_DEBUG_BLACKBOX.  `on` is the
// one branch a launch pays when the black box is off at run time.
class BlackBox {
 public:
  BlackBox(const Model& m, Run& run)
      : on(m.blackbox() > 0 && detail::box_open(m.settings(), m.blackbox(), m.level(), m.dest(), m.torch_version())),
        model_(m), run_(run) {}
  BlackBox(const BlackBox&) = delete;
  BlackBox& operator=(const BlackBox&) = delete;

  const bool on;

  // The run's model inputs.
  void inputs(const char* const* names, Values vals) {
    static const std::string so = detail::artifact_path();
    detail::box_run(run_, model_.name(), so, names, vals, model_.settings());
  }

  // Before a launch: its record and its in/inout arguments (`args` in
  // Site::args order, out-only ones nullptr).
  void before(const Site& site, Values args) {
    detail::box_serve_request(model_.settings(), model_.dest(), model_.torch_version(), run_.level);
    ref_ = detail::box_launch(site, run_, model_.name(), args, model_.settings());
  }

  // After the launch returned.
  void after() {
    detail::box_done(ref_);
    ref_ = detail::BoxRef();
  }

 private:
  const Model& model_;
  Run& run_;
  detail::BoxRef ref_;
};

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "blackbox-inl.h"
#endif
