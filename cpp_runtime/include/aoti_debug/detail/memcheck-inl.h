// memcheck.h's out-of-line part: the bodies of its core functions and the
// helpers only they use.  memcheck.h includes it at its end wherever the bodies
// are compiled (config.h: AOTI_DEBUG_CORE_BODIES): header-only code and the
// core object (src/core.cpp).
#pragma once

#include "memcheck.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// One guarded allocation: [front guard | the bytes | back guard].
struct GuardBlock {
  GuardBlock* prev = nullptr;
  GuardBlock* next = nullptr;
  c10::DataPtr inner;
  uint8_t* base = nullptr;
  size_t nbytes = 0;
  bool live = false;  // in the checked list (false once retired or freed)
  bool reported[2] = {false, false};
  int64_t run = 0, launch = 0;
  char kernel[128] = {0};
};

// The poison as bytes, from every phase of the word: a guard starting at
// offset `from` of its block reads like bytes + from % 4.
struct Pattern {
  uint8_t bytes[kGuardBytes + 4];
  Pattern() {
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = poison_byte(i);
  }
};

class GuardAllocator final : public c10::Allocator, public GuardApi {
 public:
  explicit GuardAllocator(c10::Allocator* inner) : inner_(inner), inner_raw_(inner->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    if (n == 0 || __atomic_load_n(&active_, __ATOMIC_ACQUIRE) == 0) return inner_->allocate(n);
    const size_t total = kGuardBytes + n + kGuardBytes;
    c10::DataPtr raw = inner_->allocate(total);
    uint8_t* base = static_cast<uint8_t*>(raw.get());
    if (base == nullptr) return raw;
    fill(base, total);
    std::unique_ptr<GuardBlock> owned(new GuardBlock());  // freed with the bytes if the table cannot grow
    GuardBlock* b = owned.get();
    b->inner = std::move(raw);
    b->base = base;
    b->nbytes = n;
    {
      std::lock_guard<std::mutex> g(mu_);
      b->run = mark_run_, b->launch = mark_launch_;
      std::memcpy(b->kernel, mark_kernel_, sizeof b->kernel);
      blocks_.emplace(base + kGuardBytes, b);
      owned.release();
      link(b);
    }
    return c10::DataPtr(base + kGuardBytes, base + kGuardBytes, &GuardAllocator::free_data,
                        c10::Device(c10::DeviceType::CPU));
  }

