// The runtime's out-of-line functions as one object (config.h:
// AOTI_DEBUG_LINKED_CORE).  Built with the same AOTI_DEBUG_ENABLE_* options as
// the wrapper it is linked into, with visibility hidden like the header-only
// copies: each artifact still carries its own private runtime.
#define AOTI_DEBUG_CORE_IMPL 1

#include <aoti_debug/aoti.h>
#include <aoti_debug/checks.h>
#include <aoti_debug/launch_checks.h>
