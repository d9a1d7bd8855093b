// Rendering of records (docs/log-format.md section 1): header lines, argument
// items, inline values and the Tensor block with its statistics lines.
// Everything returns text; writing is sink.h's job.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "../config.h"
#include "dtypes.h"
#include "number.h"
#include "registry.h"
#if AOTI_DEBUG_ENABLE_STATS
#include "stats.h"
#endif

AOTI_DEBUG_NAMESPACE_BEGIN

struct Stats;
struct Value;

// Statistics of tensors that are not on the CPU, supplied by the framework
// adapter that built their Values (aoti.h, torch.h): for each of the `n`
// Values, out[i] with ok[i] true, or ok[i] false when it has none (the block
// then says "stats=skipped (device not supported)").  One call is one small
// transfer of every figure where the adapter can (aoti.h), so the runtime
// asks for all of a record's device tensors at once.
typedef void (*DeviceStatsFn)(const Value* const* vals, size_t n, Stats* out, bool* ok);

// Copies the `bytes` bytes of the smallest storage span covering a device
// tensor's view (from its data pointer on; dump.h storage_span) into `dst`
// on the host, for a level-10 dump; false when it cannot.  Supplied by the
// same adapters.
typedef bool (*DeviceReadFn)(const Value& v, void* dst, uint64_t bytes);

// What a run on a device needs from that device's own runtime.  The CUDA
// wrapper passes the driver's (detail/cuda_hooks.h); tests inject their own,
// so every branch that uses them also runs on a CPU.
struct DeviceHooks {
  // Waits for the work queued on `stream`: nullptr when it ran clean, else
  // the device's error in one line (valid until the next call on the thread).
  const char* (*synchronize)(void* stream);
  // Is `stream` being captured into a CUDA graph?  Nothing may wait or copy then.
  bool (*capturing)(void* stream);
};

namespace detail {
struct StatsMemo;  // in format-inl.h, with the core's bodies

// The device and stream of the run this thread is in (on_device sets them),
// asked before anything reads a device tensor.
struct DeviceContext {
  const DeviceHooks* hooks = nullptr;
  void* stream = nullptr;
};
inline DeviceContext& device_context() {
  static thread_local DeviceContext context;
  return context;
}
}  // namespace detail

// One argument value as the log shows it.  Cheap to build: borrows
// everything (strings, int lists and tensor metadata must outlive the call).
struct Value {
  enum Kind : int32_t { kNone, kBool, kInt, kDouble, kString, kIntList, kTensor };
  Kind kind = kNone;
  bool b = false;                 // kBool; kTensor: requires_grad
  int64_t i = 0;                  // kInt; kIntList: length
  double d = 0;
  const char* s = nullptr;
  const int64_t* list = nullptr;  // kIntList
  TensorView t{};
  const void* handle = nullptr;   // kTensor: the framework's tensor
  DeviceStatsFn device_stats = nullptr;
  DeviceReadFn device_read = nullptr;

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool v) : kind(kBool), b(v) {}
  Value(int v) : kind(kInt), i(v) {}
  Value(long v) : kind(kInt), i(v) {}
  Value(long long v) : kind(kInt), i(v) {}
  Value(unsigned v) : kind(kInt), i(v) {}
  Value(unsigned long v) : kind(kInt), i(static_cast<int64_t>(v)) {}
  Value(unsigned long long v) : kind(kInt), i(static_cast<int64_t>(v)) {}
  Value(double v) : kind(kDouble), d(v) {}
  Value(float v) : kind(kDouble), d(v) {}
  Value(const char* v) : kind(v ? kString : kNone), s(v) {}
  Value(const TensorView& v) : kind(kTensor), t(v) {}
  static Value int_list(const int64_t* p, int64_t n) {
    Value v;
    v.kind = kIntList, v.list = p, v.i = n;
    return v;
  }
};

// Values by pointer and count: a braced list from generated code, or an
// array built at run time (Values::of; the Python logger's black box).  No
// (pointer, count) constructor: `{ptr, n}` would pick the list one and make
// two Values of them (a bool and an int).
struct Values {
  const Value* p = nullptr;
  size_t n = 0;
  Values() = default;
  // The list's array lives until the end of the call it is passed to, and a
  // Values is never kept past that call.
  Values(std::initializer_list<Value> l) { p = l.begin(), n = l.size(); }
  static Values of(const Value* v, size_t count) {
    Values out;
    out.p = v, out.n = count;
    return out;
  }
  const Value* begin() const { return p; }
  const Value* end() const { return p + n; }
  size_t size() const { return n; }
};

namespace detail {

inline bool capturing_now() {
  const DeviceContext& c = device_context();
  return c.hooks != nullptr && c.hooks->capturing != nullptr && c.hooks->capturing(c.stream);
}

// A device tensor's statistics through its adapter, never while the run's
// stream is being captured into a CUDA graph (no copy, no wait there).
// Only CUDA tensors, as in the Python runtime: others (meta has no data) are
// "device not supported".
inline bool device_stats(const Value& v, Stats* out, const char** reason) {
  if (v.t.device_type != 1) {  // c10::DeviceType::CUDA
    *reason = "device not supported";
    return false;
  }
  if (capturing_now()) {
    *reason = "CUDA graph capture in progress";
    return false;
  }
  if (v.device_stats == nullptr) return false;
  const Value* one = &v;
  bool ok = false;
  v.device_stats(&one, 1, out, &ok);
  return ok;
}

// The record formatting (header_line, append_item, the Tensor block, the
// statistics memo) is in format-inl.h: the core functions' bodies use it
// (config.h).

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "format-inl.h"
#endif
