// blackbox.h's out-of-line part: the bodies of its core functions and the
// helpers only they use.  blackbox.h includes it at its end wherever the bodies
// are compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the
// core object (src/core.cpp).
#pragma once

#include "blackbox.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

inline uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// The checksum of an entry: every byte of its strings and value table, and
// one 8-byte word in every 256 of its tensor data (enough to see a page that
// never reached the disk, at a small fraction of the copy's cost).  Each word
// is mixed with its position, so that moved or swapped words change the sum;
// the sum itself has no chain from word to word (the compiler vectorizes it).
constexpr uint64_t kSumStride = 256;
inline uint64_t entry_sum(const char* e, uint64_t data_off, uint64_t length) {
  uint64_t s = 0, w;
  for (uint64_t k = sizeof(EntryHead); k < data_off; k += 8) {
    std::memcpy(&w, e + k, 8);
    s += w ^ (k * 0x9E3779B97F4A7C15ull);
  }
  for (uint64_t k = data_off; k < length; k += kSumStride) {
    std::memcpy(&w, e + k, 8);
    s += w ^ (k * 0x9E3779B97F4A7C15ull);
  }
  return s;
}

// The start time of process `pid` in clock ticks since boot, 0 if unknown.
inline uint64_t proc_start_ticks(int64_t pid) {
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  if (p == nullptr) return 0;
  for (int field = 2; field < 22 && *p; ++p)
    if (*p == ' ') ++field;
  return std::strtoull(p, nullptr, 10);
}

// ---------------------------------------------------------------- writing

inline void box_on_signal(int) {
  Registry* r = registry_fast();
  if (r != nullptr) r->box.requested = 1;
}

