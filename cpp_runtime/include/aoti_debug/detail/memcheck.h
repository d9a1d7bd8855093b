// The memory check (AOTI_DEBUG_MEMCHECK; docs/checks.md, "Memory check").
//
// While a run with the check on is active anywhere in the process, every CPU
// allocation (the wrapper's buffers, and what extern kernels and custom ops
// allocate inside a launch) goes through one guarding allocator: the bytes
// asked for sit between two guard regions of kGuardBytes, and guards and
// bytes are filled with poison (kPoisonWord: a NaN in every floating dtype).
// After every launch the guards of the live blocks are compared with the
// poison; a block freed in between is compared when it is freed.  Outputs
// holding poison that none of the launch's inputs held were read from memory
// nobody wrote.
//
// One allocator per process, whichever copy of the runtime installs it: it is
// published in the registry (Registry::memcheck) as a GuardApi, whose
// virtual functions run the installing copy's code; that shared object is
// then kept loaded (RTLD_NODELETE), since the blocks it handed out carry its
// deleter.  The bytes keep c10's 64-byte alignment.
//
// The guards must be invisible to ATen: a DataPtr it hands out has its data
// pointer as context, as torch's own CPU allocator's do (raw_allocate, used
// by oneDNN's convolutions, asserts it; copy-on-write clones need it), and
// raw_deleter() frees such a pointer.  The guard bookkeeping is found by the
// data pointer in a side table.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "../config.h"
#if AOTI_DEBUG_ENABLE_DUMPS
#include "blackbox.h"
#endif
#include "../launch.h"
#include "poison.h"
#include "stats.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

constexpr size_t kGuardBytes = 64;  // c10's CPU alignment: the bytes keep it
// A damaged guard, as plain data (it crosses copies of the runtime).
struct GuardDamage {
  uint64_t data;       // the block's first byte (what the tensor's data pointer was)
  uint64_t nbytes;     // bytes asked for
  int32_t after;       // 1: the guard after the bytes, 0: the one before
  int32_t freed;       // 1: found when the block was freed
  uint64_t offset;     // first damaged byte: after the end (after) / before the start (before)
  uint64_t bytes;      // from the first damaged byte to the last, in that guard
  int64_t run, launch;    // the launch marked when the block was allocated (launch 0: none)
  char kernel[128];
};

// The process's guarding allocator, as every copy of the runtime sees it.
class GuardApi {
 public:
  virtual int32_t version() const = 0;
  // A run with the check on begins / ends: while any is active, allocations are guarded.
  virtual void enter() = 0;
  virtual void leave() = 0;
  // The launch about to run (tags the blocks allocated from now on).
  virtual void mark(int64_t run, int64_t launch, const char* kernel) = 0;
  // Compares the guards of every live block; returns the damage not reported
  // before (blocks found damaged when freed included), at most `cap` into out.
  virtual size_t take(GuardDamage* out, size_t cap) = 0;
  // Runs active at once since the last take() (> 1: another thread's launch
  // may have done what take() found).
  virtual int32_t concurrent() const = 0;
};

constexpr int32_t kGuardApiVersion = 2;  // 2: data pointer == context

// The process's guarding allocator, installed on first use; null (and *why)
// when torch's CPU allocator cannot be replaced.
AOTI_DEBUG_CORE_DECL GuardApi* guard_api(std::string* why);

}  // namespace detail

// One per run with the check compiled in.  `on` is the single branch a launch
// pays when it is compiled in but switched off at run time.
class MemChecks {
 public:
  MemChecks(const Model& m, Run& run);
  ~MemChecks();
  MemChecks(const MemChecks&) = delete;
  MemChecks& operator=(const MemChecks&) = delete;

  bool on;

  void before(const Site& site) { api_->mark(run_.run, run_.launch, site.kernel); }

  // After a launch: damaged guards, then outputs holding poison their inputs
  // did not hold.  `args` holds every site argument, in Site::args order.
  void after(const Site& site, Values args);

  // End of the run: the guards once more (the outputs are still alive).
  void finish(const char* const* names, Values outputs);

 private:
  void damage(const Site* site, Values args, const char* const* names);
  void report(const std::string& msg, const Site* site, Values args);

  const Model& model_;
  Run& run_;
  bool raise_;
  detail::GuardApi* api_ = nullptr;
  std::vector<const void*> poisoned_;  // outputs already reported (later readers propagate)
};

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "memcheck-inl.h"
#endif
