// How torch.compile's launch extension (src/pylaunch.cpp) hands a launch
// record to the Python side's compiled core (src/pycore.cpp,
// aotid_write_values): its values as the shim's own Value structs, which
// launch_record renders as they are, so nothing is encoded to words and
// decoded again (the ctypes path's aotid_write_record).
//
// The two are separate libraries built apart (the extension against the
// running torch, with its C++ flags; the core without), so a struct passed
// between them is an ABI: the extension asks the core for its
// py_record_abi() once and uses the core only when it equals its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.h"
#include "format.h"
#include "sink.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {

// Bump when PyRecord's fields or their meaning change (or Value's, which
// the sizes and offsets below may not show), or the signature of another
// entry point the extension calls (aotid_write_launch).
constexpr uint32_t kPyRecordVersion = 3;

// One `launch` (kind 0: then, with `mark`, the launch marked in flight) or
// `launch-end` record (kind 1: with `mark`, the mark cleared first), as
// aotid_write_record writes its kinds 0 and 1.
struct PyRecord {
  int32_t kind;
  int32_t level;
  int64_t run, launch;
  int32_t mark;
  int32_t n;                  // values
  const Value* values;        // the site's arguments, in its order
  void* site;                 // an aotid_blackbox_site handle
  const char* const* texts;   // {destination, model, torch version, run facts}: the core's
                              // aotid_record_texts, which keeps them as strings too
  const WaitHooks* hooks;     // the GIL, released only where the core would wait or read long
};

// The version with the layouts both sides compile: a mismatch in any reads
// as another ABI.
constexpr uint64_t py_record_abi() {
  return static_cast<uint64_t>(kPyRecordVersion) << 48 ^ static_cast<uint64_t>(sizeof(PyRecord)) << 36 ^
         static_cast<uint64_t>(sizeof(Value)) << 24 ^ static_cast<uint64_t>(offsetof(Value, t)) << 16 ^
         static_cast<uint64_t>(sizeof(TensorView)) << 8 ^ static_cast<uint64_t>(AOTI_DEBUG_REGISTRY_ABI);
}

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END
