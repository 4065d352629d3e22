// tutti.torch's way into the core: a CPython module of ten functions, built by
// tutti_torch_python_entry() once the library is loaded (tutti/torch/_native.py).
//
//   enqueue(collective, name, kind, process_set, inputs, outputs, op, prescale, postscale,
//           root_rank, splits) -> handle
//                              any collective, single or grouped, as one tutti_request
//   run(..., timeout_seconds) -> (handle, done, outputs, ints)
//                              the same for a caller about to wait: through tutti_run, so a
//                              host request usually completes on this thread; once done,
//                              the request is collected as by wait()
//   poll(handle) -> bool       whether the request is done
//   wait(handle, timeout_seconds) -> (done, outputs, ints)
//                              waits up to timeout_seconds (negative: no limit); once done,
//                              forgets the request and returns its output tensors and
//                              integer results, or raises its error
//   bind_plain(global_set, op_codes, slice_seconds)
//                              once per process: the global process set object, the dict
//                              op -> tutti_reduce_op of the plain ops (None, Average's
//                              default, and every ReduceOp but Adasum) and the slices
//                              run_plain waits in (Ctrl-C is noticed between them)
//   run_plain(collective, kind, tensor, name, op, prescale, postscale, process_set[,
//             root_rank]) -> bool
//                              allreduce_ (or, with root_rank, broadcast_) in one call when
//                              its arguments are plain: a non-empty str name, a plain op,
//                              float factors, the global set, a dense contiguous tensor and
//                              an int root rank that fits 32 bits (the core checks that it
//                              names a rank). Runs the request as run() does
//                              and waits for it (raising its error), then returns True;
//                              False, having done nothing, otherwise. One C call in place of
//                              four Python functions, which after an idle spell cost an
//                              isolated call about as much as the collective itself
//   allgather_plain(tensor, name, process_set) -> tensor or None
//                              allgather of one tensor in one call when its arguments are
//                              plain (a non-empty str name, the global set, a dense
//                              contiguous tensor that autograd need not follow): runs it as
//                              run_plain does and returns the gathered tensor; None, having
//                              done nothing, otherwise
//   enqueue_plain(collective, kind, tensor, name, op, prescale, postscale, process_set)
//       -> handle or None     allreduce_async_ in one call when its arguments are plain (as
//                              above): queues the request as enqueue() does; None, having
//                              done nothing, otherwise
//   wait_done(handle, timeout_seconds) -> bool
//                              wait() for a request whose result the caller already holds
//                              (a plain in-place allreduce: its tensor): once done, forgets
//                              it without building the results, or raises its error
//   contiguous_dense(tensors) -> bool
//                              whether a list or tuple holds only dense, contiguous tensors,
//                              which a request takes as they are: one call instead of a
//                              Python check and contiguous() per tensor of a grouped call
//
// inputs and outputs are lists of tensors (outputs None: the core allocates them); splits is
// a list of ints or None. Why not torch operators: a call through torch's dispatcher boxes
// every argument, about 3 us per call on this class of machine, more than the core spends
// on a small request; a METH_FASTCALL function reads its arguments in place. These are
// tutti.torch's internals: the Python layer is the interface.
//
// Errors the core reports are raised as the tutti.common exception for their status (built
// by the factory given at creation); wrong argument types raise TypeError. The GIL is
// released while a call may wait (run, wait) and held while it only queues (enqueue, poll):
// queueing never waits for a thread that needs the GIL.
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "request_calls.h"
#include "request_support.h"
#include "tutti/c_api.h"

