// A measured prototype, not part of the product: torch.compile's launch
// instrumentation as a CPython extension built against libtorch, calling the
// C++ runtime's own before_launch/after_launch (bench_launch_extension.py
// builds it and times each call shape; docs/performance.md has the figures).
#include <Python.h>
#include <structmember.h>

#include <torch/csrc/autograd/python_variable.h>

#include <string>
#include <vector>

#include "aoti_debug/torch.h"

namespace ad = aoti_debug;

namespace {

constexpr Py_ssize_t kMaxArgs = 32;

// ---------------------------------------------------------------- Model
struct ModelObj {
  PyObject_HEAD
  ad::Model* model;
};

void model_dealloc(ModelObj* self) {  // the Model is leaked on purpose (a launch may race unload)
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

PyTypeObject ModelType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---------------------------------------------------------------- Site
struct SiteObj {
  PyObject_HEAD
  ad::Site* site;
  std::vector<std::string>* strings;
  std::vector<ad::ArgSpec>* args;
};

void site_dealloc(SiteObj* self) {
  delete self->site;
  delete self->strings;
  delete self->args;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

PyTypeObject SiteType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---------------------------------------------------------------- Run
struct RunObj {
  PyObject_HEAD
  ad::Run run;
  long long level;   // mirrors run.level (T_LONGLONG member for Python)
};

PyTypeObject RunType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void run_dealloc(RunObj* self) { Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self)); }

// Values from Python objects; false with a Python error set.
bool to_values(PyObject* const* items, Py_ssize_t n, ad::Value* out) {
  if (n > kMaxArgs) {
    PyErr_SetString(PyExc_ValueError, "too many values");
    return false;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = items[i];
    if (THPVariable_Check(o)) {
      out[i] = ad::tensor(THPVariable_Unpack(o));
    } else if (o == Py_None) {
      out[i] = ad::Value();
    } else if (PyBool_Check(o)) {
      out[i] = ad::Value(o == Py_True);
    } else if (PyLong_Check(o)) {
      out[i] = ad::Value(static_cast<long long>(PyLong_AsLongLong(o)));
      if (PyErr_Occurred()) return false;
    } else if (PyFloat_Check(o)) {
      out[i] = ad::Value(PyFloat_AS_DOUBLE(o));
    } else if (PyUnicode_Check(o)) {
      const char* s = PyUnicode_AsUTF8(o);
      if (s == nullptr) return false;
      out[i] = ad::Value(s);
    } else {
      PyErr_Format(PyExc_TypeError, "value of type %s not supported", Py_TYPE(o)->tp_name);
      return false;
    }
  }
  return true;
}

// The values of a call: args[first] a tuple, or args[first:] themselves.
bool call_values(PyObject* const* args, Py_ssize_t nargs, Py_ssize_t first, ad::Value* out, size_t* n) {
  PyObject* const* items = args + first;
  Py_ssize_t count = nargs - first;
  if (count == 1 && PyTuple_CheckExact(args[first])) {
    items = &PyTuple_GET_ITEM(args[first], 0);
    count = PyTuple_GET_SIZE(args[first]);
  }
  if (!to_values(items, count, out)) return false;
  *n = static_cast<size_t>(count);
  return true;
}

bool check_run_site(PyObject* const* args, Py_ssize_t nargs, Py_ssize_t min) {
  if (nargs < min || Py_TYPE(args[0]) != &RunType || Py_TYPE(args[1]) != &SiteType) {
    PyErr_SetString(PyExc_TypeError, "expected (run, site, values...)");
    return false;
  }
  return true;
}

// side 0: before (the launch record), 1: after (launch-end)
PyObject* do_side(ad::Run& run, const ad::Site& site, PyObject* const* args, Py_ssize_t nargs, Py_ssize_t first,
                  int side) {
  try {
    if (run.level >= 3) {
      ad::Value vals[kMaxArgs];
      size_t n = 0;
      if (!call_values(args, nargs, first, vals, &n)) return nullptr;
      if (side == 0) ad::before_launch(run, site, ad::Values::of(vals, n));
      else ad::after_launch(run, site, ad::Values::of(vals, n));
    } else {
      if (side == 0) ad::before_launch(run, site, {});
      else ad::after_launch(run, site, {});
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// ---- module functions: (run, site, values_tuple) or (run, site, *values)

// variant a: the counter kept by the caller (run.launch += 1), called when run.level
PyObject* before(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 2)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  return do_side(r->run, *reinterpret_cast<SiteObj*>(args[1])->site, args, nargs, 2, 0);
}
PyObject* after(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 2)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  return do_side(r->run, *reinterpret_cast<SiteObj*>(args[1])->site, args, nargs, 2, 1);
}

// variant a2: counter in a plain Python object: before_k(run, site, launch, values)
PyObject* before_k(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 3)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  r->run.launch = PyLong_AsLongLong(args[2]);
  return do_side(r->run, *reinterpret_cast<SiteObj*>(args[1])->site, args, nargs, 3, 0);
}

// variant b: the counter in C, called unconditionally
PyObject* launch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 2)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  ++r->run.launch;
  if (r->run.level == 0) Py_RETURN_NONE;
  return do_side(r->run, *reinterpret_cast<SiteObj*>(args[1])->site, args, nargs, 2, 0);
}
PyObject* launch_end(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 2)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  if (r->run.level == 0) Py_RETURN_NONE;
  return do_side(r->run, *reinterpret_cast<SiteObj*>(args[1])->site, args, nargs, 2, 1);
}

