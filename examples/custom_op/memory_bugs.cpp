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
// One has a wrong fake (the plan check's tests): its kernel is right, its
// Meta kernel, which the graph plans its output from, is not:
//   membugs::pad4(x)         the rows of a 2-D float32 x padded with zeros to a
//                            multiple of 4 (a MoE dispatcher's padding); its
//                            Meta kernel always adds 1 to 4 rows, so it claims
//                            4 rows more than the kernel returns when x's rows
//                            are already a multiple of 4.
// A sixth stands for a launch that never returns (the black box's tests):
//   membugs::hang(x)         y = 2 * x, but with x[0] < 0 and MEMBUGS_HANG_FILE
//                            set it creates that file and waits forever.
// A seventh stands for a race, which no memory check sees (triage's repeated runs):
//   membugs::racy(x)         y = 2 * x, but its last element is off by what a lost
//                            update between threads would leave, stood in for by
//                            the process id: different in every run, as a race's
//                            outcome is, and the same within one.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
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

at::Tensor racy(const at::Tensor& x) {
  at::Tensor y = start(x);
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = 2.0f * src[i];
  if (x.numel() > 0) dst[x.numel() - 1] += static_cast<float>(::getpid() % 100000) * 1e-3f;
  return y;
}

at::Tensor pad4(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "membugs: pad4 takes a 2-D float32 tensor");
  const int64_t rows = x.size(0);
  at::Tensor y = at::zeros({rows + (4 - rows % 4) % 4, x.size(1)}, x.options());
  y.narrow(0, 0, rows).copy_(x);
  return y;
}

at::Tensor pad4_meta(const at::Tensor& x) {
  const c10::SymInt rows = x.sym_size(0);
  return at::empty_symint({rows + 4 - rows % 4, x.sym_size(1)}, x.options());  // wrong: (4 - rows % 4) % 4
}

at::Tensor like_meta(const at::Tensor& x) { return at::empty_like(x); }

}  // namespace

TORCH_LIBRARY(membugs, m) {
  m.def("overrun(Tensor x) -> Tensor");
  m.def("unwritten(Tensor x) -> Tensor");
  m.def("read_before(Tensor x) -> Tensor");
  m.def("scratch(Tensor x) -> Tensor");
  m.def("hang(Tensor x) -> Tensor");
  m.def("pad4(Tensor x) -> Tensor");
  m.def("racy(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(membugs, CPU, m) {
  m.impl("overrun", overrun);
  m.impl("unwritten", unwritten);
  m.impl("read_before", read_before);
  m.impl("scratch", scratch);
  m.impl("hang", hang);
  m.impl("pad4", pad4);
  m.impl("racy", racy);
}
TORCH_LIBRARY_IMPL(membugs, Meta, m) {
  m.impl("overrun", like_meta);
  m.impl("unwritten", like_meta);
  m.impl("read_before", like_meta);
  m.impl("scratch", like_meta);
  m.impl("hang", like_meta);
  m.impl("pad4", pad4_meta);
  m.impl("racy", like_meta);
}