  // raw_allocate's pointers, guarded or passed through, come back here.
  c10::DeleterFnPtr raw_deleter() const override { return &GuardAllocator::free_data; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  int32_t version() const override { return kGuardApiVersion; }

  void enter() override {
    std::lock_guard<std::mutex> g(mu_);
    ++active_;
    if (active_ > concurrent_) concurrent_ = active_;
  }

  void leave() override {
    std::lock_guard<std::mutex> g(mu_);
    if (active_ > 0 && --active_ == 0) {
      // No run is active: what is still alive belongs to the caller now, unchecked.
      for (GuardBlock* b = head_; b != nullptr;) {
        GuardBlock* next = b->next;
        b->live = false, b->prev = b->next = nullptr;
        b = next;
      }
      head_ = nullptr;
      mark_run_ = mark_launch_ = 0;
      mark_kernel_[0] = '\0';
    }
  }

  void mark(int64_t run, int64_t launch, const char* kernel) override {
    std::lock_guard<std::mutex> g(mu_);
    mark_run_ = run, mark_launch_ = launch;
    std::strncpy(mark_kernel_, kernel ? kernel : "", sizeof mark_kernel_ - 1);
    mark_kernel_[sizeof mark_kernel_ - 1] = '\0';
  }

  size_t take(GuardDamage* out, size_t cap) override {
    std::lock_guard<std::mutex> g(mu_);
    for (GuardBlock* b = head_; b != nullptr; b = b->next) inspect(b, false);
    size_t n = 0;
    for (; n < pending_.size() && n < cap; ++n) out[n] = pending_[n];
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    concurrent_ = active_;
    return n;
  }

  int32_t concurrent() const override { return concurrent_; }

 private:
  static void fill(uint8_t* base, size_t total) {
    size_t i = 0;
    for (; i + 4 <= total; i += 4) std::memcpy(base + i, &kPoisonWord, 4);
    for (; i < total; ++i) base[i] = poison_byte(i);
  }

  // First and last damaged byte of [from, to) of a block, relative to its base.
  static bool damaged(const GuardBlock* b, size_t from, size_t to, size_t* first, size_t* last) {
    static const Pattern intact;
    if (std::memcmp(b->base + from, intact.bytes + from % 4, to - from) == 0) return false;  // the usual case
    bool any = false;
    for (size_t i = from; i < to; ++i) {
      if (b->base[i] != poison_byte(i)) {
        if (!any) *first = i;
        *last = i;
        any = true;
      }
    }
    return any;
  }

  // Queues the damage of a block's guards not queued before (mu_ held).
  void inspect(GuardBlock* b, bool freed) {
    for (int side = 0; side < 2; ++side) {
      if (b->reported[side]) continue;
      const size_t from = side == 0 ? 0 : kGuardBytes + b->nbytes;
      size_t first = 0, last = 0;
      if (!damaged(b, from, from + kGuardBytes, &first, &last)) continue;
      b->reported[side] = true;
      GuardDamage d{};
      d.data = reinterpret_cast<uint64_t>(b->base + kGuardBytes);
      d.nbytes = b->nbytes;
      d.after = side;
      d.freed = freed ? 1 : 0;
      // before the start: counted back from the first byte, nearest damage first
      d.offset = side == 1 ? first - from : kGuardBytes - 1 - last;
      d.bytes = last - first + 1;
      d.run = b->run, d.launch = b->launch;
      std::memcpy(d.kernel, b->kernel, sizeof d.kernel);
      pending_.push_back(d);
    }
  }

  void link(GuardBlock* b) {
    b->live = true;
    b->prev = nullptr;
    b->next = head_;
    if (head_ != nullptr) head_->prev = b;
    head_ = b;
  }

  void unlink(GuardBlock* b) {
    if (b->prev != nullptr) b->prev->next = b->next;
    else head_ = b->next;
    if (b->next != nullptr) b->next->prev = b->prev;
    b->live = false, b->prev = b->next = nullptr;
  }

  // The deleter of every guarded block, and raw_deleter(): a pointer not in
  // the table came from the inner allocator while no run was active.
  static void free_data(void* data) {
    GuardAllocator* self = instance();
    if (self == nullptr) return;  // unreachable: only an installed allocator hands this out
    GuardBlock* b = nullptr;
    {
      std::lock_guard<std::mutex> g(self->mu_);
      auto it = self->blocks_.find(data);
      if (it != self->blocks_.end()) {
        b = it->second;
        self->blocks_.erase(it);
        if (b->live) {
          self->inspect(b, true);
          self->unlink(b);
        }
      }
    }
    if (b != nullptr) delete b;  // frees the allocation through the inner allocator's deleter
    else if (self->inner_raw_ != nullptr) self->inner_raw_(data);
  }

 public:
  static GuardAllocator*& instance() {
    static GuardAllocator* g = nullptr;
    return g;
  }

 private:
  c10::Allocator* inner_;
  c10::DeleterFnPtr inner_raw_;
  std::mutex mu_;
  std::unordered_map<const void*, GuardBlock*> blocks_;  // every guarded block not yet freed, by data pointer
  int32_t active_ = 0;
  int32_t concurrent_ = 0;
  GuardBlock* head_ = nullptr;
  std::vector<GuardDamage> pending_;
  int64_t mark_run_ = 0, mark_launch_ = 0;
  char mark_kernel_[128] = {0};
};

AOTI_DEBUG_CORE_FN GuardApi* guard_api(std::string* why) {
  Registry* r = registry();
  if (r == nullptr) {
    *why = "the process registry could not be created";
    return nullptr;
  }
  pthread_mutex_lock(&r->lock);
  GuardApi* api = static_cast<GuardApi*>(r->memcheck);
  if (api == nullptr && GuardAllocator::instance() != nullptr &&
      c10::GetCPUAllocator() == GuardAllocator::instance())
    r->memcheck = api = GuardAllocator::instance();  // a forked child: the parent's allocator is still in place
  if (api == nullptr) {
    c10::Allocator* current = c10::GetCPUAllocator();
    GuardAllocator* g = new GuardAllocator(current);
    c10::SetCPUAllocator(g, 0);
    if (c10::GetCPUAllocator() == g) {
      pin_this_object();
      GuardAllocator::instance() = g;
      r->memcheck = static_cast<GuardApi*>(g);
      api = g;
    } else {
      delete g;
      *why = "another CPU allocator of higher priority is installed (c10::SetCPUAllocator)";
    }
  }
  pthread_mutex_unlock(&r->lock);
  if (api != nullptr && api->version() != kGuardApiVersion) {
    *why = "another copy of aoti-debug installed a memory check of another version";
    return nullptr;
  }
  return api;
}

}  // namespace detail

AOTI_DEBUG_CORE_FN MemChecks::MemChecks(const Model& m, Run& run)
    : on(m.memcheck() != detail::kNanOff), model_(m), run_(run), raise_(m.memcheck() == detail::kNanRaise) {
  if (!on) return;
  std::string why;
  api_ = detail::guard_api(&why);
  if (api_ == nullptr) {
    on = false;
    model_.tell(run_.level, "memcheck", "the memory check is off: " + why, true);
    return;
  }
  api_->enter();
}

AOTI_DEBUG_CORE_FN MemChecks::~MemChecks() {
  if (api_ != nullptr) api_->leave();
}

