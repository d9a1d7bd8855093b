// Runs bench_launch.cpp built as a shared object (AOTID_BENCH_SHARED): loaded
// with dlopen, as torch loads an AOTI artifact (RTLD_NOW | RTLD_LOCAL), so
// its thread-locals are reached as an artifact's are (__tls_get_addr), not as
// an executable's.  BENCH_SO is the object's path, given when this is built.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  void* so = dlopen(BENCH_SO, RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) {
    std::fprintf(stderr, "bench_launch_loader: %s\n", dlerror());
    return 2;
  }
  auto run = reinterpret_cast<int (*)(int, char**)>(dlsym(so, "aotid_bench_main"));
  if (run == nullptr) {
    std::fprintf(stderr, "bench_launch_loader: %s\n", dlerror());
    return 2;
  }
  return run(argc, argv);
}
