// PyEval_SaveThread counted: preloaded (LD_PRELOAD) into a test's process, it
// counts every release of the GIL that reaches libpython from another library
// (ctypes' calls, torch's bindings, the launch extension's hooks);
// gil_releases() gives the count.  Built by tests/test_launch_extension.py.
#include <dlfcn.h>

namespace {
long releases = 0;  // the caller holds the GIL
}

extern "C" void* PyEval_SaveThread() {
  static auto real = reinterpret_cast<void* (*)()>(dlsym(RTLD_NEXT, "PyEval_SaveThread"));
  ++releases;
  return real();
}

extern "C" long gil_releases() { return releases; }