namespace tutti_torch {
namespace {

PyObject* error_factory = nullptr;  // tutti.common.exceptions.error_for_status

// bind_plain(): what makes a request plain (run_plain).
PyObject* global_set = nullptr;
std::vector<std::pair<PyObject*, int64_t>> plain_ops;  // op (by identity) -> tutti_reduce_op
double plain_slice_seconds = 0.5;  // run_plain() waits in slices: Ctrl-C is noticed between

// Sets the Python exception for the C++ exception being handled.
void RaiseCurrent() {
  std::string message;
  try {
    throw;
  } catch (const c10::Error& error) {
    message = error.what_without_backtrace();
  } catch (const std::exception& error) {
    message = error.what();
  }
  const int64_t status = TakeErrorStatus();
  if (status == TUTTI_OK || error_factory == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, message.c_str());
    return;
  }
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "replace");
  if (text == nullptr) return;
  PyObject* exception =
      PyObject_CallFunction(error_factory, "LN", static_cast<long long>(status), text);
  if (exception == nullptr) return;  // the factory's own error stands
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception)), exception);
  Py_DECREF(exception);
}

// Runs f() without the GIL; a C++ exception is rethrown once the GIL is back.
template <typename F>
auto WithoutGil(F f) -> decltype(f()) {
  PyThreadState* state = PyEval_SaveThread();
  try {
    auto result = f();
    PyEval_RestoreThread(state);
    return result;
  } catch (...) {
    PyEval_RestoreThread(state);
    throw;
  }
}

bool ArgCount(const char* function, Py_ssize_t given, Py_ssize_t wanted) {
  if (given == wanted) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", function, wanted, given);
  return false;
}

bool ToInt(PyObject* value, int64_t* out) {
  *out = PyLong_AsLongLong(value);
  return !(*out == -1 && PyErr_Occurred());
}

bool ToDouble(PyObject* value, double* out) {
  *out = PyFloat_AsDouble(value);
  return !(*out == -1.0 && PyErr_Occurred());
}

bool ToString(PyObject* value, std::string* out) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(value, &size);
  if (text == nullptr) return false;
  out->assign(text, static_cast<size_t>(size));
  return true;
}

// A list or tuple of tensors.
bool ToTensors(PyObject* value, const char* what, std::vector<at::Tensor>* out) {
  if (!PyList_Check(value) && !PyTuple_Check(value)) {
    PyErr_Format(PyExc_TypeError, "%s must be a list of tensors, not %s", what,
                 Py_TYPE(value)->tp_name);
    return false;
  }
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
  PyObject** items = PySequence_Fast_ITEMS(value);
  out->reserve(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!THPVariable_Check(items[i])) {
      PyErr_Format(PyExc_TypeError, "%s must hold tensors, not %s", what,
                   Py_TYPE(items[i])->tp_name);
      return false;
    }
    out->push_back(THPVariable_Unpack(items[i]));
  }
  return true;
}

bool ToInts(PyObject* value, std::vector<int64_t>* out) {
  if (!PyList_Check(value) && !PyTuple_Check(value)) {
    PyErr_Format(PyExc_TypeError, "splits must be a list of ints, not %s", Py_TYPE(value)->tp_name);
    return false;
  }
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
  PyObject** items = PySequence_Fast_ITEMS(value);
  out->resize(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!ToInt(items[i], &(*out)[i])) return false;
  }
  return true;
}

// The eleven arguments shared by enqueue and run.
bool ToSubmission(PyObject* const* args, Submission* s) {
  if (!ToInt(args[0], &s->collective) || !ToString(args[1], &s->name) ||
      !ToString(args[2], &s->kind) || !ToInt(args[3], &s->process_set) ||
      !ToTensors(args[4], "inputs", &s->inputs)) {
    return false;
  }
  s->has_outputs = args[5] != Py_None;
  if (s->has_outputs && !ToTensors(args[5], "outputs", &s->outputs)) return false;
  if (!ToInt(args[6], &s->op) || !ToDouble(args[7], &s->prescale) ||
      !ToDouble(args[8], &s->postscale) || !ToInt(args[9], &s->root_rank)) {
    return false;
  }
  return args[10] == Py_None || ToInts(args[10], &s->splits);
}

