// The checks around one launch, in one order, for the code the codegen
// generates (codegen_patches/cpp_emit.py calls these two and nothing else
// per launch).  The Python twin is runtime/launches.py's Run.checks_before
// and Run.checks_after; both keep this order:
//
//   before the launch: the memory check tags what the launch allocates, then
//     the black box keeps its record and inputs;
//   after it: the black box marks it returned, then the plan check (an extern
//     kernel's outputs against the graph's plan), the memory check, the NaN
//     check.  The memory check comes before the NaN check: a NaN read from
//     memory nobody wrote is reported as that, not as numerics.
#pragma once

#include <cstdint>

#include "checks.h"
#include "config.h"
#include "detail/sizeexpr.h"
#include "launch.h"

AOTI_DEBUG_NAMESPACE_BEGIN

class BlackBox;   // detail/blackbox.h, with AOTI_DEBUG_ENABLE_DUMPS
class MemChecks;  // detail/memcheck.h, with AOTI_DEBUG_ENABLE_MEMCHECK

// A launch's arguments as the checks ask for them, one side at a time
// (`which`: 0 its in and inout arguments, 1 its out and inout ones, 2 all),
// each described the first time a check asks (the wrapper's glue makes it:
// detail/wrapper_args.h, Args::sides).  Empty: a launch without arguments.
struct LaunchArgs {
  Values (*side_of)(void* args, void* describer, const Site& site, int which) = nullptr;
  void* args = nullptr;
  void* describer = nullptr;

  Values side(const Site& site, int which) const {
    return side_of != nullptr ? side_of(args, describer, site, which) : Values{};
  }
};

// An output of an extern kernel or custom op as the graph planned it: the
// launch's argument `arg`, its dtype code (-1: not compared), `ndim` sizes
// then `ndim` strides in `layout` (an undefined one is not compared).
struct PlannedOutput {
  int arg;
  int32_t dtype;
  int ndim;
  const detail::sizeexpr::Int* layout;
};

// One per run, made after the checks it holds (each one the wrapper was
// compiled with, else nullptr).  `on` is the one branch a launch pays while
// every check is off at run time.
class LaunchChecks {
 public:
  LaunchChecks(PlanChecks* plan, MemChecks* mem, BlackBox* box, NanChecks* nan);
  LaunchChecks(const LaunchChecks&) = delete;
  LaunchChecks& operator=(const LaunchChecks&) = delete;

  const bool on;

  // Before the launch (`args`: its inputs' side is asked for).
  AOTI_DEBUG_CORE_DECL void before(const Site& site, LaunchArgs args);

  // After the launch: `planned` holds the site's `n_planned` planned outputs;
  // `sources[k]` is where output k was made, as the codegen formatted it for
  // both runtimes (nullptr: the launch's outputs are not NaN-checked).
  AOTI_DEBUG_CORE_DECL void after(const Site& site, LaunchArgs args, const char* const* sources,
                                  const PlannedOutput* planned, int n_planned);

 private:
  PlanChecks* const plan_;
  MemChecks* const mem_;
  BlackBox* const box_;
  NanChecks* const nan_;
};

inline LaunchChecks::LaunchChecks(PlanChecks* plan, MemChecks* mem, BlackBox* box, NanChecks* nan)
    : on((plan != nullptr && plan->on) || (nan != nullptr && nan->on)
#if AOTI_DEBUG_ENABLE_MEMCHECK
         || (mem != nullptr && mem->on)
#endif
#if AOTI_DEBUG_ENABLE_DUMPS
         || (box != nullptr && box->on)
#endif
             ),
      plan_(plan), mem_(mem), box_(box), nan_(nan) {
}

AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "launch_checks-inl.h"
#endif
