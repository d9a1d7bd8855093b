// Four C++ custom ops with the memory bugs the memory check finds
// (docs/checks.md, "Memory check"; the tutorial's "an op that writes out of
// bounds").  Each computes y = 2 * x for a 1-D float32 x, and gets one thing
// wrong:
//   membugs::overrun(x)      writes one float past the end of y;
//   membugs::unwritten(x)    returns y without writing it;
//   membugs::read_before(x)  reads x[-1]: y[i] = 2 * x[i - 1];
//   membugs::scratch(x)      writes one float past the end of a scratch
//                            tensor it frees before returning (y is right).
// On CPU none of them faults: the stray bytes land in the allocator's slack.
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

at::Tensor like_meta(const at::Tensor& x) { return at::empty_like(x); }

}  // namespace

TORCH_LIBRARY(membugs, m) {
  m.def("overrun(Tensor x) -> Tensor");
  m.def("unwritten(Tensor x) -> Tensor");
  m.def("read_before(Tensor x) -> Tensor");
  m.def("scratch(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(membugs, CPU, m) {
  m.impl("overrun", overrun);
  m.impl("unwritten", unwritten);
  m.impl("read_before", read_before);
  m.impl("scratch", scratch);
}
TORCH_LIBRARY_IMPL(membugs, Meta, m) {
  m.impl("overrun", like_meta);
  m.impl("unwritten", like_meta);
  m.impl("read_before", like_meta);
  m.impl("scratch", like_meta);
}