// SIGUSR2 asks a running process for a dump (at its next launch).  Only where
// nobody handles the signal: its default action would end the process.
inline void box_install_signal(BoxState* b) {
  struct sigaction old;
  if (b->signal_installed || sigaction(SIGUSR2, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = box_on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  pin_this_object();  // the handler's code must outlive this artifact's unload
  if (sigaction(SIGUSR2, &sa, nullptr) == 0) b->signal_installed = 1;
}

// Creates the process's ring file: "" or why it could not (*taken: the note
// when its name was taken and the next free one used).  b->lock held.
inline std::string box_create(BoxState* b, const Settings& s, int64_t launches, std::string* taken) {
  Recorder rec(s, "blackbox", "", "");  // the dump directory and its ledger, as the level-10 recorder has them
  const std::string dir = rec.dump_dir();
  const uint64_t size = static_cast<uint64_t>(s.blackbox_max_mb) << 20;
  const uint64_t nslots = static_cast<uint64_t>(launches);
  const uint64_t index = round_up(2 * nslots * sizeof(RingSlot), 4096);
  if (size < kRingHeaderBytes + index + (64u << 10))
    return "AOTI_DEBUG_BLACKBOX_MAX_MB=" + std::to_string(s.blackbox_max_mb) + " is too small for " +
           std::to_string(launches) + " launches";
  const uint64_t data = size - kRingHeaderBytes - index;
  const uint64_t sites_cap = data / 16 / 64 * 64, runs_cap = data / 4 / 64 * 64;
  const uint64_t launches_cap = (data - runs_cap - sites_cap) / 64 * 64;
  int err = 0;
  if (!mkdirs(dir, &err)) return "cannot create dump folder " + py_repr(dir) + " (" + errno_text(err) + ")";
  std::string why = rec.reserve(static_cast<int64_t>(size));
  if (!why.empty()) return why + " (a ring of " + std::to_string(s.blackbox_max_mb) + " MB)";
  std::string used;
  const std::string name = std::to_string(getpid()) + "-blackbox.ring";
  const int fd = create_file(dir, name, true, &used, O_RDWR, 0600);
  if (fd < 0) return "cannot create " + py_repr(dir + "/" + used) + " (" + errno_text(-fd) + ")";
  const std::string path = dir + "/" + used;
  if (used != name) *taken = py_repr(dir + "/" + name) + " already exists; writing " + py_repr(path) + " instead";
  // allocated now: a full disk must fail here, not as SIGBUS on a later store (and a
  // file-size limit as EFBIG, not as a SIGXFSZ that kills the process)
  {
    HeldSignals held;
    err = posix_fallocate(fd, 0, static_cast<off_t>(size));
  }
  void* mem = err == 0 ? mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (err == 0 && mem == MAP_FAILED) err = errno;
  ::close(fd);
  if (err != 0) {
    ::unlink(path.c_str());
    return "cannot write " + py_repr(path) + " (" + errno_text(err) + ")";
  }
  RingHeader* h = static_cast<RingHeader*>(mem);
  std::memcpy(h->magic, kRingMagic, 8);
  h->version = kRingVersion;
  h->header_bytes = kRingHeaderBytes;
  h->file_bytes = size;
  h->launches = static_cast<uint32_t>(launches);
  h->pid = static_cast<int32_t>(getpid());
  h->start_ticks = proc_start_ticks(getpid());
  h->created_us = now_us();
  // sites first: a file cut short loses launches, not the strings every launch refers to
  const uint64_t data_at = kRingHeaderBytes + index;
  h->region[2] = {0, 0, data_at, sites_cap, 0, 0};
  h->region[0] = {kRingHeaderBytes, nslots, data_at + sites_cap, runs_cap, 0, 0};
  h->region[1] = {kRingHeaderBytes + nslots * sizeof(RingSlot), nslots, data_at + sites_cap + runs_cap,
                  launches_cap, 0, 0};
  b->base = static_cast<char*>(mem);
  b->size = size;
  b->launches = static_cast<int32_t>(launches);
  std::snprintf(b->path, sizeof b->path, "%s", path.c_str());
  return "";
}

AOTI_DEBUG_CORE_FN bool box_open(const Settings& s, int64_t launches, int level, const std::string& dest, const char* tv) {
  BoxState* b = box_state();
  if (b == nullptr) return false;
  int32_t status = __atomic_load_n(&b->status, __ATOMIC_ACQUIRE);
  if (AOTI_DEBUG_LIKELY(status != 0)) return status == 1;
  pthread_mutex_lock(&b->lock);
  std::string why, taken;
  if (b->status == 0) {
    why = box_create(b, s, launches, &taken);
    if (why.empty()) box_install_signal(b);
    __atomic_store_n(&b->status, why.empty() ? 1 : -1, __ATOMIC_RELEASE);
  }
  status = b->status;
  pthread_mutex_unlock(&b->lock);
  if (!taken.empty()) tell(level, dest, "blackbox", taken, tv, true);
  if (!why.empty())
    tell(level, dest, "blackbox", "cannot keep the black box: " + why + "; the model runs without it", tv, true);
  return status == 1;
}

// The bytes an item keeps and why not ("" = kept).
inline std::string box_span(const Value& v, uint64_t* bytes) {
  *bytes = 0;
  if (v.kind == Value::kIntList) {
    *bytes = static_cast<uint64_t>(v.i) * 8;
    return "";
  }
  if (v.kind != Value::kTensor) return "";
  if (v.t.ndim < 0 || v.t.ndim > kMaxItemDims) return "too many dimensions";
  return storage_span(v.t, bytes);
}

// Appends one entry (a run's inputs, or a launch's record and inputs) and
// returns where it is, for box_done().
inline BoxRef box_append(uint32_t kind, const Run& run, int64_t launch, const char* const* strings,
                         uint32_t nstrings, const BoxItem* items, uint32_t nitems, const Settings& s,
                         const BoxRef* site = nullptr) {
  BoxState* b = box_state();
  BoxRef ref;
  if (b == nullptr || __atomic_load_n(&b->status, __ATOMIC_ACQUIRE) != 1) return ref;
  RingHeader* h = reinterpret_cast<RingHeader*>(b->base);
  RingRegion& reg = h->region[kind - 1];
  // sizes first: an item that cannot fit in the region is kept as its description
  uint64_t bytes_here[64];
  std::vector<uint64_t> bytes_more;
  uint64_t* bytes = nitems <= 64 ? bytes_here : (bytes_more.resize(nitems), bytes_more.data());
  std::vector<std::string> why;  // why each item is not kept; empty while every item is
  uint64_t strings_len = 0, table_len = 0, data_len = 0;
  for (uint32_t k = 0; k < nstrings; ++k) strings_len += 4 + std::strlen(strings[k] ? strings[k] : "");
  for (uint32_t k = 0; k < nitems; ++k) {
    const Value* v = items[k].value;
    bytes[k] = 0;
    if (v != nullptr) {
      std::string w = box_span(*v, &bytes[k]);
      if (items[k].constant && w.empty() && v->kind == Value::kTensor) bytes[k] = 0;
      if (!w.empty()) {
        if (why.empty()) why.resize(nitems);
        why[k] = std::move(w);
      }
    }
    data_len += round_up(bytes[k], 64);
  }
  static const std::string kept;
  auto why_of = [&](uint32_t k) -> const std::string& { return why.empty() ? kept : why[k]; };
  auto item_len = [&](uint32_t k) {
    const Value* v = items[k].value;
    const uint64_t text = !why_of(k).empty() ? why_of(k).size()
                          : v != nullptr && v->kind == Value::kString ? std::strlen(v->s) : 0;
    const uint64_t dims = v != nullptr && v->kind == Value::kTensor && why_of(k).empty() ? v->t.ndim : 0;
    return round_up(sizeof(ItemHead) + std::strlen(items[k].name ? items[k].name : "") + text + 16 * dims, 8);
  };
  uint64_t data_off = 0, length = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    table_len = 0;
    for (uint32_t k = 0; k < nitems; ++k) table_len += item_len(k);
    data_off = round_up(sizeof(EntryHead) + round_up(strings_len, 8) + table_len, 64);
    length = data_off + data_len;
    if (length <= reg.cap) break;
    char text[96];
    std::snprintf(text, sizeof text, "larger than the black box keeps (%llu bytes for %s)",
                  static_cast<unsigned long long>(reg.cap), kind == kBoxRun ? "runs" : "launches");
    data_len = 0;
    if (why.empty()) why.resize(nitems);
    for (uint32_t k = 0; k < nitems; ++k) {
      if (bytes[k] > 0 && items[k].value->kind == Value::kTensor) bytes[k] = 0, why[k] = text;
      data_len += round_up(bytes[k], 64);
    }
  }
  if (length > reg.cap) return ref;  // not even the record fits: the ring is far too small (said at open)

  pthread_mutex_lock(&b->lock);
  RingSlot* slots = reinterpret_cast<RingSlot*>(b->base + reg.index_off);
  uint64_t phys = reg.head % reg.cap;
  if (kind == kBoxSite && reg.head + length > reg.cap) {
    pthread_mutex_unlock(&b->lock);  // sites are appended, never overwritten: full, launches carry their own
    return ref;
  }
  // Start again at the region's beginning once the space before the entries to
  // keep holds another window of them (their bytes, and two entries to spare):
  // the ring's working set stays near twice its last N entries (warm in the
  // cache, little for the kernel to write back) instead of the whole file.
  if (reg.nslots != 0 && reg.count + 1 >= reg.nslots) {
    const RingSlot keep = slots[(reg.count + 1) % reg.nslots];  // the oldest entry kept once this one is in
    const uint64_t kept_at = keep.pos % reg.cap;
    if (keep.seq != 0 && keep.pos + reg.cap >= reg.head && phys > kept_at &&
        kept_at >= (phys - kept_at) + 2 * length)
      reg.head += reg.cap - phys, phys = 0;
  }
  if (phys + length > reg.cap) reg.head += reg.cap - phys, phys = 0;
  const uint64_t pos = reg.head;
  __atomic_store_n(&reg.head, pos + length, __ATOMIC_RELEASE);  // older entries in the way are gone
  const uint64_t seq = ++h->seq;
  char* e = b->base + reg.data_off + phys;
  EntryHead* eh = reinterpret_cast<EntryHead*>(e);
  std::memset(e, 0, data_off);
  eh->magic = kEntryMagic, eh->kind = kind, eh->state = kBoxWriting, eh->nitems = nitems;
  eh->seq = seq, eh->pos = pos, eh->length = length;
  eh->run = run.run, eh->launch = launch, eh->thread = thread_id();
  eh->time_us = now_us();
  eh->rank = static_cast<int32_t>(s.rank), eh->world = static_cast<int32_t>(s.world);
  eh->nstrings = nstrings, eh->strings_len = strings_len, eh->table_len = table_len;
  eh->data_off = data_off, eh->data_len = data_len;
  if (site != nullptr) eh->site_pos = site->pos, eh->site_seq = site->seq;
  char* p = e + sizeof(EntryHead);
  for (uint32_t k = 0; k < nstrings; ++k) {
    const char* str = strings[k] ? strings[k] : "";
    const uint32_t n = static_cast<uint32_t>(std::strlen(str));
    std::memcpy(p, &n, 4);
    std::memcpy(p + 4, str, n);
    p += 4 + n;
  }
  p = e + sizeof(EntryHead) + round_up(strings_len, 8);
  uint64_t off = 0;
  for (uint32_t k = 0; k < nitems; ++k) {
    const Value* v = items[k].value;
    ItemHead it;
    std::memset(&it, 0, sizeof it);
    it.kind = v != nullptr ? v->kind : Value::kNone;
    it.role = items[k].role;
    const char* name = items[k].name ? items[k].name : "";
    const char* text = !why_of(k).empty() ? why_of(k).c_str() : v != nullptr && v->kind == Value::kString ? v->s : "";
    it.name_len = static_cast<uint32_t>(std::strlen(name));
    it.text_len = static_cast<uint32_t>(std::strlen(text));
    const bool tensor = v != nullptr && v->kind == Value::kTensor && why_of(k).empty();
    if (v != nullptr) {
      it.i = v->kind == Value::kBool ? v->b : v->i;
      it.d = v->d;
      if (v->kind == Value::kTensor) it.dtype = v->t.dtype, it.ndim = tensor ? static_cast<int32_t>(v->t.ndim) : 0;
    }
    it.off = off, it.bytes = bytes[k];
    if (tensor && items[k].constant) it.off = kConstantOff;
    std::memcpy(p, &it, sizeof it);
    char* q = p + sizeof it;
    std::memcpy(q, name, it.name_len), q += it.name_len;
    std::memcpy(q, text, it.text_len), q += it.text_len;
    if (tensor) {
      std::memcpy(q, v->t.sizes, 8 * v->t.ndim), q += 8 * v->t.ndim;
      std::memcpy(q, v->t.strides, 8 * v->t.ndim);
    }
    if (bytes[k] > 0) {
      const void* src = v->kind == Value::kIntList ? static_cast<const void*>(v->list) : v->t.data;
      std::memcpy(e + data_off + off, src, bytes[k]);
      const uint64_t pad = round_up(bytes[k], 64) - bytes[k];
      if (pad) std::memset(e + data_off + off + bytes[k], 0, pad);
    }
    off += round_up(bytes[k], 64);
    p += item_len(k);
  }
  eh->sum = entry_sum(e, data_off, length);
  if (reg.nslots != 0) slots[reg.count % reg.nslots] = RingSlot{seq, pos};
  ++reg.count;
  __atomic_store_n(&eh->state, kBoxReady, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&b->lock);
  ref.seq = seq, ref.pos = pos, ref.region = static_cast<int>(kind - 1);
  return ref;
}

// Where `site`'s strings are in this process's ring: written there the first
// time (a launch entry then refers to them); seq 0 when the sites' part is full.
inline BoxRef box_site(const Site& site, const Run& run, const Settings& s) {
  BoxState* b = box_state();
  const RingHeader* h = reinterpret_cast<const RingHeader*>(b->base);
  const uint64_t ring = reinterpret_cast<uintptr_t>(b->base) ^ static_cast<uint64_t>(h->created_us);
  BoxRef ref;
  pthread_mutex_lock(&b->site_lock);
  if (site.box_ring == ring) {
    ref.seq = site.box_seq, ref.pos = site.box_pos, ref.region = kBoxSite - 1;
  } else {
    const char* strings[5] = {site.kernel, site.nodes, site.source, site.lines, site.ops};
    ref = box_append(kBoxSite, run, 0, strings, 5, nullptr, 0, s);
    if (ref.seq != 0) site.box_ring = ring, site.box_seq = ref.seq, site.box_pos = ref.pos;
  }
  pthread_mutex_unlock(&b->site_lock);
  return ref;
}

// ---------------------------------------------------------------- reading

inline bool box_read_items(const char* e, const EntryHead& h, BoxEntry* out) {
  const char* p = e + sizeof(EntryHead);
  const char* end = p + h.strings_len;
  for (uint32_t k = 0; k < h.nstrings; ++k) {
    uint32_t n;
    if (end - p < 4) return false;
    std::memcpy(&n, p, 4);
    if (static_cast<uint64_t>(end - p - 4) < n) return false;
    out->strings.emplace_back(p + 4, n);
    p += 4 + n;
  }
  if (p != end) return false;
  p = e + sizeof(EntryHead) + round_up(h.strings_len, 8);
  end = p + h.table_len;
  for (uint32_t k = 0; k < h.nitems; ++k) {
    ItemHead it;
    if (static_cast<uint64_t>(end - p) < sizeof it) return false;
    std::memcpy(&it, p, sizeof it);
    if (it.ndim < 0 || static_cast<uint32_t>(it.ndim) > kMaxItemDims) return false;
    const uint64_t len = sizeof it + static_cast<uint64_t>(it.name_len) + it.text_len + 16ull * it.ndim;
    if (static_cast<uint64_t>(end - p) < len) return false;
    BoxValue v;
    v.kind = it.kind, v.role = it.role, v.dtype = it.dtype, v.i = it.i, v.d = it.d;
    if (v.kind < Value::kNone || v.kind > Value::kTensor || v.role < 0 || v.role > 2) return false;
    const char* q = p + sizeof it;
    v.name.assign(q, it.name_len), q += it.name_len;
    v.text.assign(q, it.text_len), q += it.text_len;
    v.sizes.resize(it.ndim), v.strides.resize(it.ndim);
    if (it.ndim) {
      std::memcpy(v.sizes.data(), q, 8ull * it.ndim), q += 8ull * it.ndim;
      std::memcpy(v.strides.data(), q, 8ull * it.ndim);
    }
    v.constant = v.kind == Value::kTensor && it.off == kConstantOff && v.text.empty();
    if (v.constant) {
      if (it.bytes != 0) return false;
      v.bytes = 0;
      out->items.push_back(std::move(v));
      p += round_up(len, 8);
      if (p > end) return false;
      continue;
    }
    if (it.off > h.data_len || it.bytes > h.data_len - it.off) return false;
    v.data = e + h.data_off + it.off;
    v.bytes = it.bytes;
    if (v.kind == Value::kIntList && (v.i < 0 || static_cast<uint64_t>(v.i) * 8 != it.bytes)) return false;
    if (v.kind == Value::kTensor && v.text.empty()) {
      // the bytes are exactly the storage the sizes and strides span: the writer never reads past them
      uint64_t need;
      if (!storage_span(v.value().t, &need).empty() || need != it.bytes) return false;
    } else if (v.kind == Value::kTensor && it.bytes != 0) {
      return false;
    }
    out->items.push_back(std::move(v));
    p += round_up(len, 8);
    if (p > end) return false;
  }
  return true;
}

// Reads a ring image of `size` bytes; false with *err when it is not a ring at all.
inline bool box_parse(const char* base, uint64_t size, ParsedRing* out, std::string* err) {
  RingHeader h;
  if (size < sizeof h) {
    *err = "too short to be a black box ring (" + std::to_string(size) + " bytes)";
    return false;
  }
  std::memcpy(&h, base, sizeof h);
  if (std::memcmp(h.magic, kRingMagic, 8) != 0 || h.version != kRingVersion || h.header_bytes != kRingHeaderBytes) {
    *err = "not a black box ring of this version (its first bytes are not AOTIDBX1)";
    return false;
  }
  out->pid = h.pid, out->start_ticks = h.start_ticks, out->launches = h.launches;
  if (size < h.file_bytes)
    out->notes.push_back("the file is truncated: " + std::to_string(size) + " of its " +
                         std::to_string(h.file_bytes) + " bytes; entries past the end are lost");
  const uint64_t limit = std::min<uint64_t>(size, h.file_bytes);
  int64_t torn = 0, cut = 0;
  // the strings of launch sites, appended once each; a launch refers to one by position and seq
  const RingRegion& sg = h.region[2];
  uint64_t sites_end;
  if (sg.cap % 64 != 0 || sg.head > sg.cap || __builtin_add_overflow(sg.data_off, sg.cap, &sites_end) ||
      sites_end > h.file_bytes || sg.data_off < kRingHeaderBytes) {
    *err = "its header describes regions outside the file";
    return false;
  }
  std::map<uint64_t, std::vector<std::string>> sites;
  auto site_strings = [&](const EntryHead& l, BoxEntry* e) -> bool {
    auto known = sites.find(l.site_pos);
    if (known == sites.end()) {
      EntryHead sh;
      const uint64_t at = sg.data_off + l.site_pos;
      if (l.site_pos % 64 != 0 || l.site_pos >= sg.head || at + sizeof sh > limit) return false;
      std::memcpy(&sh, base + at, sizeof sh);
      BoxEntry se;
      if (sh.magic != kEntryMagic || sh.kind != kBoxSite || sh.pos != l.site_pos || sh.state != kBoxReady ||
          sh.length < sizeof sh || sh.length % 64 != 0 || sh.length > sg.head - sh.pos || at + sh.length > limit ||
          sh.nitems != 0 || sh.nstrings != 5 || sh.strings_len > sh.length || sh.table_len != 0 ||
          sh.data_len != 0 || sh.data_off != sh.length || round_up(sh.strings_len, 8) + sizeof sh > sh.data_off ||
          entry_sum(base + at, sh.data_off, sh.length) != sh.sum || !box_read_items(base + at, sh, &se))
        return false;
      known = sites.emplace(l.site_pos, std::move(se.strings)).first;
      known->second.insert(known->second.begin(), std::to_string(sh.seq));
    }
    if (known->second.front() != std::to_string(l.site_seq)) return false;
    e->strings.insert(e->strings.end(), known->second.begin() + 1, known->second.end());
    return true;
  };
  for (int r = 0; r < 2; ++r) {
    const RingRegion& g = h.region[r];
    uint64_t slots_end, data_end;
    if (g.cap == 0 || g.cap % 64 != 0 || g.nslots == 0 || g.nslots > (1ull << 32) ||
        __builtin_add_overflow(g.index_off, g.nslots * sizeof(RingSlot), &slots_end) ||
        __builtin_add_overflow(g.data_off, g.cap, &data_end) || slots_end > h.file_bytes ||
        data_end > h.file_bytes || g.index_off < kRingHeaderBytes || g.data_off < kRingHeaderBytes) {
      *err = "its header describes regions outside the file";
      return false;
    }
    for (uint64_t k = 0; k < g.nslots; ++k) {
      const uint64_t at = g.index_off + k * sizeof(RingSlot);
      if (at + sizeof(RingSlot) > limit) break;
      RingSlot slot;
      std::memcpy(&slot, base + at, sizeof slot);
      if (slot.seq == 0) continue;
      // overwritten since (the head moved a capacity past it) or never finished
      if (slot.pos > g.head || g.head - slot.pos > g.cap) continue;
      const uint64_t phys = slot.pos % g.cap, at_entry = g.data_off + phys;
      EntryHead eh;
      if (at_entry + sizeof eh > limit) {
        ++cut;
        continue;
      }
      std::memcpy(&eh, base + at_entry, sizeof eh);
      if (eh.magic != kEntryMagic || eh.seq != slot.seq || eh.pos != slot.pos || eh.kind != static_cast<uint32_t>(r + 1))
        continue;  // the slot is older than the entry now at its place
      if (eh.length < sizeof eh || eh.length % 64 != 0 || eh.length > g.cap - phys || eh.pos + eh.length > g.head) {
        ++torn;
        continue;
      }
      BoxEntry e;
      e.kind = eh.kind, e.state = eh.state, e.seq = eh.seq, e.run = eh.run, e.launch = eh.launch;
      e.thread = eh.thread, e.time_us = eh.time_us, e.rank = eh.rank, e.world = eh.world;
      if (eh.state == kBoxWriting) {
        out->writing.push_back(e);
        continue;
      }
      if (at_entry + eh.length > limit) {
        ++cut;
        continue;
      }
      if ((eh.state != kBoxReady && eh.state != kBoxDone) ||
          eh.data_off < sizeof eh || eh.data_off > eh.length || eh.data_len > eh.length - eh.data_off ||
          eh.strings_len > eh.length || eh.table_len > eh.length ||
          round_up(eh.strings_len, 8) + eh.table_len + sizeof eh > eh.data_off ||
          entry_sum(base + at_entry, eh.data_off, eh.length) != eh.sum ||
          !box_read_items(base + at_entry, eh, &e) ||
          (eh.site_seq != 0 && (eh.kind != kBoxLaunch || eh.nstrings != 1 || !site_strings(eh, &e)))) {
        ++torn;
        continue;
      }
      (r == 0 ? out->runs : out->launch_entries).push_back(std::move(e));
    }
  }
  if (cut)
    out->notes.push_back(std::to_string(cut) + " entr" + (cut == 1 ? "y lies" : "ies lie") +
                         " past the end of the file and " + (cut == 1 ? "is" : "are") + " left out");
  if (torn)
    out->notes.push_back(std::to_string(torn) + " entr" + (torn == 1 ? "y is" : "ies are") +
                         " torn (not as written: a bad checksum or layout) and left out");
  auto by_seq = [](const BoxEntry& a, const BoxEntry& b) { return a.seq < b.seq; };
  std::sort(out->runs.begin(), out->runs.end(), by_seq);
  std::sort(out->launch_entries.begin(), out->launch_entries.end(), by_seq);
  std::sort(out->writing.begin(), out->writing.end(), by_seq);
  if (out->launch_entries.size() > h.launches)
    out->launch_entries.erase(out->launch_entries.begin(),
                              out->launch_entries.end() - static_cast<std::ptrdiff_t>(h.launches));
  return true;
}

// ---------------------------------------------------------------- dump folders

// Writes `ring` as a dump folder <dir>/<stem> (the next free name): one run
// folder per model run, as the level-10 recorder writes them.  "" or why not.
inline std::string box_write(const ParsedRing& ring, const Settings& settings, const std::string& dest,
                             const char* tv, const std::string& stem, const BoxFailing* failing,
                             BoxSummary* summary) {
  Recorder rec(settings, "blackbox", dest, tv);
  const std::string dir = rec.dump_dir();
  int err = 0, n = 1;
  if (!mkdirs(dir, &err) || (err = make_folder(dir, stem, true, &n)) != 0)
    return "cannot create dump folder " + py_repr(dir + "/" + stem) + " (" + errno_text(err) + ")";
  const std::string folder = dir + "/" + nth_name(stem, "", n);
  summary->folder = folder;
  struct Group {
    std::string model;
    int64_t run;
    const BoxEntry* entry;
    std::vector<const BoxEntry*> launches;
  };
  std::vector<Group> groups;
  auto group = [&](const std::string& model, int64_t run) -> Group& {
    for (Group& g : groups)
      if (g.model == model && g.run == run) return g;
    groups.push_back(Group{model, run, nullptr, {}});
    return groups.back();
  };
  const uint64_t first = ring.launch_entries.empty() ? 0 : ring.launch_entries.front().seq;
  for (const BoxEntry& e : ring.runs)  // runs of the kept launches, and runs after the first of them
    if (e.seq >= first || std::any_of(ring.launch_entries.begin(), ring.launch_entries.end(), [&](const BoxEntry& l) {
          return l.run == e.run && l.str(0) == e.str(0);
        }))
      group(e.str(0), e.run).entry = &e;
  for (const BoxEntry& e : ring.launch_entries) group(e.str(0), e.run).launches.push_back(&e);
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    const uint64_t sa = a.entry ? a.entry->seq : a.launches.front()->seq;
    const uint64_t sb = b.entry ? b.entry->seq : b.launches.front()->seq;
    return sa < sb;
  });
  const std::string pid = std::to_string(ring.pid);
  for (const Group& g : groups) {
    const std::string stem_run = run_folder_stem(ring.pid, g.model, g.run);
    int m = 1;
    if ((err = make_folder(folder, stem_run, false, &m)) != 0)
      return "cannot create dump folder " + py_repr(folder + "/" + stem_run) + " (" + errno_text(err) + ")";
    const std::string sub = folder + "/" + stem_run;
    ++summary->runs;
    // the run line
    std::string files = "[", names = "[", errors;
    int64_t bytes = 0;
    const BoxEntry* r = g.entry;
    if (r != nullptr) {
      PtWriter w;
      w.pkl.op(']');
      w.pkl.op('(');
      for (const BoxValue& v : r->items) {
        if (names.size() > 1) names += ", ";
        json_str(names, v.name.c_str());
        if (!v.kept() || !w.value(v.value())) {
          w.pkl.op('N');
          errors += (errors.empty() ? "" : "; ") + v.name + ": " + (v.kept() ? w.error : v.text);
        }
      }
      w.pkl.op('e');
      std::string data;
      if (w.finish(&data) && rec.write_file(sub, "inputs.pt", data, false)) {
        files += "{\"name\": \"inputs\", \"role\": \"in\", \"file\": \"inputs.pt\", \"bytes\": " +
                 std::to_string(data.size()) + "}";
        bytes = static_cast<int64_t>(data.size());
      }
    } else {
      errors = "the run's inputs are no longer in the black box (it keeps the last " +
               std::to_string(ring.launches) + " launches)";
    }
    names += "]";
    std::string l = dump_line_start("run", errors.empty() ? "ok" : "incomplete", "run", g.run);
    l += ", \"model\": ";
    json_str(l, g.model.c_str());
    l += ", \"pid\": " + pid;
    if (r != nullptr) {
      l += ", \"thread\": " + std::to_string(r->thread);
      if (r->rank >= 0) l += ", \"rank\": " + std::to_string(r->rank);
      if (r->rank >= 0 && r->world > 0) l += ", \"world\": " + std::to_string(r->world);
      if (!r->str(1).empty()) {
        l += ", \"so\": ";
        json_str(l, r->str(1).c_str());
      }
    }
    l += ", \"inputs\": " + names;
    if (!errors.empty()) {
      l += ", \"error\": ";
      json_str(l, errors.c_str());
    }
    l += ", \"files\": " + files + "], \"bytes\": " + std::to_string(bytes);
    l += ", \"time\": " + json_time(r != nullptr ? r->time_us : g.launches.front()->time_us) + "}\n";
    rec.manifest(sub, l);
    // the launches: inputs before, and what is known after
    for (const BoxEntry* e : g.launches) {
      ++summary->launches;
      const bool fails = failing != nullptr && failing->model == g.model && failing->run == e->run &&
                         failing->launch == e->launch;
      char prefix[48];
      std::snprintf(prefix, sizeof prefix, "launch%06lld_in_", static_cast<long long>(e->launch));
      std::string in = "[", out = "[";
      int64_t in_bytes = 0, out_bytes = 0;
      for (size_t item = 0; item < e->items.size(); ++item) {
        const BoxValue& v = e->items[item];
        const bool in_side = v.role != static_cast<int32_t>(Role::Out);
        if (in_side) {
          // the failing launch's constants are read from its live arguments, right after it ran
          const Value* live = v.constant && fails && item < failing->args.size() ? failing->args.begin() + item : nullptr;
          if (v.kept() || live != nullptr) {
            rec.save(sub, std::string(prefix) + safe_name(v.name.c_str()) + ".pt", v.name.c_str(),
                     role_name(static_cast<Role>(v.role)), live != nullptr ? *live : v.value(), in, &in_bytes);
          } else {
            append_unwritten(in, v.name.c_str(), role_name(static_cast<Role>(v.role)),
                             v.constant ? "a constant of the artifact (a weight): the black box does not copy it "
                                          "(replay takes it from --package)"
                                        : v.text.c_str());
          }
        }
      }
      auto line = [&](const char* event, const char* status, const std::string& fl, int64_t b, bool ops) {
        rec.manifest(sub, launch_line(event, status, e->run, e->launch, e->str(1).c_str(), e->str(2).c_str(),
                                      e->str(3).c_str(), e->str(4).c_str(), ops ? e->str(5).c_str() : nullptr, fl,
                                      b, json_time(e->time_us)));
      };
      line("before", "running", in, in_bytes, true);
      if (fails) {
        int wanted = 0, written = 0;
        save_side(rec, sub, e->launch, *failing->site, failing->args, true, out, &out_bytes, &wanted, &written);
        line("after", written == wanted ? "ok" : "incomplete", out, out_bytes, false);
      } else if (e->state == kBoxDone) {
        for (const BoxValue& v : e->items) {
          if (v.role == static_cast<int32_t>(Role::In)) continue;
          append_unwritten(out, v.name.c_str(), role_name(static_cast<Role>(v.role)),
                           "the black box keeps a launch's inputs, not its outputs");
        }
        line("after", "incomplete", out, 0, false);
      } else {
        summary->inflight.push_back("launch " + run_launch_id(e->run, e->launch) + " " + e->str(1) + " of model " +
                                    py_repr(g.model) + " (thread " + std::to_string(e->thread) + ")");
      }
      if (rec.stopped()) return "the dump directory's limits stopped it (see the flight-recorder note)";
    }
  }
  for (const BoxEntry& e : ring.writing)
    summary->inflight.push_back(std::string(e.kind == kBoxRun ? "run " + std::to_string(e.run)
                                                              : "launch " + run_launch_id(e.run, e.launch)) +
                                " was being recorded (thread " + std::to_string(e.thread) +
                                "): its entry is incomplete and left out");
  return "";
}