// ---- Run methods (run.before(site, values): the codegen's call shape)
bool check_site(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || Py_TYPE(args[0]) != &SiteType) {
    PyErr_SetString(PyExc_TypeError, "expected (site, values...)");
    return false;
  }
  return true;
}
PyObject* run_before(RunObj* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_site(args, nargs)) return nullptr;
  self->run.launch = self->run.launch;  // counter kept by the caller
  return do_side(self->run, *reinterpret_cast<SiteObj*>(args[0])->site, args, nargs, 1, 0);
}
PyObject* run_after(RunObj* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_site(args, nargs)) return nullptr;
  return do_side(self->run, *reinterpret_cast<SiteObj*>(args[0])->site, args, nargs, 1, 1);
}
PyObject* run_launch(RunObj* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_site(args, nargs)) return nullptr;
  ++self->run.launch;
  if (self->run.level == 0) Py_RETURN_NONE;
  return do_side(self->run, *reinterpret_cast<SiteObj*>(args[0])->site, args, nargs, 1, 0);
}
PyObject* run_launch_end(RunObj* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_site(args, nargs)) return nullptr;
  if (self->run.level == 0) Py_RETURN_NONE;
  return do_side(self->run, *reinterpret_cast<SiteObj*>(args[0])->site, args, nargs, 1, 1);
}

// a no-op fastcall function: the floor of one call from Python
PyObject* noop(PyObject*, PyObject* const*, Py_ssize_t) { Py_RETURN_NONE; }
// a call that only unpacks the tensors (no record): THPVariable_Unpack + adapter cost
PyObject* unpack_only(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ad::Value vals[kMaxArgs];
  size_t n = 0;
  if (!call_values(args, nargs, 2, vals, &n)) return nullptr;
  Py_RETURN_NONE;
}
// render only (no write): launch_record's text, discarded
PyObject* render_only(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 2)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  ad::Value vals[kMaxArgs];
  size_t n = 0;
  if (!call_values(args, nargs, 2, vals, &n)) return nullptr;
  const ad::Site& s = *reinterpret_cast<SiteObj*>(args[1])->site;
  std::string a = ad::detail::launch_record(r->run.model->name(), r->run, s, ad::Values::of(vals, n), false, false);
  std::string b = ad::detail::launch_record(r->run.model->name(), r->run, s, ad::Values::of(vals, n), true, true);
  return PyLong_FromSize_t(a.size() + b.size());
}


// the C++ shim's loop inside this process: n launches of before/after around nothing,
// the values unpacked each launch (unpack=1) or once
PyObject* cloop(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_run_site(args, nargs, 5)) return nullptr;
  RunObj* r = reinterpret_cast<RunObj*>(args[0]);
  const ad::Site& s = *reinterpret_cast<SiteObj*>(args[1])->site;
  const long n = PyLong_AsLong(args[2]);
  const bool unpack = PyObject_IsTrue(args[3]);
  ad::Value vals[kMaxArgs];
  size_t k = 0;
  if (!call_values(args, nargs, 4, vals, &k)) return nullptr;
  for (long i = 0; i < n; ++i) {
    if (unpack) call_values(args, nargs, 4, vals, &k);
    ++r->run.launch;
    ad::before_launch(r->run, s, ad::Values::of(vals, k));
    ad::after_launch(r->run, s, ad::Values::of(vals, k));
  }
  Py_RETURN_NONE;
}

// model(name, level, kernels, nan_check, check_inputs, torch_version)
PyObject* make_model(PyObject*, PyObject* args) {
  const char *name, *kernels, *nan, *tv;
  int level, check_inputs;
  if (!PyArg_ParseTuple(args, "sissps", &name, &level, &kernels, &nan, &check_inputs, &tv)) return nullptr;
  ModelObj* m = PyObject_New(ModelObj, &ModelType);
  if (!m) return nullptr;
  try {
    m->model = new ad::Model(ad::ModelConfig{name, level, kernels, nan, check_inputs != 0, tv});
  } catch (const std::exception& e) {
    Py_DECREF(m);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(m);
}

// site(kernel, nodes, source, module, ((name, role), ...), lines)
PyObject* make_site(PyObject*, PyObject* args) {
  const char *kernel, *nodes, *source, *module, *lines;
  PyObject* specs;
  if (!PyArg_ParseTuple(args, "ssssOs", &kernel, &nodes, &source, &module, &specs, &lines)) return nullptr;
  PyObject* seq = PySequence_Fast(specs, "args must be a sequence");
  if (!seq) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  SiteObj* s = PyObject_New(SiteObj, &SiteType);
  s->strings = new std::vector<std::string>();
  s->strings->reserve(static_cast<size_t>(5 + n));
  s->args = new std::vector<ad::ArgSpec>();
  auto keep = [&](const char* t) { s->strings->emplace_back(t); return s->strings->back().c_str(); };
  const char* k = keep(kernel);
  const char* no = keep(nodes);
  const char* so = keep(source);
  const char* mo = keep(module);
  const char* li = keep(lines);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char *an, *role;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ss", &an, &role)) {
      Py_DECREF(seq);
      Py_DECREF(s);
      return nullptr;
    }
    const ad::Role r = std::string(role) == "in" ? ad::Role::In : std::string(role) == "out" ? ad::Role::Out
                                                                                             : ad::Role::InOut;
    s->args->push_back(ad::ArgSpec{keep(an), r});
  }
  Py_DECREF(seq);
  s->site = new ad::Site{k, no, so, mo, s->args->data(), static_cast<int32_t>(n), li};
  return reinterpret_cast<PyObject*>(s);
}

