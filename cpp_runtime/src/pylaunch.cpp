// torch.compile's launch records from compiled code: a CPython extension,
// built against the running torch (aoti_debug/native/launch_ext.py), that the
// generated wrapper calls as launch(run, site, *values) / launch_end(run,
// site, *values) in place of aoti_debug/runtime/launches.py's functions of
// the same names.
//
// It reads each tensor as an at::Tensor into the C++ shim's own Value
// structs and hands the record to the compiled core's aotid_write_values /
// aotid_write_launch (pycore.cpp, reached through the addresses the Python
// side gives init()), which render it with the shim's launch_record, so a
// record is the one the ctypes path writes, through the same writer, lock
// and in-flight mark.  The Values are an ABI between two separately built
// libraries: init() refuses a core whose aotid_py_record_abi() is not the
// one this was compiled with (detail/py_record.h).
// Whatever it does not handle exactly as the Python Run does (a value the core
// does not render as format.py does, the kernel filter's first look, level
// 10's dumps, a run with a device, a NaN/Inf check that keeps the record's
// statistics, anything unexpected) goes to that Run's own before/after for
// that record: never an error into the user's model.
#include <Python.h>
#include <structmember.h>

#include <torch/csrc/autograd/python_variable.h>

#include <cinttypes>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "aoti_debug/detail/py_record.h"

namespace {

using aoti_debug::Value;
using aoti_debug::detail::PyRecord;

// pycore.cpp's entry points (their signatures there)
using WriteValues = int32_t (*)(const PyRecord*);
using RecordAbi = uint64_t (*)();
using WriteLaunch = int32_t (*)(const char*, const char*, int64_t, int64_t, const char*, const char*, int64_t,
                                int32_t, const char*, const aoti_debug::detail::WaitHooks*);
using ClearInflight = void (*)();

constexpr int kMaxDtype = 45;  // the last c10::ScalarType native/core.py's DTYPE_CODES names

struct State {
  WriteValues write_values = nullptr;
  WriteLaunch write_launch = nullptr;
  ClearInflight clear_inflight = nullptr;
  PyTypeObject* run_type = nullptr;  // launches.Run and launches.Site: their slots are read in place
  PyTypeObject* site_type = nullptr;
  PyTypeObject* parameter = nullptr;  // torch.nn.Parameter
  PyObject* py_launch = nullptr;      // launches.launch / launch_end: any other run or site
  PyObject* py_launch_end = nullptr;
  PyObject* site_handle = nullptr;    // blackbox.site_handle: a site's core handle, made on its first launch
  // slot offsets of Run and Site
  Py_ssize_t launch = -1, level = -1, run = -1, model = -1, dumps = -1, device = -1, devices = -1, nan = -1,
             texts = -1;
  Py_ssize_t selected = -1, box = -1, kernel = -1;
  PyObject *s_before, *s_after, *s_core_texts, *s_selected;
  PyObject* texts_obj = nullptr;  // the last run's texts (a ctypes char*[4]) and their address
  const char* const* texts_at = nullptr;
  unsigned long long fast = 0, handed = 0;  // records written here, records handed to the Run
};
State st;

inline PyObject* slot(PyObject* o, Py_ssize_t off) { return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off); }

// The offset of `name`, a __slots__ member of `type`; -1 with an error set.
Py_ssize_t slot_offset(PyTypeObject* type, const char* name) {
  PyObject* d = PyDict_GetItemString(type->tp_dict, name);
  if (d == nullptr || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
    return -1;
  }
  const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
  if (m->type != T_OBJECT_EX) {
    PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
    return -1;
  }
  return m->offset;
}

// A Python int's value; false (no error set) where it is not an int that fits
// int64.  A one-digit int is read in place: PyLong_AsLongLong costs a call
// and its checks, and each launch reads several (its number, the run's, the level).
__attribute__((always_inline)) inline bool read_i64(PyObject* o, int64_t* out) {
  if (o == nullptr) return false;  // a slot never set
#if PY_VERSION_HEX >= 0x030C0000
  if (PyLong_CheckExact(o) && PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(o))) {
    *out = PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject*>(o));
    return true;
  }