inline std::string box_summary_text(const BoxSummary& s, const ParsedRing& ring) {
  std::string t = py_repr(s.folder) + ": the last " + std::to_string(s.launches) + " launch" +
                  (s.launches == 1 ? "" : "es") + " of " + std::to_string(s.runs) + " run" + (s.runs == 1 ? "" : "s");
  for (const std::string& f : s.inflight) t += "\nin flight: " + f;
  for (const std::string& n : ring.notes) t += "\nnote: " + n;
  return t;
}

// Dumps the live ring of this process beside its file: "" or why not.
// *text: what the folder holds, in words.
inline std::string box_dump(const Settings& s, const std::string& dest, const char* tv, const BoxFailing* failing,
                            std::string* text) {
  BoxState* b = box_state();
  if (b == nullptr || __atomic_load_n(&b->status, __ATOMIC_ACQUIRE) != 1) return "the black box is not on";
  pthread_mutex_lock(&b->lock);  // nothing is appended meanwhile
  ParsedRing ring;
  std::string why;
  if (!box_parse(b->base, b->size, &ring, &why)) why = "the ring cannot be read: " + why;
  BoxSummary summary;
  Settings here = s;
  here.dump_dir = b->path;
  here.dump_dir.resize(here.dump_dir.rfind('/') == std::string::npos ? 0 : here.dump_dir.rfind('/'));
  if (here.dump_dir.empty()) here.dump_dir = ".";
  if (why.empty()) why = box_write(ring, here, dest, tv, std::to_string(getpid()) + "-blackbox", failing, &summary);
  ++b->dumps;
  pthread_mutex_unlock(&b->lock);
  if (why.empty()) *text = box_summary_text(summary, ring);
  return why;
}

