// A CUDA wrapper's device hooks (aoti_debug::DeviceHooks, detail/format.h),
// through the driver the wrapper already links: waiting for the run's stream
// (AOTI_DEBUG_SYNC) and asking whether it is being captured.  Inlined after
// the runtime into wrappers for a CUDA device (cpp_emit.device_glue), whose
// run passes `&aoti_debug_gen::cuda_hooks` to AOTI_DEBUG_BEGIN_RUN_ON, with its stream;
// nothing else includes it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "format.h"

// torch's shim.h declares it only where USE_CUDA is defined, as in a CUDA wrapper;
// repeated here (the same declaration) so that this header stands alone
extern "C" int32_t aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream);

namespace aoti_debug_gen {
inline const char* cuda_synchronize(void* stream) {
  const CUresult r = cuStreamSynchronize(static_cast<CUstream>(stream));
  if (r == CUDA_SUCCESS) return nullptr;
  thread_local std::string text;
  const char* what = nullptr;
  if (cuGetErrorString(r, &what) != CUDA_SUCCESS || what == nullptr) what = "unknown error";
  text = std::string("CUDA error: ") + what;
  return text.c_str();
}
inline bool cuda_capturing(void* stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuStreamIsCapturing(static_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}
static const aoti_debug::DeviceHooks cuda_hooks{&cuda_synchronize, &cuda_capturing};
// The stream torch.compile's C++ wrapper launches on (its entry has no `stream`
// parameter, as AOTI's run_impl does): the device's current one; null, the
// default stream, if torch cannot say.
inline void* cuda_current_stream(int32_t device_index) {
  void* stream = nullptr;
  if (aoti_torch_get_current_cuda_stream(device_index, &stream) != 0) return nullptr;  // AOTI_TORCH_SUCCESS
  return stream;
}
}  // namespace aoti_debug_gen