// A new list of convert(value) for each value; null with the Python error set on failure.
template <typename T, typename Convert>
PyObject* ToList(const std::vector<T>& values, Convert convert) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(values.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* item = convert(values[i]);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// (done, outputs, ints), preceded by `handle` when it is not null.
PyObject* ResultsTuple(PyObject* handle, const Results& results) {
  PyObject* outputs =
      ToList(results.outputs, [](const at::Tensor& tensor) { return THPVariable_Wrap(tensor); });
  PyObject* ints = outputs ? ToList(results.ints, [](int64_t value) {
    return PyLong_FromLongLong(value);
  }) : nullptr;
  if (ints == nullptr) {
    Py_XDECREF(outputs);
    return nullptr;
  }
  PyObject* done = results.done ? Py_True : Py_False;
  if (handle == nullptr) return Py_BuildValue("(ONN)", done, outputs, ints);
  return Py_BuildValue("(OONN)", handle, done, outputs, ints);
}

PyObject* Enqueue(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!ArgCount("enqueue", nargs, 11)) return nullptr;
  Submission submission;
  if (!ToSubmission(args, &submission)) return nullptr;
  try {
    return PyLong_FromLongLong(Submit(std::move(submission), -1.0));
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

PyObject* Run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!ArgCount("run", nargs, 12)) return nullptr;
  Submission submission;
  double timeout_seconds = 0;
  if (!ToSubmission(args, &submission) || !ToDouble(args[11], &timeout_seconds)) return nullptr;
  if (timeout_seconds < 0) timeout_seconds = 0;
  try {
    // tutti_run may run cycles that call other frontends' Python code (tutti.numpy's
    // allocate): without the GIL.
    std::pair<int64_t, Results> ran = WithoutGil([&] {
      const int64_t handle = Submit(std::move(submission), timeout_seconds);
      return std::make_pair(handle, CollectIfDone(handle));
    });
    PyObject* handle = PyLong_FromLongLong(ran.first);
    if (handle == nullptr) return nullptr;
    PyObject* result = ResultsTuple(handle, ran.second);
    Py_DECREF(handle);
    return result;
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

PyObject* Poll(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t handle = 0;
  if (!ArgCount("poll", nargs, 1) || !ToInt(args[0], &handle)) return nullptr;
  try {
    return PyBool_FromLong(tutti_torch::Poll(handle) ? 1 : 0);
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

// wait() and wait_done(): (handle, timeout_seconds) -> the request's results, through
// `present` (null with the Python error set on failure).
template <typename Present>
PyObject* WaitThen(const char* function, PyObject* const* args, Py_ssize_t nargs,
                   Present present) {
  int64_t handle = 0;
  double timeout_seconds = -1.0;
  if (!ArgCount(function, nargs, 2) || !ToInt(args[0], &handle) ||
      !ToDouble(args[1], &timeout_seconds)) {
    return nullptr;
  }
  try {
    // A finished request is collected without giving the GIL away (and waiting for it back).
    Results results = CollectIfDone(handle);
    if (!results.done && timeout_seconds != 0) {
      results = WithoutGil([&] { return tutti_torch::Wait(handle, timeout_seconds); });
    }
    return present(results);  // the results' tensors are let go here, with the GIL
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

PyObject* Wait(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return WaitThen("wait", args, nargs,
                  [](const Results& results) { return ResultsTuple(nullptr, results); });
}

PyObject* WaitDone(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return WaitThen("wait_done", args, nargs,
                  [](const Results& results) { return PyBool_FromLong(results.done ? 1 : 0); });
}

// Whether `value` is a dense, contiguous tensor.
bool ContiguousDenseTensor(PyObject* value) {
  if (!THPVariable_Check(value)) return false;
  const at::Tensor& tensor = THPVariable_Unpack(value);
  return tensor.layout() == at::kStrided && tensor.is_contiguous();
}

PyObject* ContiguousDense(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!ArgCount("contiguous_dense", nargs, 1)) return nullptr;
  PyObject* value = args[0];
  if (!PyList_Check(value) && !PyTuple_Check(value)) Py_RETURN_FALSE;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
  PyObject** items = PySequence_Fast_ITEMS(value);
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!ContiguousDenseTensor(items[i])) Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

PyObject* BindPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  double slice_seconds = 0;
  if (nargs != 3 || !PyDict_Check(args[1]) || !ToDouble(args[2], &slice_seconds)) {
    PyErr_SetString(PyExc_TypeError,
                    "bind_plain() takes the global process set, a dict of reduce op codes "
                    "and the wait slice in seconds");
    return nullptr;
  }
  std::vector<std::pair<PyObject*, int64_t>> ops;
  PyObject *key, *value;
  for (Py_ssize_t at = 0; PyDict_Next(args[1], &at, &key, &value);) {
    int64_t code = 0;
    if (!ToInt(value, &code)) return nullptr;
    ops.emplace_back(key, code);
  }
  for (auto& op : plain_ops) Py_DECREF(op.first);
  for (auto& op : ops) Py_INCREF(op.first);
  plain_ops = std::move(ops);
  Py_INCREF(args[0]);
  Py_XSETREF(global_set, args[0]);
  plain_slice_seconds = slice_seconds;
  Py_RETURN_NONE;
}

// The reduce op's code when `op` is one of the plain ops (by identity: an enum member's
// hash is a Python call).
bool PlainOp(PyObject* op, int64_t* code) {
  for (const auto& plain : plain_ops) {
    if (plain.first == op) {
      *code = plain.second;
      return true;
    }
  }
  return false;
}

// The arguments of a plain call, (collective, kind, tensor, name, op, prescale, postscale,
// process_set[, root_rank]), as a submission: kNotPlain (no Python error set) when they are
// not plain, kFailed with the Python error set when one is malformed.
enum class Plain { kYes, kNotPlain, kFailed };

// An exact int (not a bool) that fits a request's 32-bit root rank.
bool PlainRoot(PyObject* value, int64_t* root) {
  if (!PyLong_CheckExact(value)) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0 || v < INT32_MIN || v > INT32_MAX) return false;
  *root = v;
  return true;
}

Plain PlainSubmission(const char* function, PyObject* const* args, Py_ssize_t nargs,
                      Submission* submission) {
  if (!ArgCount(function, nargs, nargs == 9 ? 9 : 8)) return Plain::kFailed;
  if (global_set == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "%s() before bind_plain()", function);
    return Plain::kFailed;
  }
  PyObject* name = args[3];
  if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0 ||
      !PlainOp(args[4], &submission->op) || !PyFloat_CheckExact(args[5]) ||
      !PyFloat_CheckExact(args[6]) || args[7] != global_set || !ContiguousDenseTensor(args[2]) ||
      (nargs == 9 && !PlainRoot(args[8], &submission->root_rank))) {
    return Plain::kNotPlain;
  }
  if (!ToInt(args[0], &submission->collective) || !ToString(args[1], &submission->kind) ||
      !ToString(name, &submission->name)) {
    return Plain::kFailed;
  }
  submission->process_set = TUTTI_GLOBAL_PROCESS_SET;
  submission->inputs.push_back(THPVariable_Unpack(args[2]));
  submission->has_outputs = true;
  submission->outputs = submission->inputs;
  submission->prescale = PyFloat_AS_DOUBLE(args[5]);
  submission->postscale = PyFloat_AS_DOUBLE(args[6]);
  return Plain::kYes;
}

// Runs a plain call's request as run() does and waits for it in slices; false, with the
// Python error set, when a signal's handler raised (the request stays in the table). Raises
// the request's error as a C++ exception.
bool RunToEnd(Submission submission, Results* results) {
  // As run(): without the GIL, since a cycle run here may call other frontends' Python.
  const int64_t handle =
      WithoutGil([&] { return Submit(std::move(submission), plain_slice_seconds); });
  *results = CollectIfDone(handle);
  while (!results->done) {
    *results = WithoutGil([&] { return tutti_torch::Wait(handle, plain_slice_seconds); });
    if (!results->done && PyErr_CheckSignals() < 0) return false;
  }
  return true;
}

PyObject* RunPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Submission submission;
  switch (PlainSubmission("run_plain", args, nargs, &submission)) {
    case Plain::kNotPlain: Py_RETURN_FALSE;
    case Plain::kFailed: return nullptr;
    case Plain::kYes: break;
  }
  try {
    Results results;
    if (!RunToEnd(std::move(submission), &results)) return nullptr;
    Py_RETURN_TRUE;
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

PyObject* AllgatherPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!ArgCount("allgather_plain", nargs, 3)) return nullptr;
  if (global_set == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "allgather_plain() before bind_plain()");
    return nullptr;
  }
  PyObject* tensor = args[0];
  PyObject* name = args[1];
  if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0 || args[2] != global_set ||
      !ContiguousDenseTensor(tensor)) {
    Py_RETURN_NONE;
  }
  Submission submission;
  submission.inputs.push_back(THPVariable_Unpack(tensor));
  if (submission.inputs[0].requires_grad() && at::GradMode::is_enabled()) {
    Py_RETURN_NONE;  // autograd follows it: the differentiable path
  }
  submission.collective = TUTTI_OP_ALLGATHER;
  submission.kind = "allgather";
  submission.process_set = TUTTI_GLOBAL_PROCESS_SET;
  if (!ToString(name, &submission.name)) return nullptr;
  try {
    Results results;
    if (!RunToEnd(std::move(submission), &results)) return nullptr;
    return THPVariable_Wrap(results.outputs.at(0));
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

PyObject* EnqueuePlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Submission submission;
  switch (PlainSubmission("enqueue_plain", args, nargs, &submission)) {
    case Plain::kNotPlain: Py_RETURN_NONE;
    case Plain::kFailed: return nullptr;
    case Plain::kYes: break;
  }
  try {
    return PyLong_FromLongLong(Submit(std::move(submission), -1.0));
  } catch (...) {
    RaiseCurrent();
    return nullptr;
  }
}

