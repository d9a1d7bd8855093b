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
// the same records.  Prints ns per launch of the fastest loop.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aoti_debug/launch.h"

static aoti_debug::Model model(aoti_debug::ModelConfig{"bench", 5, "", "off", false, "bench"});
static aoti_debug::Site site{"cpp_fused_bench_0", "add", "bench.py:1", "", nullptr, 0};

static const aoti_debug::ArgSpec tensor_args[] = {{"buf0", aoti_debug::Role::InOut},
                                                  {"arg0_1", aoti_debug::Role::In}};
static aoti_debug::Site tensor_site{"cpp_fused_add_0", "add", "m.py:12", "fc1", tensor_args, 2,
                                    "  source-line: m.py:12 nodes=add\n"};
static const char* const input_names[] = {"x"};
volatile long kernel_sink;

#ifdef AOTID_BENCH_SHARED  // built as a shared object, as AOTI artifacts are (bench_launch_loader.cpp runs it)
extern "C" __attribute__((visibility("default"))) int aotid_bench_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const bool instrumented = argc > 2 && std::atoi(argv[2]) != 0;
  const bool tensors = argc > 3 && std::strcmp(argv[3], "tensors") == 0;
  if (argc > 3 && !tensors && std::strcmp(argv[3], "empty") != 0) {
    std::fprintf(stderr, "bench_launch: SITE is \"empty\" or \"tensors\", not \"%s\"\n", argv[3]);
    return 2;
  }
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
    if (instrumented && tensors) {
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