// begin_run(model, input_names, inputs) -> Run (the `run` record at level >= 1)
PyObject* begin_run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || Py_TYPE(args[0]) != &ModelType) {
    PyErr_SetString(PyExc_TypeError, "begin_run(model, names, inputs)");
    return nullptr;
  }
  ad::Model* model = reinterpret_cast<ModelObj*>(args[0])->model;
  RunObj* r = PyObject_New(RunObj, &RunType);
  if (!r) return nullptr;
  try {
    r->run = model->begin_run();
    r->level = r->run.level;
    if (r->run.level != 0) {
      PyObject* names = PySequence_Fast(args[1], "names");
      if (!names) { Py_DECREF(r); return nullptr; }
      std::vector<const char*> cnames;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(names); ++i)
        cnames.push_back(PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(names, i)));
      ad::Value vals[kMaxArgs];
      size_t n = 0;
      PyObject* a[1] = {args[2]};
      if (r->run.level >= 3 && !call_values(a, 1, 0, vals, &n)) { Py_DECREF(names); Py_DECREF(r); return nullptr; }
      ad::run_begin(r->run, cnames.data(), ad::Values::of(vals, n));
      Py_DECREF(names);
    }
  } catch (const std::exception& e) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(r);
}

PyMemberDef run_members[] = {
    {"level", T_LONGLONG, offsetof(RunObj, level), READONLY, nullptr},
    {"launch", T_LONGLONG, offsetof(RunObj, run) + offsetof(ad::Run, launch), 0, nullptr},
    {"run", T_LONGLONG, offsetof(RunObj, run) + offsetof(ad::Run, run), READONLY, nullptr},
    {nullptr}};

PyMethodDef run_methods[] = {
    {"before", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(run_before)), METH_FASTCALL, nullptr},
    {"after", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(run_after)), METH_FASTCALL, nullptr},
    {"launch_", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(run_launch)), METH_FASTCALL, nullptr},
    {"launch_end", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(run_launch_end)), METH_FASTCALL, nullptr},
    {nullptr}};

#define FAST(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(f)), METH_FASTCALL
PyMethodDef methods[] = {
    {"model", make_model, METH_VARARGS, nullptr},
    {"site", make_site, METH_VARARGS, nullptr},
    {"begin_run", FAST(begin_run), nullptr},
    {"before", FAST(before), nullptr},
    {"after", FAST(after), nullptr},
    {"before_k", FAST(before_k), nullptr},
    {"launch", FAST(launch), nullptr},
    {"launch_end", FAST(launch_end), nullptr},
    {"noop", FAST(noop), nullptr},
    {"cloop", FAST(cloop), nullptr},
    {"unpack_only", FAST(unpack_only), nullptr},
    {"render_only", FAST(render_only), nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "aotid_launch_proto", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_aotid_launch_proto() {
  ModelType.tp_name = "aotid_launch_proto.Model";
  ModelType.tp_basicsize = sizeof(ModelObj);
  ModelType.tp_flags = Py_TPFLAGS_DEFAULT;
  ModelType.tp_dealloc = reinterpret_cast<destructor>(model_dealloc);
  SiteType.tp_name = "aotid_launch_proto.Site";
  SiteType.tp_basicsize = sizeof(SiteObj);
  SiteType.tp_flags = Py_TPFLAGS_DEFAULT;
  SiteType.tp_dealloc = reinterpret_cast<destructor>(site_dealloc);
  RunType.tp_name = "aotid_launch_proto.Run";
  RunType.tp_basicsize = sizeof(RunObj);
  RunType.tp_flags = Py_TPFLAGS_DEFAULT;
  RunType.tp_dealloc = reinterpret_cast<destructor>(run_dealloc);
  RunType.tp_members = run_members;
  RunType.tp_methods = run_methods;
  if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&SiteType) < 0 || PyType_Ready(&RunType) < 0) return nullptr;
  return PyModule_Create(&moduledef);
}
