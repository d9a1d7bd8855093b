// C entry points of the memory check for the Python side
// (aoti_debug/native/memcheck.py, via ctypes): torch.compile's wrappers use the
// same guarding allocator as artifacts (detail/memcheck.h), found or installed
// through the process registry.  Built against the running torch's c10.
// Every function is noexcept: a C++ exception must never cross into ctypes.
#include <cstring>
#include <string>

#include "aoti_debug/detail/memcheck.h"

#define AOTID_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
aoti_debug::detail::GuardApi* api = nullptr;
}

AOTID_EXPORT int64_t aotid_mc_damage_size() noexcept { return sizeof(aoti_debug::detail::GuardDamage); }

// 0 when the allocator is in place; else -1 and why into buf.
AOTID_EXPORT int32_t aotid_mc_install(char* buf, int64_t cap) noexcept {
  try {
    std::string why;
    if (api == nullptr) api = aoti_debug::detail::guard_api(&why);
    if (api != nullptr) return 0;
    if (cap > 0) {
      std::strncpy(buf, why.c_str(), static_cast<size_t>(cap - 1));
      buf[cap - 1] = '\0';
    }
  } catch (...) {
  }
  return -1;
}

AOTID_EXPORT void aotid_mc_enter() noexcept { if (api) api->enter(); }
AOTID_EXPORT void aotid_mc_leave() noexcept { if (api) api->leave(); }
AOTID_EXPORT void aotid_mc_mark(int64_t run, int64_t launch, const char* kernel) noexcept {
  if (api) api->mark(run, launch, kernel);
}
AOTID_EXPORT int64_t aotid_mc_take(aoti_debug::detail::GuardDamage* out, int64_t cap) noexcept {
  try {
    return api ? static_cast<int64_t>(api->take(out, static_cast<size_t>(cap))) : 0;
  } catch (...) {
    return 0;
  }
}
AOTID_EXPORT int32_t aotid_mc_concurrent() noexcept { return api ? api->concurrent() : 0; }
