// A hand-written C++ custom op that logs its calls with aoti-debug's public
// API: mylib::gather_rows(x, idx) = x[idx], rows of a 2-D float tensor.
//
// Like many real kernels it trusts its indices: an index out of range reads
// outside `x`, which is the planted crash the tutorial and the tests use.
// Its records (`call N mylib::gather_rows`, the arguments, `return N ...`)
// land in the same log as the model's launches, whether it runs eagerly or
// inside an AOTI package through the proxy executor.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <aoti_debug/torch.h>

namespace {

at::Tensor gather_rows(const at::Tensor& x, const at::Tensor& idx) {
  AOTI_DEBUG_SCOPE(scope, "mylib::gather_rows", aoti_debug::tensor(x), aoti_debug::tensor(idx));
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "gather_rows: x must be a 2-D float32 tensor");
  TORCH_CHECK(idx.dim() == 1 && idx.scalar_type() == at::kLong, "gather_rows: idx must be a 1-D int64 tensor");
  const at::Tensor xc = x.contiguous();
  const at::Tensor ic = idx.contiguous();
  at::Tensor out = at::empty({ic.size(0), xc.size(1)}, xc.options());
  const float* src = xc.data_ptr<float>();
  const int64_t* rows = ic.data_ptr<int64_t>();
  float* dst = out.data_ptr<float>();
  const int64_t cols = xc.size(1);
  for (int64_t r = 0; r < ic.size(0); ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[rows[r] * cols + c];  // no bounds check
  }
  AOTI_DEBUG_SCOPE_RETURN(scope, aoti_debug::tensor(out));
  return out;
}

// Shapes only, for torch.export and Inductor.
at::Tensor gather_rows_meta(const at::Tensor& x, const at::Tensor& idx) {
  return at::empty({idx.size(0), x.size(1)}, x.options());
}

}  // namespace

TORCH_LIBRARY(mylib, m) { m.def("gather_rows(Tensor x, Tensor idx) -> Tensor"); }
TORCH_LIBRARY_IMPL(mylib, CPU, m) { m.impl("gather_rows", gather_rows); }
TORCH_LIBRARY_IMPL(mylib, Meta, m) { m.impl("gather_rows", gather_rows_meta); }