#elif PY_VERSION_HEX >= 0x030B0000  // 3.11: the digits are its public struct's (cpython/longintrepr.h)
  if (PyLong_CheckExact(o) && Py_SIZE(o) >= -1 && Py_SIZE(o) <= 1) {
    *out = static_cast<int64_t>(Py_SIZE(o)) * static_cast<int64_t>(reinterpret_cast<PyLongObject*>(o)->ob_digit[0]);
    return true;
  }
#endif
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = v;
  return true;
}

// A record's values as the shim's Values, and the sizes then strides of its
// tensors, copied (the write runs with the GIL released: another thread may
// resize a tensor meanwhile, as it could under the ctypes path's call).  On
// the caller's stack, as far as a launch's usual arguments go; a larger
// record's in vectors.
struct Staged {
  static constexpr Py_ssize_t kValues = 32;
  static constexpr int64_t kDims = 256;
  Value* values = nullptr;
  alignas(Value) unsigned char room[kValues * sizeof(Value)];  // Values made as staged, not all up front
  int64_t dims_room[kDims];
  std::vector<Value> more_values;
  std::vector<int64_t> more_dims;
};
static_assert(std::is_trivially_destructible<Value>::value, "Staged's room holds Values never destroyed");

// The values as the C++ shim describes them (what py_values() decodes from the
// ctypes path's words); false where one is not a value the core renders as
// format.py does (core.py value_words' `exact`): a tensor that is not a plain
// strided CPU torch.Tensor or Parameter with storage, a negative view, an
// unknown dtype, an int beyond int64, a string, a list...
// (Copied by a loop: at -O2 GCC would call memcpy for each few words.)
__attribute__((optimize("no-tree-loop-distribute-patterns"))) bool stage_values(PyObject* const* items,
                                                                               Py_ssize_t n, Staged& s) {
  Value* vals = reinterpret_cast<Value*>(s.room);
  if (n > Staged::kValues) {
    s.more_values.resize(static_cast<size_t>(n));
    vals = s.more_values.data();
  }
  int64_t dims = 0;  // sizes and strides, over all tensors
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* o = items[k];
    PyTypeObject* tp = Py_TYPE(o);
    if (tp == reinterpret_cast<PyTypeObject*>(THPVariableClass) || tp == st.parameter) {
      const at::Tensor& t = THPVariable_Unpack(o);
      if (!t.defined() || t.layout() != c10::kStrided || !t.device().is_cpu() || !t.has_storage() || t.is_neg())
        return false;
      const int dtype = static_cast<int>(t.scalar_type());
      if (dtype < 0 || dtype > kMaxDtype) return false;
      const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
      // the tensor's own arrays until they are copied below
      Value& v = *new (vals + k) Value(aoti_debug::TensorView{t.const_data_ptr(), dtype,
                                                              static_cast<int64_t>(sizes.size()), sizes.data(),
                                                              strides.data(), 0, -1});
      v.b = t.requires_grad();
      dims += 2 * v.t.ndim;
    } else if (o == Py_None) {
      new (vals + k) Value();
    } else if (tp == &PyBool_Type) {
      new (vals + k) Value(o == Py_True);
    } else if (tp == &PyLong_Type) {
      int64_t i = 0;
      if (!read_i64(o, &i)) return false;
      new (vals + k) Value(static_cast<long long>(i));
    } else if (tp == &PyFloat_Type) {
      new (vals + k) Value(PyFloat_AS_DOUBLE(o));
    } else {
      return false;
    }
  }
  int64_t* to = s.dims_room;
  if (dims > Staged::kDims) {
    s.more_dims.resize(static_cast<size_t>(dims));
    to = s.more_dims.data();
  }
  for (Py_ssize_t k = 0; k < n; ++k) {
    aoti_debug::TensorView& t = vals[k].t;
    if (vals[k].kind != Value::kTensor) continue;
    const int64_t nd = t.ndim;
    for (int64_t j = 0; j < nd; ++j) to[j] = t.sizes[j], to[nd + j] = t.strides[j];
    t.sizes = to, t.strides = to + nd;
    to += 2 * nd;
  }
  s.values = vals;
  return true;
}

// stage_values, where torch may also throw (a tensor whose sizes are symbolic, or
// that has no data): such a value is the Run's to describe.
bool stage(PyObject* const* items, Py_ssize_t n, Staged& s) {
  try {
    return stage_values(items, n, s);
  } catch (...) {
    return false;
  }
}

