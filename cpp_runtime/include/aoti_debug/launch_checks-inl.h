// launch_checks.h's out-of-line part (config.h: AOTI_DEBUG_CORE_BODIES).
#pragma once

#include "launch_checks.h"

AOTI_DEBUG_NAMESPACE_BEGIN

AOTI_DEBUG_CORE_FN void LaunchChecks::before(const Site& site, LaunchArgs args) {
#if AOTI_DEBUG_ENABLE_MEMCHECK
  if (mem_ != nullptr && mem_->on) mem_->before(site);
#endif
#if AOTI_DEBUG_ENABLE_DUMPS
  if (box_ != nullptr && box_->on) box_->before(site, args.side(site, 0));
#endif
  (void)site, (void)args;
}

AOTI_DEBUG_CORE_FN void LaunchChecks::after(const Site& site, LaunchArgs args, const char* const* sources,
                                            const PlannedOutput* planned, int n_planned) {
#if AOTI_DEBUG_ENABLE_DUMPS
  if (box_ != nullptr && box_->on) box_->after();
#endif
  if (plan_ != nullptr && plan_->on)
    for (int j = 0; j < n_planned; ++j)
      plan_->output(site, args.side(site, 2), planned[j].arg, planned[j].dtype, planned[j].ndim, planned[j].layout);
#if AOTI_DEBUG_ENABLE_MEMCHECK
  if (mem_ != nullptr && mem_->on) mem_->after(site, args.side(site, 2));
#endif
  // a launch reading scales has them checked first (ArgSpec::scale)
  if (nan_ != nullptr && nan_->on && sources != nullptr)
    for (int k = 0; k < site.nargs; ++k)
      if (site.args[k].scale != nullptr) {
        nan_->scales(site, args.side(site, 2));
        break;
      }
  // the clean path describes the outputs only
  if (nan_ != nullptr && nan_->on && sources != nullptr && !nan_->clean(site, args.side(site, 1)))
    nan_->after(site, sources, args.side(site, 2));
}

AOTI_DEBUG_NAMESPACE_END
