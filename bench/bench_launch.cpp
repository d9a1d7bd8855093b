// Per-launch cost of the C++ shim (see bench_launch.py, which builds and runs this).
//
//   bench_launch N INSTRUMENTED [SITE [LOOPS]]
//
// N launches, instrumented (1) or the plain loop (0), LOOPS times (default 1,
// each instrumented loop one run, after one loop not timed, as
// bench_launch.py's PY_LOOP does); SITE "empty" (the
// default: a site without arguments, what the level 0 and 1 rows time) or
// "tensors": the launch of bench_launch.py's PY_LOOP, the same kernel, nodes,
// source, lines and arguments (buf0 inout, arg0_1 in: two contiguous float32
// CPU tensors of 16 elements), so that at level 3 and 5 both runtimes write
// the same records, its tensors handed in as ready-made TensorViews; or
// "wrapper": the same launch as an AOTI wrapper runs it, its tensors made by
// the shim (AtenTensorHandles) and described through the statements
// codegen_patches/cpp_emit.py generates around a launch (an argument cache,
// the describers, the two records), which bench_launch.py writes to the file
// AOTID_BENCH_WRAPPER_SITE names (built only then, with torch's headers).
// Prints ns per launch of the fastest loop.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aoti_debug/launch.h"
#ifdef AOTID_BENCH_WRAPPER_SITE
#include "aoti_debug/detail/wrapper_args.h"
#endif

static aoti_debug::Model model(aoti_debug::ModelConfig{"bench", 5, "", "off", false, "bench"});
static aoti_debug::Site site{"cpp_fused_bench_0", "add", "bench.py:1", "", nullptr, 0};

static const aoti_debug::ArgSpec tensor_args[] = {{"buf0", aoti_debug::Role::InOut},
                                                  {"arg0_1", aoti_debug::Role::In}};
static aoti_debug::Site tensor_site{"cpp_fused_add_0", "add", "m.py:12", "fc1", tensor_args, 2,
                                    "  source-line: m.py:12 nodes=add\n"};
static const char* const input_names[] = {"x"};
#ifdef AOTID_BENCH_WRAPPER_SITE
// the wrapper's name for the site, which the generated statements use
static aoti_debug::Site& aotid_site_0 = tensor_site;

// torch.empty_strided((16,), (1,)) through the shim, filled with `fill`
static AtenTensorHandle shim_tensor(float fill) {
  static const int64_t sizes[] = {16}, strides[] = {1};
  AtenTensorHandle h = nullptr;
  void* data = nullptr;
  if (aoti_torch_empty_strided(1, sizes, strides, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &h) !=
          AOTI_TORCH_SUCCESS ||
      aoti_torch_get_data_ptr(h, &data) != AOTI_TORCH_SUCCESS) {
    std::fprintf(stderr, "bench_launch: the shim made no tensor\n");
    std::exit(2);
  }
  for (int k = 0; k < 16; ++k) static_cast<float*>(data)[k] = fill;
  return h;
}
#endif
volatile long kernel_sink;

#ifdef AOTID_BENCH_SHARED  // built as a shared object, as AOTI artifacts are (bench_launch_loader.cpp runs it)
extern "C" __attribute__((visibility("default"))) int aotid_bench_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const bool instrumented = argc > 2 && std::atoi(argv[2]) != 0;
  const bool tensors = argc > 3 && std::strcmp(argv[3], "tensors") == 0;
  const bool wrapper = argc > 3 && std::strcmp(argv[3], "wrapper") == 0;
  if (argc > 3 && !tensors && !wrapper && std::strcmp(argv[3], "empty") != 0) {
    std::fprintf(stderr, "bench_launch: SITE is \"empty\", \"tensors\" or \"wrapper\", not \"%s\"\n", argv[3]);
    return 2;
  }
#ifndef AOTID_BENCH_WRAPPER_SITE
  if (wrapper) {
    std::fprintf(stderr, "bench_launch: built without AOTID_BENCH_WRAPPER_SITE: no \"wrapper\" site\n");
    return 2;
  }
#else
  AtenTensorHandle buf0_h = shim_tensor(0.0f), arg0_1_h = shim_tensor(1.0f);
#endif
  // torch.zeros(16) and torch.ones(16)
  static float buf0[16], arg0_1[16];
  for (float& x : arg0_1) x = 1.0f;
  static const int64_t sizes[] = {16}, strides[] = {1};
  const aoti_debug::TensorView buf0_view{buf0, 6 /* float32 */, 1, sizes, strides, 0 /* cpu */, -1};
  const aoti_debug::TensorView arg0_1_view{arg0_1, 6, 1, sizes, strides, 0, -1};

  const long loops = argc > 4 ? std::atol(argv[4]) : 1;
  double best = 0;
  for (long l = loops > 1 ? -1 : 0; l < loops; ++l) {  // with LOOPS > 1, one untimed loop first
    const auto t0 = std::chrono::steady_clock::now();
    if (instrumented && wrapper) {
#ifdef AOTID_BENCH_WRAPPER_SITE
      AOTI_DEBUG_BEGIN_RUN(aotid_run, model, input_names, aoti_debug::tensor(arg0_1_h));
      AtenTensorHandle buf0 = buf0_h, arg0_1 = arg0_1_h;  // the names the statements use
      for (long i = 0; i < n; ++i) {
#include AOTID_BENCH_WRAPPER_SITE
      }
#endif
    } else if (instrumented && tensors) {
      AOTI_DEBUG_BEGIN_RUN(run, model, input_names, arg0_1_view);
      for (long i = 0; i < n; ++i) {
        AOTI_DEBUG_LAUNCH(run, tensor_site, buf0_view, arg0_1_view);
        kernel_sink = i;  // stands for the kernel
        AOTI_DEBUG_LAUNCH_END(run, tensor_site, buf0_view, arg0_1_view);
      }
    } else if (instrumented) {
      AOTI_DEBUG_BEGIN_RUN(run, model, nullptr);
      for (long i = 0; i < n; ++i) {
        AOTI_DEBUG_LAUNCH(run, site);
        kernel_sink = i;  // stands for the kernel
        AOTI_DEBUG_LAUNCH_END(run, site);
      }
    } else {
      for (long i = 0; i < n; ++i) kernel_sink = i;
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (l >= 0 && (best == 0 || ns < best)) best = ns;
  }
  std::printf("%.3f\n", best / n);
  return 0;
}