// The run's texts {destination, model, torch version, facts} as the Run makes
// them (Run._core_texts); null where it has none (the core is not there).
const char* const* run_texts_made(PyObject* run);
inline const char* const* run_texts(PyObject* run) {
  PyObject* texts = slot(run, st.texts);
  return texts == st.texts_obj && texts != nullptr ? st.texts_at : run_texts_made(run);
}

// run_texts for a run not seen last: its texts made (Run._core_texts) or their address read
__attribute__((noinline)) const char* const* run_texts_made(PyObject* run) {
  PyObject* texts = slot(run, st.texts);
  if (texts == nullptr || texts == Py_None) {
    PyObject* made = PyObject_CallMethodNoArgs(run, st.s_core_texts);
    if (made == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    Py_DECREF(made);  // the Run keeps it
    texts = slot(run, st.texts);
    if (texts == nullptr || texts == Py_None) return nullptr;
  }
  if (texts != st.texts_obj) {
    Py_buffer view;
    if (PyObject_GetBuffer(texts, &view, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      return nullptr;
    }
    const char* const* at = static_cast<const char* const*>(view.buf);
    const bool whole = view.len == static_cast<Py_ssize_t>(4 * sizeof(char*));
    PyBuffer_Release(&view);
    if (!whole) return nullptr;
    Py_INCREF(texts);
    Py_XSETREF(st.texts_obj, texts);
    st.texts_at = at;
  }
  return st.texts_at;
}

// The record handed to the Run's own method (run.before / run.after), which
// writes it as the ctypes path always has.
PyObject* hand_over(PyObject* run, PyObject* name, PyObject* site, PyObject* const* values, Py_ssize_t n) {
  ++st.handed;
  PyObject* tuple = PyTuple_New(n);
  if (tuple == nullptr) return nullptr;
  for (Py_ssize_t k = 0; k < n; ++k) {
    Py_INCREF(values[k]);
    PyTuple_SET_ITEM(tuple, k, values[k]);
  }
  PyObject* got = PyObject_CallMethodObjArgs(run, name, site, tuple, nullptr);
  Py_DECREF(tuple);
  return got;
}

bool is_true(PyObject* o) { return o == Py_True; }
bool is_none(PyObject* o) { return o == nullptr || o == Py_None; }

void* release_gil() { return PyEval_SaveThread(); }
void reacquire_gil(void* state) { PyEval_RestoreThread(static_cast<PyThreadState*>(state)); }
const aoti_debug::detail::WaitHooks kGil{release_gil, reacquire_gil};

// kind 0 (`launch`, then the launch marked in flight) or 1 (`launch-end`, the
// mark cleared first) at level >= 3; false where the Run must write it.
bool write_launch_record(int kind, PyObject* run, PyObject* site, int64_t r, int64_t k, long level,
                         PyObject* const* values, Py_ssize_t n) {
  int64_t box = 0;
  if (!read_i64(slot(site, st.box), &box)) return false;
  if (box == 0) {  // the site's first launch
    PyObject* made = PyObject_CallOneArg(st.site_handle, site);
    if (made == nullptr) PyErr_Clear();
    Py_XDECREF(made);
    if (!read_i64(slot(site, st.box), &box) || box == 0) return false;
  }
  const char* const* texts = run_texts(run);
  if (texts == nullptr) return false;
  Staged mine;
  bool written = false;
  if (stage(values, n, mine)) {
    // The core releases the GIL where the record would wait (the process lock, a
    // destination a write can wait on: a full pipe) or read long (level 5's
    // statistics of large tensors): other Python threads run meanwhile, as they do
    // around the ctypes path's call.  What it reads stays alive: the tensors and the
    // run (its texts) are the caller's arguments, the site holds box.
    const PyRecord rec{kind, static_cast<int32_t>(level), r, k, 1, static_cast<int32_t>(n), mine.values,
                       reinterpret_cast<void*>(static_cast<intptr_t>(box)), texts, &kGil};
    written = st.write_values(&rec) == 0;
  }
  return written;
}

// Does the kernel filter keep the site (Model.selected, asked on its first launch)?
PyObject* selected(PyObject* run, PyObject* site) {
  PyObject* got = slot(site, st.selected);
  if (got == nullptr || got == Py_None) {
    PyObject* model = slot(run, st.model);
    PyObject* made = model != nullptr ? PyObject_CallMethodOneArg(model, st.s_selected, site) : nullptr;
    if (made == nullptr) PyErr_Clear();
    Py_XDECREF(made);  // the site keeps it
    got = slot(site, st.selected);
  }
  return got;
}

// Run.before's work, in place, for the cases it writes through the core.
bool fast_before(PyObject* run, PyObject* site, int64_t k, long level, PyObject* const* values, Py_ssize_t n) {
  if (!is_true(selected(run, site)) || !is_none(slot(run, st.dumps))) return false;
  int64_t r = 0;
  if (!read_i64(slot(run, st.run), &r)) return false;
  if (level >= 3) {
    if (is_true(slot(run, st.devices))) return false;  // its statistics come from torch ops
    return write_launch_record(0, run, site, r, k, level, values, n);
  }
  const char* const* texts = run_texts(run);
  if (texts == nullptr) return false;
  const char* kernel = PyUnicode_AsUTF8(slot(site, st.kernel));
  if (kernel == nullptr) {
    PyErr_Clear();
    return false;
  }
  // the GIL released where the write would wait, as write_launch_record's; the
  // site (kernel) and run (texts) stay alive
  st.write_launch(texts[0], texts[1], r, k, kernel, "", 0, 1, texts[2], &kGil);  // its status unread, as the Run's
  return true;
}

// Run.after's work, in place, likewise.
bool fast_after(PyObject* run, PyObject* site, long level, PyObject* const* values, Py_ssize_t n) {
  if (!is_none(slot(run, st.device))) return false;  // AOTI_DEBUG_SYNC waits first
  if (level < 3) {
    st.clear_inflight();
    return true;
  }
  PyObject* kept = selected(run, site);
  if (kept == Py_False) {
    st.clear_inflight();
    return true;
  }
  if (!is_true(kept) || !is_none(slot(run, st.dumps)) || is_true(slot(run, st.devices))) return false;
  if (level >= 5 && !is_none(slot(run, st.nan))) return false;  // the check keeps the statistics (stats.Memo)
  int64_t r = 0, k = 0;
  if (!read_i64(slot(run, st.run), &r) || !read_i64(slot(run, st.launch), &k)) return false;
  return write_launch_record(1, run, site, r, k, level, values, n);
}

bool exact(PyObject* const* args, Py_ssize_t nargs) {
  return nargs >= 2 && Py_TYPE(args[0]) == st.run_type && Py_TYPE(args[1]) == st.site_type;
}

// -1 where it is not an int
long run_level(PyObject* run) {
  int64_t v = -1;
  return read_i64(slot(run, st.level), &v) && v >= 0 && v <= INT32_MAX ? static_cast<long>(v) : -1;
}

// launch(run, site, *values): counts the launch; at level >= 1 its `launch`
// record, the launch marked in flight.
PyObject* launch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!exact(args, nargs) || st.write_values == nullptr) return PyObject_Vectorcall(st.py_launch, args, nargs, nullptr);
  PyObject* run = args[0];
  int64_t k = 0;
  PyObject* next = read_i64(slot(run, st.launch), &k) && k >= 0 && k < INT64_MAX ? PyLong_FromLongLong(++k) : nullptr;
  if (next == nullptr) {  // not a counter this can add to: the Run's own code
    PyErr_Clear();
    return PyObject_Vectorcall(st.py_launch, args, nargs, nullptr);
  }
  Py_XSETREF(*reinterpret_cast<PyObject**>(reinterpret_cast<char*>(run) + st.launch), next);
  const long level = run_level(run);
  if (level == 0) Py_RETURN_NONE;
  if (level > 0 && fast_before(run, args[1], k, level, args + 2, nargs - 2)) {
    ++st.fast;
    Py_RETURN_NONE;
  }
  PyErr_Clear();
  return hand_over(run, st.s_before, args[1], args + 2, nargs - 2);
}

