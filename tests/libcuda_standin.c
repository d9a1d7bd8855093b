/* A stand-in for the NVIDIA driver library (libcuda.so.1), built by the tests
   (tests/cuda_harness.py) so that an AOTI CUDA wrapper links on a machine
   without a GPU.  It defines the driver entry points such a wrapper calls;
   each reports that there is no device (CUDA_ERROR_NO_DEVICE).  It is only
   ever linked against, never used to run a model. */
#include <stddef.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };

CUresult cuInit(unsigned flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDriverGetVersion(int *version) { if (version) *version = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *count) { if (count) *count = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGet(int *device, int ordinal) { (void)device; (void)ordinal; return CUDA_ERROR_NO_DEVICE; }
CUresult cuGetErrorString(CUresult error, const char **text) {
  (void)error;
  if (text) *text = "no CUDA device (link-time stand-in for libcuda.so.1)";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult error, const char **text) {
  (void)error;
  if (text) *text = "CUDA_ERROR_NO_DEVICE";
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(void **ctx) { if (ctx) *ctx = NULL; return CUDA_ERROR_NO_DEVICE; }
CUresult cuCtxSynchronize(void) { return CUDA_ERROR_NO_DEVICE; }
CUresult cuStreamSynchronize(void *stream) { (void)stream; return CUDA_ERROR_NO_DEVICE; }
CUresult cuStreamIsCapturing(void *stream, int *status) {
  (void)stream; if (status) *status = 0; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuModuleLoad(void **module, const char *path) { (void)module; (void)path; return CUDA_ERROR_NO_DEVICE; }
CUresult cuModuleLoadData(void **module, const void *image) { (void)module; (void)image; return CUDA_ERROR_NO_DEVICE; }
CUresult cuModuleUnload(void *module) { (void)module; return CUDA_ERROR_NO_DEVICE; }
CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
  (void)fn; (void)module; (void)name; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuFuncSetAttribute(void *fn, int attribute, int value) {
  (void)fn; (void)attribute; (void)value; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuFuncGetAttribute(int *value, int attribute, void *fn) {
  (void)value; (void)attribute; (void)fn; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
  (void)fn; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
  (void)shared; (void)stream; (void)params; (void)extra;
  return CUDA_ERROR_NO_DEVICE;
}
CUresult cuLaunchKernelEx(const void *config, void *fn, void **params, void **extra) {
  (void)config; (void)fn; (void)params; (void)extra; return CUDA_ERROR_NO_DEVICE;
}
