// What aoti-debug raises to the model's caller: a failed input guard, NaN
// check or memory check, a launch that failed on the device.  A type of its
// own so that, where torch's AOTI interface keeps no last error for its caller
// (before 2.13: the caller reads only "run_func_(...) API call failed"), the
// generated interface lets this one through to the caller with its message
// (codegen_patches/adapter.py, pass_caller_errors).
#pragma once

#include <stdexcept>

#include "../config.h"

AOTI_DEBUG_NAMESPACE_BEGIN

struct CallerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

AOTI_DEBUG_NAMESPACE_END