// launch_end(run, site, *values): at level >= 1 the launch's in-flight mark
// cleared, with its `launch-end` record at level >= 3.
PyObject* launch_end(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!exact(args, nargs) || st.write_values == nullptr)
    return PyObject_Vectorcall(st.py_launch_end, args, nargs, nullptr);
  PyObject* run = args[0];
  const long level = run_level(run);
  if (level == 0) Py_RETURN_NONE;
  if (level > 0 && fast_after(run, args[1], level, args + 2, nargs - 2)) {
    ++st.fast;
    Py_RETURN_NONE;
  }
  PyErr_Clear();
  return hand_over(run, st.s_after, args[1], args + 2, nargs - 2);
}

// init(Run, Site, Parameter, launch, launch_end, site_handle, py_record_abi, write_values, write_launch,
// clear_inflight): the core's functions by address
PyObject* init(PyObject*, PyObject* args) {
  PyObject *run_type, *site_type, *parameter, *py_launch, *py_launch_end, *site_handle;
  unsigned long long abi, wv, wl, ci;
  if (!PyArg_ParseTuple(args, "O!O!O!OOOKKKK", &PyType_Type, &run_type, &PyType_Type, &site_type, &PyType_Type,
                        &parameter, &py_launch, &py_launch_end, &site_handle, &abi, &wv, &wl, &ci))
    return nullptr;
  if (THPVariableClass == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "torch is not imported");
    return nullptr;
  }
  // the Values it hands over are read by the core as its own build lays them out
  const uint64_t core_abi = abi != 0 ? reinterpret_cast<RecordAbi>(static_cast<uintptr_t>(abi))() : 0;
  if (core_abi != aoti_debug::detail::py_record_abi()) {
    char why[200];
    std::snprintf(why, sizeof why,
                  "the compiled core's record ABI is %" PRIx64 ", this extension's %" PRIx64
                  " (detail/py_record.h): they were built from different versions of aoti-debug",
                  core_abi, aoti_debug::detail::py_record_abi());
    PyErr_SetString(PyExc_RuntimeError, why);
    return nullptr;
  }
  State s;
  s.run_type = reinterpret_cast<PyTypeObject*>(run_type);
  s.site_type = reinterpret_cast<PyTypeObject*>(site_type);
  s.parameter = reinterpret_cast<PyTypeObject*>(parameter);
  struct {
    PyTypeObject* type;
    const char* name;
    Py_ssize_t* at;
  } slots[] = {{s.run_type, "launch", &s.launch}, {s.run_type, "level", &s.level},   {s.run_type, "run", &s.run}, {s.run_type, "model", &s.model},
               {s.run_type, "dumps", &s.dumps},   {s.run_type, "device", &s.device}, {s.run_type, "devices", &s.devices},
               {s.run_type, "nan", &s.nan},       {s.run_type, "_texts", &s.texts},  {s.site_type, "_selected", &s.selected},
               {s.site_type, "_box", &s.box},     {s.site_type, "kernel", &s.kernel}};
  for (auto& one : slots)
    if ((*one.at = slot_offset(one.type, one.name)) < 0) return nullptr;
  s.s_before = PyUnicode_InternFromString("before");
  s.s_after = PyUnicode_InternFromString("after");
  s.s_core_texts = PyUnicode_InternFromString("_core_texts");
  s.s_selected = PyUnicode_InternFromString("selected");
  if (s.s_before == nullptr || s.s_after == nullptr || s.s_core_texts == nullptr || s.s_selected == nullptr)
    return nullptr;
  Py_INCREF(run_type), Py_INCREF(site_type), Py_INCREF(parameter), Py_INCREF(py_launch), Py_INCREF(py_launch_end);
  Py_INCREF(site_handle);
  s.py_launch = py_launch, s.py_launch_end = py_launch_end, s.site_handle = site_handle;
  s.write_values = reinterpret_cast<WriteValues>(static_cast<uintptr_t>(wv));
  s.write_launch = reinterpret_cast<WriteLaunch>(static_cast<uintptr_t>(wl));
  s.clear_inflight = reinterpret_cast<ClearInflight>(static_cast<uintptr_t>(ci));
  st = s;  // once per process (launch_ext.py); the references are kept for its life
  Py_RETURN_NONE;
}

// (records written here, records handed to the Run's own methods)
PyObject* counts(PyObject*, PyObject*) { return Py_BuildValue("(KK)", st.fast, st.handed); }

#define FAST(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(f)), METH_FASTCALL
PyMethodDef methods[] = {
    {"launch", FAST(launch), "launch(run, site, *values): counts the launch and writes its `launch` record"},
    {"launch_end", FAST(launch_end), "launch_end(run, site, *values): the launch's `launch-end` record"},
    {"init", init, METH_VARARGS, nullptr},
    {"counts", counts, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "aotid_pylaunch", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_aotid_pylaunch() { return PyModule_Create(&moduledef); }
