// C++ custom ops with the memory bugs the memory check finds
// (docs/checks.md, "Memory check"; the tutorial's "an op that writes out of
// bounds").  Each computes y = 2 * x for a 1-D float32 x, and gets one thing
// wrong:
//   membugs::overrun(x)      writes one float past the end of y;
//   membugs::unwritten(x)    returns y without writing it;
//   membugs::read_before(x)  reads x[-1]: y[i] = 2 * x[i - 1];
//   membugs::scratch(x)      writes one float past the end of a scratch
//                            tensor it frees before returning (y is right).
// On CPU none of them faults: the stray bytes land in the allocator's slack.
// A fifth stands for a launch that never returns (the black box's tests):
//   membugs::hang(x)         y = 2 * x, but with x[0] < 0 and MEMBUGS_HANG_FILE
//                            set it creates that file and waits forever.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace {

at::Tensor start(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 1 && x.scalar_type() == at::kFloat && x.is_contiguous(),
              "membugs: x must be a contiguous 1-D float32 tensor");
  return at::empty_like(x);
}

at::Tensor overrun(const at::Tensor& x) {
  at::Tensor y = start(x);
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i <= x.numel(); ++i) dst[i] = 2.0f * (i < x.numel() ? src[i] : 1.0f);  // one too many
  return y;
}

at::Tensor unwritten(const at::Tensor& x) { return start(x); }  // forgot the loop

at::Tensor read_before(const at::Tensor& x) {
  at::Tensor y = start(x);
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = 2.0f * src[i - 1];  // off by one
  return y;
}

at::Tensor scratch(const at::Tensor& x) {
  at::Tensor tmp = start(x);
  float* t = tmp.data_ptr<float>();
  for (int64_t i = 0; i <= x.numel(); ++i) t[i] = 2.0f;  // one too many
  at::Tensor y = start(x);
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = t[i] * src[i];
  return y;  // tmp is freed here
}

at::Tensor hang(const at::Tensor& x) {
  at::Tensor y = start(x);
  const float* src = x.data_ptr<float>();
  const char* flag = std::getenv("MEMBUGS_HANG_FILE");
  if (x.numel() > 0 && src[0] < 0 && flag != nullptr) {
    const int fd = ::open(flag, O_WRONLY | O_CREAT, 0644);  // "I am stuck", for whoever waits
    if (fd >= 0) ::close(fd);
    for (;;) ::pause();
  }
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = 2.0f * src[i];
  return y;
}

at::Tensor like_meta(const at::Tensor& x) { return at::empty_like(x); }

}  // namespace

TORCH_LIBRARY(membugs, m) {
  m.def("overrun(Tensor x) -> Tensor");
  m.def("unwritten(Tensor x) -> Tensor");
  m.def("read_before(Tensor x) -> Tensor");
  m.def("scratch(Tensor x) -> Tensor");
  m.def("hang(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(membugs, CPU, m) {
  m.impl("overrun", overrun);
  m.impl("unwritten", unwritten);
  m.impl("read_before", read_before);
  m.impl("scratch", scratch);
  m.impl("hang", hang);
}
TORCH_LIBRARY_IMPL(membugs, Meta, m) {
  m.impl("overrun", like_meta);
  m.impl("unwritten", like_meta);
  m.impl("read_before", like_meta);
  m.impl("scratch", like_meta);
  m.impl("hang", like_meta);
}