AOTI_DEBUG_CORE_FN void MemChecks::report(const std::string& msg, const Site* site, Values args) {
  if (run_.level >= 1 || !raise_) model_.tell(run_.level, "memcheck", msg);  // level 0: the exception says it
#if AOTI_DEBUG_ENABLE_DUMPS
  detail::box_fired(model_, run_, "memcheck", site, args);
#else
  (void)site, (void)args;
#endif
  if (raise_) throw CallerError("aoti-debug memcheck: " + msg);
}


AOTI_DEBUG_CORE_FN void MemChecks::damage(const Site* site, Values args,
                                          const char* const* names) {
  std::vector<detail::GuardDamage> found;
  for (detail::GuardDamage some[16];;) {  // all of it: what is left would be blamed on the next launch
    const size_t n = api_->take(some, 16);
    found.insert(found.end(), some, some + n);
    if (n < 16) break;
  }
  for (const detail::GuardDamage& d : found) {
    const uintptr_t start = static_cast<uintptr_t>(d.data);
    // the buffer: an argument whose data lies in the block
    std::string what;
    int k = 0;
    for (const Value& v : args) {
      const uintptr_t p = reinterpret_cast<uintptr_t>(v.t.data);
      if (v.kind == Value::kTensor && v.t.device_type == 0 && p >= start && p < start + (d.nbytes ? d.nbytes : 1)) {
        const char* name = site ? site->args[k].name : names ? names[k] : "-";
        what = detail::tensor_words(name, site ? detail::role_name(site->args[k].role) : "model output", v.t);
        break;
      }
      ++k;
    }
    if (what.empty()) what = "a tensor of " + std::to_string(d.nbytes) + " bytes";
    if (site != nullptr && d.run == run_.run && d.launch == run_.launch)
      what += ", allocated by this launch";
    else if (d.launch > 0)
      what += std::string(", allocated during launch ") + detail::run_launch_id(d.run, d.launch) + " " + d.kernel;
    else
      what += ", allocated by the wrapper";
    if (d.freed) what += ", freed since";
    std::string msg = site ? detail::launch_words(run_, *site)
                           : "run " + std::to_string(run_.run) + " of model '" + model_.name() + "'";
    const std::string where = d.offset == 0 ? "right" : std::to_string(d.offset) + " byte" + (d.offset == 1 ? "" : "s");
    msg += std::string(" wrote ") + (d.after ? "past the end of " : "before the start of ") + what + ": " +
           std::to_string(d.bytes) + " byte" + (d.bytes == 1 ? "" : "s") + " damaged, " +
           (d.after ? "starting " + where + " after its end" : "ending " + where + " before its start");
    if (api_->concurrent() > 1)
      msg += " (other runs were active in this process: the write may come from one of their launches)";
    report(msg, site, args);
  }
}

AOTI_DEBUG_CORE_FN void MemChecks::after(const Site& site, Values args) {
  damage(&site, args, nullptr);
  // Outputs holding poison that no input held.  Outputs first: a clean
  // launch reads each output once (a NaN scan) and never its inputs (weights).
  auto any_poisoned = [&](bool inputs) {
    int k = 0;
    for (const Value& v : args) {
      if (k >= site.nargs) break;
      if ((site.args[k++].role == Role::In) != inputs || v.kind != Value::kTensor || v.t.device_type != 0 ||
          !detail::poison_dtype(v.t.dtype) || all_finite(v.t, false))
        continue;
      int64_t first = -1;
      if (detail::count_poison(v.t, &first) > 0) return true;
    }
    return false;
  };
  if (!any_poisoned(false) || any_poisoned(true)) return;  // none made here, or an input carried it in
  int k = 0;
  for (const Value& v : args) {
    if (k >= site.nargs) break;
    const ArgSpec& a = site.args[k++];
    if (a.role == Role::In || v.kind != Value::kTensor || v.t.device_type != 0) continue;
    int64_t first = -1;
    const int64_t count = detail::count_poison(v.t, &first);
    if (count == 0) continue;
    bool seen = false;
    for (const void* p : poisoned_) seen = seen || p == v.t.data;
    if (seen) continue;
    poisoned_.push_back(v.t.data);
    const int64_t numel = detail::numel_of(v.t);
    std::string msg = detail::launch_words(run_, site);
    const std::string buf = detail::tensor_words(a.name, detail::role_name(a.role), v.t);
    if (count == numel && a.role == Role::Out)
      msg += " never wrote its output " + buf + ": all " + std::to_string(numel) +
             " elements hold memcheck poison (memory nobody wrote)";
    else
      msg += " read memory nobody wrote (or out of bounds): " + std::to_string(count) + " of " +
             std::to_string(numel) + " elements of " + buf + " hold memcheck poison (first at flat index " +
             std::to_string(first) + ") and none of its inputs held any";
    report(msg, &site, args);
  }
}

AOTI_DEBUG_CORE_FN void MemChecks::finish(const char* const* names, Values outputs) {
  damage(nullptr, outputs, names);
}

AOTI_DEBUG_NAMESPACE_END
