// aoti-debug C++ runtime: compile-time options.
//
// Everything a build can tune lives here; every option can be overridden with
// -D on the compiler command line.  Per-model choices (compiled level, kernel
// filter, NaN check, ...) are NOT macros: the generated code passes them in a
// ModelConfig value, so two artifacts built differently can share one process
// (and one header version) without ODR trouble.
#pragma once

#define AOTI_DEBUG_VERSION "0.1.0"

// Layout version of the process registry (detail/process_registry.h).  Copies
// of the runtime attach to a published registry only when this number
// matches; bump it whenever the Registry struct changes.
#define AOTI_DEBUG_REGISTRY_ABI 6

// Inline namespace tied to the ABI, so copies of different versions compiled
// into one binary never merge their inline functions.
#define AOTI_DEBUG_ABI_NS v6

// Tensors with at least this many elements have their statistics computed on
// several threads (results are bit-identical either way).
#ifndef AOTI_DEBUG_STATS_PARALLEL_MIN
#define AOTI_DEBUG_STATS_PARALLEL_MIN (1 << 22)
#endif

// Upper bound on statistics threads (0 = std::thread::hardware_concurrency()).
#ifndef AOTI_DEBUG_STATS_MAX_THREADS
#define AOTI_DEBUG_STATS_MAX_THREADS 0
#endif

// Statistics (level 5) pull in the statistics core; an artifact compiled for
// a lower level can leave it out (the codegen passes -DAOTI_DEBUG_ENABLE_STATS=0).
#ifndef AOTI_DEBUG_ENABLE_STATS
#define AOTI_DEBUG_ENABLE_STATS 1
#endif

// The level-10 flight recorder (detail/dump.h); an artifact compiled for a
// lower level can leave it out with -DAOTI_DEBUG_ENABLE_DUMPS=0 (or a
// #define before the runtime), which also saves compile time.
#ifndef AOTI_DEBUG_ENABLE_DUMPS
#define AOTI_DEBUG_ENABLE_DUMPS 1
#endif

// The memory check (detail/memcheck.h): it replaces torch's CPU allocator,
// so it needs c10's C++ headers and library; the codegen passes
// -DAOTI_DEBUG_ENABLE_MEMCHECK=1 for artifacts compiled with it.
#ifndef AOTI_DEBUG_ENABLE_MEMCHECK
#define AOTI_DEBUG_ENABLE_MEMCHECK 0
#endif

// Highest level AOTI_DEBUG_SCOPE (hand-written ops) may log at; lower it to
// compile scopes down to a counter.
#ifndef AOTI_DEBUG_SCOPE_MAX_LEVEL
#define AOTI_DEBUG_SCOPE_MAX_LEVEL 10
#endif

// PyTorch version written in the banner by hand-written ops (artifacts pass
// the version they were compiled with in ModelConfig instead).
#ifndef AOTI_DEBUG_TORCH_VERSION
#define AOTI_DEBUG_TORCH_VERSION "unknown"
#endif

// Each copy of the runtime keeps its symbols private to its own shared
// object: copies find each other only through the published registry.
#if defined(__GNUC__) || defined(__clang__)
#define AOTI_DEBUG_HIDDEN __attribute__((visibility("hidden")))
#define AOTI_DEBUG_LIKELY(x) __builtin_expect(!!(x), 1)
#define AOTI_DEBUG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AOTI_DEBUG_NOINLINE __attribute__((noinline))
#define AOTI_DEBUG_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define AOTI_DEBUG_HIDDEN
#define AOTI_DEBUG_LIKELY(x) (x)
#define AOTI_DEBUG_UNLIKELY(x) (x)
#define AOTI_DEBUG_NOINLINE
#define AOTI_DEBUG_ALWAYS_INLINE inline
#endif

// Where the runtime's out-of-line functions (the work of writing a record,
// not the cost of a launch) are compiled.  Header-only by default: each one is
// an inline function.  With AOTI_DEBUG_LINKED_CORE=1 a translation unit sees
// their declarations only and is linked with the core object built from
// cpp_runtime/src/core.cpp (which defines AOTI_DEBUG_CORE_IMPL) with the same
// AOTI_DEBUG_ENABLE_* options: the codegen does this for AOTI wrappers, whose
// compile time would otherwise carry the whole runtime.
//
// Each header declares its core functions once (AOTI_DEBUG_CORE_DECL, default
// arguments included) and keeps their bodies (AOTI_DEBUG_CORE_FN, no default
// arguments), with the helpers only they use, in its sibling <name>-inl.h,
// which it includes at its end where AOTI_DEBUG_CORE_BODIES is 1.
#ifndef AOTI_DEBUG_LINKED_CORE
#define AOTI_DEBUG_LINKED_CORE 0
#endif
#if defined(AOTI_DEBUG_CORE_IMPL)
#define AOTI_DEBUG_CORE_BODIES 1
#define AOTI_DEBUG_CORE_FN AOTI_DEBUG_NOINLINE
#define AOTI_DEBUG_CORE_DECL AOTI_DEBUG_NOINLINE
#elif AOTI_DEBUG_LINKED_CORE
#define AOTI_DEBUG_CORE_BODIES 0
#define AOTI_DEBUG_CORE_FN AOTI_DEBUG_NOINLINE
#define AOTI_DEBUG_CORE_DECL AOTI_DEBUG_NOINLINE
#else
#define AOTI_DEBUG_CORE_BODIES 1
#define AOTI_DEBUG_CORE_FN AOTI_DEBUG_NOINLINE inline
// plain: the body makes it inline (GCC warns of noinline on an inline declaration without its body)
#define AOTI_DEBUG_CORE_DECL
#endif

// Open/close the runtime's namespace: hidden, ABI-versioned.
#define AOTI_DEBUG_NAMESPACE_BEGIN \
  namespace aoti_debug AOTI_DEBUG_HIDDEN { inline namespace AOTI_DEBUG_ABI_NS {
#define AOTI_DEBUG_NAMESPACE_END }}