// A METH_FASTCALL function as the PyCFunction that PyMethodDef stores.
PyCFunction FastCall(PyObject* (*function)(PyObject*, PyObject* const*, Py_ssize_t)) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

PyMethodDef methods[] = {
    {"enqueue", FastCall(&Enqueue), METH_FASTCALL, "Queues a request; returns its handle."},
    {"run", FastCall(&Run), METH_FASTCALL,
     "Queues a request and runs it on this thread when the core lets it."},
    {"poll", FastCall(&Poll), METH_FASTCALL, "Whether a request is done."},
    {"wait", FastCall(&Wait), METH_FASTCALL, "Waits for a request and collects its results."},
    {"wait_done", FastCall(&WaitDone), METH_FASTCALL,
     "Waits for a request and forgets it once done; returns whether it is."},
    {"bind_plain", FastCall(&BindPlain), METH_FASTCALL,
     "Binds what makes a request plain: the global process set and the reduce ops."},
    {"run_plain", FastCall(&RunPlain), METH_FASTCALL,
     "Runs one plain in-place allreduce and waits for it; False, having done nothing, if "
     "it is not plain."},
    {"allgather_plain", FastCall(&AllgatherPlain), METH_FASTCALL,
     "Runs one plain allgather and returns its result; None, having done nothing, if it "
     "is not plain."},
    {"enqueue_plain", FastCall(&EnqueuePlain), METH_FASTCALL,
     "Queues one plain in-place allreduce; returns its handle, or None, having done "
     "nothing, if it is not plain."},
    {"contiguous_dense", FastCall(&ContiguousDense), METH_FASTCALL,
     "Whether a list or tuple holds only dense, contiguous tensors."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tutti.torch._entry", "tutti.torch's calls into the core.", -1,
    methods, nullptr, nullptr, nullptr, nullptr,
};

PyObject* module = nullptr;

}  // namespace
}  // namespace tutti_torch

// Called (through ctypes.PyDLL, with the GIL) once per process: the module, created on the
// first call; error_for_status(status, message) builds the exception for a core error.
// Returns a borrowed reference.
extern "C" TUTTI_EXPORT PyObject* tutti_torch_python_entry(PyObject* error_for_status) {
  using tutti_torch::module;
  if (module == nullptr) {
    module = PyModule_Create(&tutti_torch::module_def);
    if (module == nullptr) return nullptr;
  }
  Py_XINCREF(error_for_status);
  Py_XDECREF(tutti_torch::error_factory);
  tutti_torch::error_factory = error_for_status;
  return module;
}
