// The glue between an AOTI wrapper's tensors and the runtime, for the code
// codegen_patches/cpp_emit.py generates around each launch.  Inlined once per
// wrapper after aoti.h and checks.h (cpp_emit._inlined); nothing else
// includes it.
//
// Inductor holds tensors as RAIIAtenTensorHandle, ConstantHandle or plain
// AtenTensorHandle; `handle` turns any of them into the latter.  `Args` holds
// one launch's argument descriptions (cpp_emit._side): made on first use, a
// view's new handle kept (`release()` of a temporary) until done(); building
// one costs storing its size, and its arrays live on the heap (allocated only
// when something reads them).  Not a template: the wrapper compiles its code
// once, whatever the launches' argument counts.
#pragma once

// AtenTensorHandle, aoti_torch_delete_tensor_object
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

// tensor(AtenTensorHandle); through launch.h, Site, Role, Value and Values
#include "../aoti.h"
// LaunchArgs: what the checks around a launch read the arguments through
#include "../launch_checks.h"

namespace aoti_debug_gen {
template <class T> inline AtenTensorHandle handle(const T& t) { return t.get(); }
inline AtenTensorHandle handle(AtenTensorHandle t) { return t; }

template <class T, class = void> struct owns_handle : std::false_type {};
template <class T>
struct owns_handle<T, std::void_t<decltype(std::declval<T&>().release())>> : std::true_type {};

enum Side { kIn, kOut, kAll };
class AOTI_DEBUG_HIDDEN Args {  // hidden, as the runtime it holds
 public:
  explicit Args(int n) : n_(n) {}
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  ~Args() {
    done();
    ::operator delete(slot_);  // the one block side_of made (Values are trivially destructible)
  }
  // The arguments of one side of the launch (kIn: in and inout, kOut: out
  // and inout, kAll), each described (through `describe(*this, i)` and keep)
  // the first time it is asked for.  The list holds every argument, the
  // others as None or as described earlier (readers go by Site::args'
  // roles), and is read before the next call.  The describer is passed as a
  // pointer: the loop is compiled once per wrapper, not once per launch.
  template <class F> aoti_debug::Values side(F& describe, const aoti_debug::Site& site, Side which) {
    return side_of(&call<F>, &describe, site, which);
  }
  // The arguments for the checks around the launch (aoti_debug::LaunchChecks),
  // any side asked for through `describe`: before the launch the inputs'
  // describer, after it the outputs' one (which hands inputs to the inputs').
  template <class F> aoti_debug::LaunchArgs sides(F& describe) { return {&side_with<F>, this, &describe}; }
  template <class T> void keep(int i, T&& h) {
    if constexpr (!std::is_lvalue_reference<T>::value && owns_handle<T>::value) {
      owned_[i] = h.release();  // a temporary (a view built for this call): ours until done()
      made_[i] = 2;
      any_owned_ = true;
      slot_[i] = aoti_debug::tensor(owned_[i]);
    } else {
      made_[i] = 1;
      slot_[i] = aoti_debug::tensor(handle(h));
    }
  }
  void done() {
    if (!any_owned_) return;
    for (int i = 0; i < n_; ++i)
      if (made_[i] == 2) aoti_torch_delete_tensor_object(owned_[i]), made_[i] = 0;
    any_owned_ = false;
  }

 private:
  using Describe = void (*)(void* describer, Args& d, int i);
  template <class F> static void call(void* describer, Args& d, int i) { (*static_cast<F*>(describer))(d, i); }
  template <class F>
  static aoti_debug::Values side_with(void* self, void* describer, const aoti_debug::Site& site, int which) {
    return static_cast<Args*>(self)->side_of(&call<F>, describer, site, static_cast<Side>(which));
  }
  __attribute__((noinline)) aoti_debug::Values side_of(Describe describe, void* describer,
                                                       const aoti_debug::Site& site, Side which) {
    if (slot_ == nullptr) {  // only when something reads them; one allocation for the three arrays
      static_assert(std::is_trivially_destructible<aoti_debug::Value>::value, "~Args frees Values unrun");
      static_assert(alignof(aoti_debug::Value) >= alignof(AtenTensorHandle), "handles follow the Values");
      const size_t n = static_cast<size_t>(n_);
      void* block = ::operator new(n * (sizeof(aoti_debug::Value) + sizeof(AtenTensorHandle) + 1));
      slot_ = static_cast<aoti_debug::Value*>(block);
      for (size_t i = 0; i < n; ++i) new (slot_ + i) aoti_debug::Value();
      owned_ = reinterpret_cast<AtenTensorHandle*>(slot_ + n);
      made_ = reinterpret_cast<unsigned char*>(owned_ + n);
      std::memset(made_, 0, n);
    }
    for (int i = 0; i < n_; ++i) {
      const aoti_debug::Role r = site.args[i].role;
      const bool wanted = which == kAll || r == aoti_debug::Role::InOut ||
                          (which == kOut) == (r == aoti_debug::Role::Out);
      if (made_[i] == 0 && wanted) {
        describe(describer, *this, i);
        if (made_[i] == 0) made_[i] = 1;  // no describer: None
      }
    }
    return aoti_debug::Values::of(slot_, n_);
  }

  const int n_;
  // On the heap in one block, made on first use: a wrapper's many launches share one stack frame.
  aoti_debug::Value* slot_ = nullptr;
  AtenTensorHandle* owned_ = nullptr;
  unsigned char* made_ = nullptr;  // 0: not yet, 1: described, 2: described, owns owned_[i]
  bool any_owned_ = false;
};
}  // namespace aoti_debug_gen