// A check fired in run R at launch K of `model` (at `site`, whose arguments
// are `args`; no site for an input guard): the ring goes to a dump folder and
// a note says where.
inline void box_fired_dump(const Settings& s, const std::string& dest, const char* tv, int level, const char* what,
                           const std::string& model, int64_t run, int64_t launch, const Site* site, Values args) {
  BoxFailing f{model, run, launch, site, args};
  std::string text;
  const std::string why = box_dump(s, dest, tv, site ? &f : nullptr, &text);
  tell(level, dest, "blackbox",
       why.empty() ? std::string(what) + ": the black box is in " + text : "cannot dump the black box: " + why, tv,
       false);
}

AOTI_DEBUG_CORE_FN void box_fired(const Model& m, const Run& run, const char* what, const Site* site, Values args) {
  BoxState* b = box_state();
  if (m.blackbox() <= 0 || run.box_dumped || b == nullptr || __atomic_load_n(&b->status, __ATOMIC_ACQUIRE) != 1)
    return;
  run.box_dumped = 1;
  box_fired_dump(m.settings(), m.dest(), m.torch_version(), run.level, what, m.name(), run.run, run.launch, site,
                 args);
}

AOTI_DEBUG_CORE_FN void box_serve_request(const Settings& s, const std::string& dest, const char* tv, int level) {
  BoxState* b = box_state();
  if (AOTI_DEBUG_LIKELY(!b->requested)) return;
  b->requested = 0;
  std::string text;
  const std::string why = box_dump(s, dest, tv, nullptr, &text);
  tell(level, dest, "blackbox", why.empty() ? "SIGUSR2: the black box is in " + text : "cannot dump the black box: " + why,
       tv, false);
}

