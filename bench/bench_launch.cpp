// Per-launch cost of the C++ shim (see bench_launch.py, which builds and runs this).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "aoti_debug/launch.h"

static aoti_debug::Model model(aoti_debug::ModelConfig{"bench", 5, "", "off", false, "bench"});
static aoti_debug::Site site{"cpp_fused_bench_0", "add", "bench.py:1", "", nullptr, 0};
volatile long kernel_sink;

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const bool instrumented = argc > 2 && std::atoi(argv[2]) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (instrumented) {
    AOTI_DEBUG_BEGIN_RUN(run, model, nullptr);
    for (long i = 0; i < n; ++i) {
      AOTI_DEBUG_LAUNCH(run, site);
      kernel_sink = i;  // stands for the kernel
      AOTI_DEBUG_LAUNCH_END(run, site);
    }
  } else {
    for (long i = 0; i < n; ++i) kernel_sink = i;
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::printf("%.3f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  return 0;
}
