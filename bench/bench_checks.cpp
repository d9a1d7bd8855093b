// Per-launch cost of a clean NaN/Inf check (see bench_checks.py, which builds and runs this).
//
//   bench_checks N MODE
//   MODE 0: the launch without a check; 1: the check of a launch that reads
//   one 16-element float32 tensor and writes another, called as the
//   generated wrapper calls it (the AtenTensorHandle -> Value description,
//   a few calls into libtorch per output, is not part of this loop).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "aoti_debug/checks.h"

static aoti_debug::Model model(aoti_debug::ModelConfig{"bench", 0, "", "warn:naninf", false, "bench"});
static const aoti_debug::ArgSpec args[] = {{"in_ptr0", aoti_debug::Role::In},
                                           {"out_ptr0", aoti_debug::Role::Out}};
static aoti_debug::Site site{"cpp_fused_bench_0", "add", "bench.py:1", "", args, 2};
static const char* const sources[] = {"", "bench.py:1"};
volatile float kernel_sink;

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const int mode = argc > 2 ? std::atoi(argv[2]) : 0;
  static float in[16], out[16];
  static const int64_t sizes[] = {16}, strides[] = {1};
  const aoti_debug::TensorView vin{in, aoti_debug::detail::kFloat, 1, sizes, strides, 0, 0};
  const aoti_debug::TensorView vout{out, aoti_debug::detail::kFloat, 1, sizes, strides, 0, 0};
  aoti_debug::Run run = model.begin_run();
  aoti_debug::NanChecks nan(model, run);
  if (mode == 1 && !nan.on) return std::fprintf(stderr, "the check is off\n"), 2;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    ++run.launch;
    out[i & 15] = in[i & 15] + 1.0f;  // stands for the kernel
    // as the generated wrapper calls it: outputs only, everything when one is bad
    if (mode == 1 && AOTI_DEBUG_UNLIKELY(nan.on) && !nan.clean(site, {nullptr, aoti_debug::Value(vout)}))
      nan.after(site, sources, {aoti_debug::Value(vin), aoti_debug::Value(vout)});
  }
  const auto t1 = std::chrono::steady_clock::now();
  kernel_sink = out[3];
  std::printf("%.3f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  return 0;
}