AOTI_DEBUG_CORE_FN void box_run(const Run& run, const std::string& model, const std::string& artifact, const char* const* names,
                    Values vals, const Settings& s, const uint8_t* constant) {
  std::vector<BoxItem> items;
  int k = 0;
  for (const Value& v : vals) {
    items.push_back({names ? or_dash(names[k]) : "-", 0, &v, constant != nullptr && constant[k] != 0});
    ++k;
  }
  const char* strings[2] = {model.c_str(), artifact.c_str()};
  box_append(kBoxRun, run, 0, strings, 2, items.data(), static_cast<uint32_t>(items.size()), s);
}

AOTI_DEBUG_CORE_FN BoxRef box_launch(const Site& site, const Run& run, const std::string& model, Values args, const Settings& s,
                         const uint8_t* constant) {
  BoxItem items[64];
  std::vector<BoxItem> more;
  BoxItem* list = site.nargs <= 64 ? items : (more.resize(site.nargs), more.data());
  int32_t k = 0;
  for (const Value& v : args) {
    if (k >= site.nargs) break;
    const Role role = site.args[k].role;
    list[k] = {site.args[k].name, static_cast<int32_t>(role), role == Role::Out ? nullptr : &v,
               site.args[k].constant || (constant != nullptr && constant[k] != 0)};
    ++k;
  }
  // the site's strings (kernel, nodes, source lines, ops: kilobytes) go into the ring once
  const BoxRef where = box_site(site, run, s);
  const char* strings[6] = {model.c_str(), site.kernel, site.nodes, site.source, site.lines, site.ops};
  return box_append(kBoxLaunch, run, run.launch, strings, where.seq ? 1 : 6, list, static_cast<uint32_t>(k), s,
                    where.seq ? &where : nullptr);
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
