// tutti.common._host_requests: queues one request on host arrays with the core in a single
// call from Python (tutti/common/requests.py), instead of building the tutti_request and
// its tensor views as ctypes objects, which cost 4-5 us per request.
//
//   bind(enqueue, run, done, wait, test, allocate, codes, code_of, request_name)
//       once per process: the addresses of tutti_enqueue, tutti_run, tutti_completion_done,
//       tutti_completion_wait, tutti_completion_test and the Python allocate trampoline
//       (ctypes), the dict numpy dtype -> tutti_dtype code, the function that names an
//       unsupported dtype (it raises), and tutti.common.naming.request_name.
//   submit(name, kind, process_set, collective, inputs, outputs, allocates, reduce_op,
//          prescale, postscale, root_rank, splits, received_splits, result, user_data,
//          run_seconds) -> (tutti_status, request's name)
//       name: the user's name or None, which request_name(name, kind, process_set) turns
//       into the request's name once every array is accepted (a refused call consumes no
//       number). inputs: a list of C-contiguous arrays; outputs: None (the core allocates
//       through the trampoline when `allocates`), the inputs list itself (in place: the
//       same views), or another list of arrays of the same shapes. splits,
//       received_splits, result: int32 arrays or None. run_seconds >= 0: through tutti_run
//       with that limit, else tutti_enqueue.
//   run_in_place(name, kind, process_set, collective, arrays, reduce_op, prescale,
//                postscale, slice_seconds) -> (tutti_status, message or None)
//       runs one in-place request through tutti_run and waits for it, with a completion
//       record of its own: no handle, no Python between submitting and returning (an
//       isolated call on a small VM pays tens of microseconds for every Python object it
//       touches after an idle spell). message is None when the core refused the request
//       (its reason is tutti_last_error), the request's error message when it failed. The
//       wait runs in slices of slice_seconds; a signal whose handler raises (Ctrl-C) ends
//       it with that exception, and the record and arrays are kept until the core is done.
//   abandoned_count() -> how many such interrupted or dropped requests are still kept.
//   bind_errors(refused, failed)
//       once per process: refused(status) raises the core's error for a request it did
//       not queue (tutti.common.core.check); failed(status, message) returns the exception
//       for a request that failed (tutti.common.exceptions.error_for_status).
//   bind_plain(global_set, ndarray, codes, slice_seconds, empty)
//       once per process: what makes a request plain (below): the global process set
//       object, numpy.ndarray and the dict ReduceOp member -> tutti_reduce_op of the plain
//       ops (every op but Adasum); the slices run_plain waits in (Ctrl-C is noticed
//       between them); and numpy.empty, which makes allgather_plain's outputs.
//   run_plain(collective, array, name, op, prescale, postscale, process_set[, root_rank])
//       -> bool
//       tutti.numpy's allreduce_ (or, with root_rank, broadcast_) in one call when its
//       arguments are plain: a non-empty str name, a plain op, float factors, the global
//       set, a C-contiguous writable numpy.ndarray of a supported dtype, and an int root
//       rank that fits 32 bits (the core checks that it names a rank). Runs and waits as
//       run_in_place does, raising the request's error, and returns True; False, having
//       done nothing, otherwise (the general path then checks the arguments and names what
//       is wrong). One C call in place of four Python functions: after an idle spell they
//       cost an isolated call about as much as the whole collective.
//   allgather_plain(array, name, process_set) -> numpy.ndarray or None
//       tutti.numpy's allgather in one call when its arguments are plain: a non-empty str
//       name, the global set and a C-contiguous numpy.ndarray of a supported dtype. Runs
//       and waits as run_plain does; the core allocates the output through numpy.empty
//       (bind_plain) on the thread of its cycle, instead of through the ctypes trampoline
//       and a Python handle. Returns the gathered array, or None, having done nothing.
//   submit_plain(collective, array, name, op, prescale, postscale, process_set)
//       -> InPlaceRequest or None
//       allreduce_async_ in one call when its arguments are plain (as above): queues the
//       request with a completion record of its own and returns a handle that waits
//       natively, or None, having done nothing. handle.wait(timeout=None) returns the
//       array or raises the request's error (TimeoutError when `timeout` seconds pass
//       first; the request keeps running); handle.done() says whether it completed;
//       handle.name is the request's name. A handle dropped before its request is done
//       leaves its record and array to the module until the core is done with them. Per
//       request this replaces a ctypes record, a Python handle, a registry entry and the
//       Python argument checks with one native call and object.
//
// The module knows no Python package of tutti: it links neither the core (its functions
// arrive as addresses) nor numpy (arrays are read through the buffer protocol), so it
// builds against Python's headers alone. The caller keeps every array alive until the
// request is done; the core copies the views before the call returns. The GIL is released
// while the core is called, as ctypes did: a cycle run by tutti_run, or the core's thread
// that tutti_enqueue may wait on, can call the Python allocate trampoline.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "tutti/c_api.h"

namespace {

using EnqueueFn = tutti_status (*)(const tutti_request*);
using RunFn = tutti_status (*)(const tutti_request*, double, int32_t*);
using WaitFn = int (*)(tutti_completion*, double);
using TestFn = int (*)(const tutti_completion*);

struct Bound {
  EnqueueFn enqueue = nullptr;
  RunFn run = nullptr;
  tutti_done_fn done = nullptr;
  WaitFn wait = nullptr;
  TestFn test = nullptr;
  tutti_allocate_fn allocate = nullptr;
  PyObject* codes = nullptr;    // dict: numpy dtype -> tutti_dtype code
  PyObject* code_of = nullptr;  // dtype -> code, raising for an unsupported one
  PyObject* request_name = nullptr;  // (name, kind, set id) -> the request's name
  PyObject* refused = nullptr;  // status -> raises the core's error (a request not queued)
  PyObject* failed = nullptr;   // (status, message) -> the exception of a failed request
  // bind_plain(): what makes a request plain (run_plain)
  PyObject* global_set = nullptr;    // tutti.common.process_sets.global_process_set
  PyObject* ndarray_type = nullptr;  // numpy.ndarray
  PyObject* empty = nullptr;         // numpy.empty: allgather_plain's outputs
  std::vector<std::pair<PyObject*, long>> plain_ops;  // ReduceOp member -> tutti_reduce_op
  double plain_slice_seconds = 0.2;  // run_plain, handle.wait: Ctrl-C is noticed between slices
} bound;

PyObject* dtype_attribute = nullptr;  // interned "dtype"

// The views of one list of arrays; the shapes live beside them until the call returns.
struct Views {
  std::vector<tutti_tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
};

// The last dtype object looked up and its code (a reference is kept, so the address stays
// that dtype's): the arrays of one call nearly always share numpy's dtype singleton, and
// hashing a dtype for the dict costs more than the rest of a view.
PyObject* last_dtype = nullptr;
tutti_dtype last_code = TUTTI_FLOAT32;

bool DtypeCode(PyObject* array, tutti_dtype* code) {
  PyObject* dtype = PyObject_GetAttr(array, dtype_attribute);
  if (dtype == nullptr) return false;
  if (dtype == last_dtype) {
    Py_DECREF(dtype);
    *code = last_code;
    return true;
  }
  PyObject* value = PyDict_GetItemWithError(bound.codes, dtype);  // borrowed
  PyObject* owned = nullptr;
  if (value == nullptr && !PyErr_Occurred()) {
    // raises for an unsupported dtype
    owned = PyObject_CallFunctionObjArgs(bound.code_of, dtype, nullptr);
    value = owned;
  }
  if (value == nullptr) {
    Py_DECREF(dtype);
    return false;
  }
  const long number = PyLong_AsLong(value);
  Py_XDECREF(owned);
  if (number == -1 && PyErr_Occurred()) {
    Py_DECREF(dtype);
    return false;
  }
  *code = static_cast<tutti_dtype>(number);
  Py_XSETREF(last_dtype, dtype);  // keeps the reference
  last_code = *code;
  return true;
}

// Fills the view of one array: its address and shape through the buffer protocol (no
// format asked for: numpy exports any dtype that way, ml_dtypes' bfloat16 included).
bool ViewOf(PyObject* array, bool writable, tutti_tensor* tensor, std::vector<int64_t>* shape) {
  Py_buffer buffer;
  const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(array, &buffer, flags) != 0) return false;
  tensor->data = buffer.buf;
  tensor->ndim = buffer.ndim;
  shape->assign(buffer.shape, buffer.shape + buffer.ndim);
  PyBuffer_Release(&buffer);  // the caller keeps the array itself alive
  if (!DtypeCode(array, &tensor->dtype)) return false;
  tensor->shape = shape->data();
  return true;
}

bool ToViews(PyObject* arrays, const char* what, bool writable, Views* views) {
  if (!PyList_Check(arrays)) {
    PyErr_Format(PyExc_TypeError, "%s must be a list of arrays, not %s", what,
                 Py_TYPE(arrays)->tp_name);
    return false;
  }
  const Py_ssize_t count = PyList_GET_SIZE(arrays);
  views->tensors.resize(static_cast<size_t>(count));
  views->shapes.resize(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!ViewOf(PyList_GET_ITEM(arrays, i), writable, &views->tensors[i], &views->shapes[i])) {
      return false;
    }
  }
  return true;
}

// The int32 buffer of an array, or null for None.
bool Int32Buffer(PyObject* array, bool writable, int32_t** out) {
  *out = nullptr;
  if (array == Py_None) return true;
  tutti_tensor tensor{};
  std::vector<int64_t> shape;
  if (!ViewOf(array, writable, &tensor, &shape)) return false;
  if (tensor.dtype != TUTTI_INT32) {
    PyErr_SetString(PyExc_TypeError, "splits, received_splits and result must be int32 arrays");
    return false;
  }
  *out = static_cast<int32_t*>(tensor.data);
  return true;
}

bool ToLong(PyObject* value, long long* out) {
  *out = PyLong_AsLongLong(value);
  return !(*out == -1 && PyErr_Occurred());
}

bool ToDouble(PyObject* value, double* out) {
  *out = PyFloat_AsDouble(value);
  return !(*out == -1.0 && PyErr_Occurred());
}

// The checks every entry point makes first: its argument count, and bind() before use.
bool Callable(const char* function, Py_ssize_t nargs, Py_ssize_t expected) {
  if (nargs != expected) {
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", function, expected,
                 nargs);
    return false;
  }
  if (bound.run == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "%s() before bind()", function);
    return false;
  }
  return true;
}

// The request's name from (name or None, kind, process set), once every argument is
// accepted (a refused call consumes no number); *utf8 lives as long as the returned object.
PyObject* RequestName(PyObject* const* args, const char** utf8) {
  PyObject* name =
      PyObject_CallFunctionObjArgs(bound.request_name, args[0], args[1], args[2], nullptr);
  if (name == nullptr) return nullptr;
  *utf8 = PyUnicode_AsUTF8(name);
  if (*utf8 == nullptr) {
    Py_DECREF(name);
    return nullptr;
  }
  return name;
}

PyObject* Bind(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 9) {
    PyErr_Format(PyExc_TypeError, "bind() takes 9 arguments (%zd given)", nargs);
    return nullptr;
  }
  void* addresses[6];
  for (int i = 0; i < 6; ++i) {
    addresses[i] = PyLong_AsVoidPtr(args[i]);
    if (addresses[i] == nullptr) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bind() got a NULL function");
      return nullptr;
    }
  }
  if (!PyDict_Check(args[6]) || !PyCallable_Check(args[7]) || !PyCallable_Check(args[8])) {
    PyErr_SetString(PyExc_TypeError, "bind() needs a dict of dtype codes and two callables");
    return nullptr;
  }
  bound.enqueue = reinterpret_cast<EnqueueFn>(addresses[0]);
  bound.run = reinterpret_cast<RunFn>(addresses[1]);
  bound.done = reinterpret_cast<tutti_done_fn>(addresses[2]);
  bound.wait = reinterpret_cast<WaitFn>(addresses[3]);
  bound.test = reinterpret_cast<TestFn>(addresses[4]);
  bound.allocate = reinterpret_cast<tutti_allocate_fn>(addresses[5]);
  Py_INCREF(args[6]);
  Py_XDECREF(bound.codes);
  bound.codes = args[6];
  Py_CLEAR(last_dtype);  // its code came from the old dict
  Py_INCREF(args[7]);
  Py_XDECREF(bound.code_of);
  bound.code_of = args[7];
  Py_INCREF(args[8]);
  Py_XDECREF(bound.request_name);
  bound.request_name = args[8];
  Py_RETURN_NONE;
}

// A request's completion record; for a request whose output the core allocates through
// AllocateOutput (a plain allgather's), also that output and its dtype. Freed with the GIL.
struct Record : tutti_completion {
  PyObject* dtype = nullptr;   // the output's dtype (a new reference), or null
  PyObject* output = nullptr;  // the array AllocateOutput made, once it has
};

void FreeRecord(Record* record) {
  Py_XDECREF(record->dtype);
  Py_XDECREF(record->output);
  delete record;
}

// The core's allocate callback for a Record with a dtype: numpy.empty(shape, dtype) (the
// function bind_plain gave), kept in the record. Runs on the thread of the core's cycle,
// which holds no GIL; returns null, failing the request, if the array cannot be made.
void* AllocateOutput(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* record = static_cast<Record*>(static_cast<tutti_completion*>(user_data));
  void* data = nullptr;
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* dims = index == 0 && record->output == nullptr ? PyTuple_New(ndim) : nullptr;
  for (int32_t i = 0; dims != nullptr && i < ndim; ++i) {
    PyObject* dim = PyLong_FromLongLong(shape[i]);
    if (dim == nullptr) Py_CLEAR(dims);
    if (dims != nullptr) PyTuple_SET_ITEM(dims, i, dim);
  }
  PyObject* array =
      dims != nullptr ? PyObject_CallFunctionObjArgs(bound.empty, dims, record->dtype, nullptr)
                      : nullptr;
  Py_XDECREF(dims);
  Py_buffer view;
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE;
  if (array != nullptr && PyObject_GetBuffer(array, &view, flags) == 0) {
    data = view.buf;
    PyBuffer_Release(&view);  // the record keeps the array
    record->output = array;
  } else {
    Py_XDECREF(array);
  }
  PyErr_Clear();  // a failure is the request's: the core fails it
  PyGILState_Release(gil);
  return data;
}

// Requests of run_in_place calls that a signal interrupted: the core still writes their
// record and arrays, so both live until it is done (checked at the next call).
std::vector<std::pair<Record*, PyObject*>> abandoned;

void ReleaseFinished() {
  for (size_t i = 0; i < abandoned.size();) {
    if (bound.test(abandoned[i].first)) {
      FreeRecord(abandoned[i].first);
      Py_DECREF(abandoned[i].second);
      abandoned[i] = abandoned.back();
      abandoned.pop_back();
    } else {
      ++i;
    }
  }
}

// Runs `request` through tutti_run with a completion record of its own and waits for it in
// slices of slice_seconds. Returns the record once the request is done (the caller frees
// it), or null: refused (*status says why; the core never calls `done`, nothing is kept),
// or interrupted by a signal whose handler raised (the Python error is set; the record and
// `keep`, the arrays the core still reads, stay in `abandoned` until it is done). With
// `output_dtype`, the core allocates the output through AllocateOutput.
Record* RunAndWait(tutti_request* request, PyObject* keep, double slice_seconds,
                   tutti_status* status, PyObject* output_dtype = nullptr) {
  auto* record = new Record();
  if (output_dtype != nullptr) {
    Py_INCREF(output_dtype);
    record->dtype = output_dtype;
    request->allocate = AllocateOutput;
  }
  request->done = bound.done;
  request->user_data = static_cast<tutti_completion*>(record);
  int done = 0;
  Py_BEGIN_ALLOW_THREADS
  *status = bound.run(request, slice_seconds, nullptr);
  if (*status == TUTTI_OK) done = bound.wait(record, 0);
  Py_END_ALLOW_THREADS
  if (*status != TUTTI_OK) {
    FreeRecord(record);
    return nullptr;
  }
  while (!done) {
    Py_BEGIN_ALLOW_THREADS
    done = bound.wait(record, slice_seconds);
    Py_END_ALLOW_THREADS
    if (!done && PyErr_CheckSignals() < 0) {
      Py_INCREF(keep);
      abandoned.emplace_back(record, keep);
      return nullptr;
    }
  }
  return record;
}

PyObject* RunInPlace(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Callable("run_in_place", nargs, 9)) return nullptr;
  if (!abandoned.empty()) ReleaseFinished();
  long long process_set = 0, collective = 0, reduce_op = 0;
  double prescale = 1.0, postscale = 1.0, slice_seconds = 0.2;
  PyObject* arrays = args[4];
  Views views;
  if (!ToLong(args[2], &process_set) || !ToLong(args[3], &collective) ||
      !ToViews(arrays, "arrays", true, &views) || !ToLong(args[5], &reduce_op) ||
      !ToDouble(args[6], &prescale) || !ToDouble(args[7], &postscale) ||
      !ToDouble(args[8], &slice_seconds)) {
    return nullptr;
  }
  tutti_request request = {};
  PyObject* name = RequestName(args, &request.name);
  if (name == nullptr) return nullptr;
  request.collective = static_cast<tutti_collective>(collective);
  request.process_set = static_cast<int32_t>(process_set);
  request.num_tensors = static_cast<int32_t>(views.tensors.size());
  request.inputs = request.num_tensors > 0 ? views.tensors.data() : nullptr;
  request.outputs = request.inputs;
  request.reduce_op = static_cast<tutti_reduce_op>(reduce_op);
  request.prescale = prescale;
  request.postscale = postscale;
  tutti_status status;
  Record* record = RunAndWait(&request, arrays, slice_seconds, &status);
  Py_DECREF(name);
  if (record == nullptr) {
    return status != TUTTI_OK ? Py_BuildValue("(iO)", static_cast<int>(status), Py_None)
                              : nullptr;  // refused; else interrupted, the error set
  }
  PyObject* result =
      record->status == TUTTI_OK
          ? Py_BuildValue("(iO)", static_cast<int>(record->status), Py_None)
          : Py_BuildValue("(iy)", static_cast<int>(record->status), record->message);
  FreeRecord(record);
  return result;
}

PyObject* Submit(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Callable("submit", nargs, 16)) return nullptr;
  long long process_set = 0, collective = 0, reduce_op = 0, root_rank = 0, user_data = 0;
  double prescale = 1.0, postscale = 1.0, run_seconds = -1.0;
  if (!ToLong(args[2], &process_set) || !ToLong(args[3], &collective)) return nullptr;
  PyObject* inputs = args[4];
  PyObject* outputs = args[5];
  Views input_views, output_views;
  // In place (outputs is inputs): the same views, writable, serve as the outputs.
  if (!ToViews(inputs, "inputs", outputs == inputs, &input_views)) return nullptr;
  const tutti_tensor* output_tensors = nullptr;
  if (outputs == inputs) {
    output_tensors = input_views.tensors.data();
  } else if (outputs != Py_None) {
    if (!ToViews(outputs, "outputs", true, &output_views)) return nullptr;
    output_tensors = output_views.tensors.data();
  }
  const int allocates = PyObject_IsTrue(args[6]);
  int32_t* splits = nullptr;
  tutti_request request = {};
  if (allocates < 0 || !ToLong(args[7], &reduce_op) || !ToDouble(args[8], &prescale) ||
      !ToDouble(args[9], &postscale) || !ToLong(args[10], &root_rank) ||
      !Int32Buffer(args[11], false, &splits) ||
      !Int32Buffer(args[12], true, &request.received_splits) ||
      !Int32Buffer(args[13], true, &request.result) || !ToLong(args[14], &user_data) ||
      !ToDouble(args[15], &run_seconds)) {
    return nullptr;
  }
  // Named last: every argument is accepted by now.
  PyObject* name = RequestName(args, &request.name);
  if (name == nullptr) return nullptr;
  request.collective = static_cast<tutti_collective>(collective);
  request.process_set = static_cast<int32_t>(process_set);
  request.num_tensors = static_cast<int32_t>(input_views.tensors.size());
  request.inputs = request.num_tensors > 0 ? input_views.tensors.data() : nullptr;
  request.outputs = output_tensors;
  request.allocate = allocates ? bound.allocate : nullptr;
  request.reduce_op = static_cast<tutti_reduce_op>(reduce_op);
  request.prescale = prescale;
  request.postscale = postscale;
  request.root_rank = static_cast<int32_t>(root_rank);
  request.splits = splits;
  request.done = bound.done;
  request.user_data = reinterpret_cast<void*>(static_cast<intptr_t>(user_data));

  tutti_status status;
  Py_BEGIN_ALLOW_THREADS
  status = run_seconds >= 0 ? bound.run(&request, run_seconds, nullptr)
                            : bound.enqueue(&request);
  Py_END_ALLOW_THREADS
  return Py_BuildValue("(iN)", static_cast<int>(status), name);
}

PyObject* BindErrors(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "bind_errors() takes two callables");
    return nullptr;
  }
  Py_INCREF(args[0]);
  Py_XSETREF(bound.refused, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(bound.failed, args[1]);
  Py_RETURN_NONE;
}

// The handle of a submit_plain request.
struct InPlaceRequest {
  PyObject_HEAD
  Record* record;  // the core writes it until the request is done
  PyObject* array;           // the core reads and writes it until then; also the result
  PyObject* name;            // the request's name (str)
};

void InPlaceRequestDealloc(PyObject* object) {
  auto* self = reinterpret_cast<InPlaceRequest*>(object);
  if (bound.test(self->record)) {
    FreeRecord(self->record);
    Py_DECREF(self->array);
  } else {  // still running: the core writes both until it is done
    abandoned.emplace_back(self->record, self->array);
  }
  Py_DECREF(self->name);
  Py_TYPE(object)->tp_free(object);
}

PyObject* InPlaceRequestDone(PyObject* object, PyObject*) {
  return PyBool_FromLong(bound.test(reinterpret_cast<InPlaceRequest*>(object)->record));
}

// Raises the error of a request that failed, from its record's status and message (empty:
// "request <name> failed"), as tutti.common.exceptions.error_for_status builds it.
PyObject* RaiseFailed(const tutti_completion* record, PyObject* name) {
  PyObject* message = record->message[0] != '\0'
                          ? PyUnicode_DecodeUTF8(record->message,
                                                 static_cast<Py_ssize_t>(strnlen(
                                                     record->message, sizeof(record->message))),
                                                 "replace")
                          : PyUnicode_FromFormat("request %R failed", name);
  if (message == nullptr) return nullptr;
  PyObject* error =
      PyObject_CallFunction(bound.failed, "iO", static_cast<int>(record->status), message);
  Py_DECREF(message);
  if (error == nullptr) return nullptr;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error)), error);
  Py_DECREF(error);
  return nullptr;
}

// Raises the core's error for a request it refused (tutti.common.core.check).
PyObject* RaiseRefused(tutti_status status, PyObject* name) {
  PyObject* raised = PyObject_CallFunction(bound.refused, "i", static_cast<int>(status));
  if (raised == nullptr) return nullptr;
  Py_DECREF(raised);
  PyErr_Format(PyExc_RuntimeError, "the core refused request %R (status %d)", name,
               static_cast<int>(status));
  return nullptr;
}

// The request's outcome once done: the array, or its error raised.
PyObject* Outcome(InPlaceRequest* self) {
  if (self->record->status == TUTTI_OK) {
    Py_INCREF(self->array);
    return self->array;
  }
  return RaiseFailed(self->record, self->name);
}

// wait(timeout=None): in slices of bind_plain()'s length with the GIL released, so that a
// signal handler that raises (Ctrl-C) ends the wait between them.
PyObject* InPlaceRequestWait(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<InPlaceRequest*>(object);
  if (nargs > 1) {
    PyErr_Format(PyExc_TypeError, "wait() takes at most 1 argument (%zd given)", nargs);
    return nullptr;
  }
  if (bound.test(self->record)) return Outcome(self);  // the common case: no GIL hand-off
  PyObject* timeout_object = nargs == 1 ? args[0] : Py_None;
  double timeout = -1.0;
  if (timeout_object != Py_None && !ToDouble(timeout_object, &timeout)) return nullptr;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout < 0 ? 0 : timeout));
  while (true) {
    double slice = bound.plain_slice_seconds;
    if (timeout_object != Py_None) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      slice = left < 0 ? 0 : (left < slice ? left : slice);
    }
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = bound.wait(self->record, slice);
    Py_END_ALLOW_THREADS
    if (done) return Outcome(self);
    if (PyErr_CheckSignals() < 0) return nullptr;
    if (timeout_object != Py_None && Clock::now() >= deadline) {
      PyErr_Format(PyExc_TimeoutError, "request %R did not complete within %S seconds",
                   self->name, timeout_object);
      return nullptr;
    }
  }
}

PyMethodDef in_place_request_methods[] = {
    {"wait", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&InPlaceRequestWait)),
     METH_FASTCALL,
     "wait(timeout=None): the array once the request is done, or its error raised."},
    {"done", &InPlaceRequestDone, METH_NOARGS, "True once the request completed."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef in_place_request_members[] = {
    {"name", T_OBJECT_EX, offsetof(InPlaceRequest, name), READONLY, "The request's name."},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject in_place_request_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* BindPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  double slice_seconds = 0;
  if (nargs != 5 || !PyType_Check(args[1]) || !PyDict_Check(args[2]) ||
      !ToDouble(args[3], &slice_seconds) || !PyCallable_Check(args[4])) {
    PyErr_SetString(PyExc_TypeError,
                    "bind_plain() takes the global process set, numpy.ndarray, a dict of "
                    "reduce op codes, the wait slice in seconds and numpy.empty");
    return nullptr;
  }
  std::vector<std::pair<PyObject*, long>> ops;
  PyObject *key, *value;
  for (Py_ssize_t at = 0; PyDict_Next(args[2], &at, &key, &value);) {
    const long code = PyLong_AsLong(value);
    if (code == -1 && PyErr_Occurred()) return nullptr;
    ops.emplace_back(key, code);
  }
  for (auto& op : bound.plain_ops) Py_DECREF(op.first);
  for (auto& op : ops) Py_INCREF(op.first);
  bound.plain_ops = std::move(ops);
  Py_INCREF(args[0]);
  Py_XSETREF(bound.global_set, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(bound.ndarray_type, args[1]);
  Py_INCREF(args[4]);
  Py_XSETREF(bound.empty, args[4]);
  bound.plain_slice_seconds = slice_seconds;
  Py_RETURN_NONE;
}

// run_plain(): the reduce op's code when `op` is one of the plain ops (by identity: an
// enum member's hash is a Python call).
bool PlainOp(PyObject* op, long* code) {
  for (const auto& plain : bound.plain_ops) {
    if (plain.first == op) {
      *code = plain.second;
      return true;
    }
  }
  return false;
}

// The arguments of a plain call, (collective, array, name, op, prescale, postscale,
// process_set[, root_rank]), as a request on one tensor: kNotPlain (no Python error set)
// when they are not plain, kFailed with the Python error set when the collective is not an
// int.
enum class Plain { kYes, kNotPlain, kFailed };

// An exact int (not a bool) that fits a request's 32-bit root rank.
bool PlainRoot(PyObject* value, int32_t* root) {
  if (!PyLong_CheckExact(value)) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0 || v < INT32_MIN || v > INT32_MAX) return false;
  *root = static_cast<int32_t>(v);
  return true;
}

// Whether the plain calls are bound; else raises RuntimeError naming `function`.
bool PlainBound(const char* function) {
  if (bound.global_set != nullptr && bound.refused != nullptr) return true;
  PyErr_Format(PyExc_RuntimeError, "%s() before bind_plain() and bind_errors()", function);
  return false;
}

// Whether a plain call's array, name and process set are plain (an exact numpy.ndarray,
// C-contiguous, writable if asked, of a supported dtype; a non-empty str; the global set),
// with the array's view; no Python error is left set either way.
bool PlainArray(PyObject* array, PyObject* name, PyObject* process_set, bool writable,
                tutti_tensor* tensor, std::vector<int64_t>* shape) {
  if (Py_TYPE(array) != reinterpret_cast<PyTypeObject*>(bound.ndarray_type) ||
      !PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0 ||
      process_set != bound.global_set) {
    return false;
  }
  if (!ViewOf(array, writable, tensor, shape)) {
    // Read-only, not C-contiguous or an unsupported dtype: the general path says which.
    PyErr_Clear();
    return false;
  }
  return true;
}

Plain PlainRequest(const char* function, PyObject* const* args, Py_ssize_t nargs,
                   tutti_request* request, tutti_tensor* tensor, std::vector<int64_t>* shape) {
  if (!Callable(function, nargs, nargs == 8 ? 8 : 7) || !PlainBound(function)) {
    return Plain::kFailed;
  }
  PyObject* name = args[2];
  long reduce_op = 0;
  if (!PlainOp(args[3], &reduce_op) || !PyFloat_CheckExact(args[4]) ||
      !PyFloat_CheckExact(args[5]) ||
      (nargs == 8 && !PlainRoot(args[7], &request->root_rank)) ||
      !PlainArray(args[1], name, args[6], true, tensor, shape)) {
    return Plain::kNotPlain;
  }
  long long collective = 0;
  if (!ToLong(args[0], &collective) || (request->name = PyUnicode_AsUTF8(name)) == nullptr) {
    return Plain::kFailed;
  }
  if (!abandoned.empty()) ReleaseFinished();
  request->collective = static_cast<tutti_collective>(collective);
  request->process_set = TUTTI_GLOBAL_PROCESS_SET;
  request->num_tensors = 1;
  request->inputs = tensor;
  request->outputs = tensor;
  request->reduce_op = static_cast<tutti_reduce_op>(reduce_op);
  request->prescale = PyFloat_AS_DOUBLE(args[4]);
  request->postscale = PyFloat_AS_DOUBLE(args[5]);
  return Plain::kYes;
}

PyObject* RunPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  tutti_request request = {};
  tutti_tensor tensor{};
  std::vector<int64_t> shape;
  switch (PlainRequest("run_plain", args, nargs, &request, &tensor, &shape)) {
    case Plain::kNotPlain: Py_RETURN_FALSE;
    case Plain::kFailed: return nullptr;
    case Plain::kYes: break;
  }
  tutti_status status;
  Record* record = RunAndWait(&request, args[1], bound.plain_slice_seconds, &status);
  if (record == nullptr) return status != TUTTI_OK ? RaiseRefused(status, args[2]) : nullptr;
  PyObject* result = record->status == TUTTI_OK ? (Py_INCREF(Py_True), Py_True)
                                                : RaiseFailed(record, args[2]);
  FreeRecord(record);
  return result;
}

PyObject* AllgatherPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Callable("allgather_plain", nargs, 3) || !PlainBound("allgather_plain")) return nullptr;
  PyObject* array = args[0];
  PyObject* name = args[1];
  tutti_tensor tensor{};
  std::vector<int64_t> shape;
  if (!PlainArray(array, name, args[2], false, &tensor, &shape)) Py_RETURN_NONE;
  tutti_request request = {};
  if ((request.name = PyUnicode_AsUTF8(name)) == nullptr) return nullptr;
  PyObject* dtype = PyObject_GetAttr(array, dtype_attribute);
  if (dtype == nullptr) return nullptr;
  if (!abandoned.empty()) ReleaseFinished();
  request.collective = TUTTI_OP_ALLGATHER;
  request.process_set = TUTTI_GLOBAL_PROCESS_SET;
  request.num_tensors = 1;
  request.inputs = &tensor;
  tutti_status status;
  Record* record = RunAndWait(&request, array, bound.plain_slice_seconds, &status, dtype);
  Py_DECREF(dtype);
  if (record == nullptr) return status != TUTTI_OK ? RaiseRefused(status, name) : nullptr;
  PyObject* result = nullptr;
  if (record->status != TUTTI_OK) {
    RaiseFailed(record, name);
  } else if (record->output != nullptr) {
    result = record->output;
    record->output = nullptr;  // the caller's now
  } else {
    PyErr_SetString(PyExc_RuntimeError, "allgather_plain(): the core allocated no output");
  }
  FreeRecord(record);
  return result;
}

PyObject* SubmitPlain(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  tutti_request request = {};
  tutti_tensor tensor{};
  std::vector<int64_t> shape;
  switch (PlainRequest("submit_plain", args, nargs, &request, &tensor, &shape)) {
    case Plain::kNotPlain: Py_RETURN_NONE;
    case Plain::kFailed: return nullptr;
    case Plain::kYes: break;
  }
  auto* self = PyObject_New(InPlaceRequest, &in_place_request_type);
  if (self == nullptr) return nullptr;
  self->record = new Record();
  Py_INCREF(args[1]);
  self->array = args[1];
  Py_INCREF(args[2]);
  self->name = args[2];
  request.done = bound.done;
  request.user_data = static_cast<tutti_completion*>(self->record);
  tutti_status status;
  Py_BEGIN_ALLOW_THREADS
  status = bound.enqueue(&request);
  Py_END_ALLOW_THREADS
  if (status != TUTTI_OK) {  // not queued: the core never calls `done`
    // Lets the handle go without keeping anything.
    bound.done(static_cast<tutti_completion*>(self->record), status, "");
    Py_DECREF(self);
    return RaiseRefused(status, args[2]);
  }
  return reinterpret_cast<PyObject*>(self);
}

// How many interrupted run_in_place requests and dropped handles are still kept (for tests).
PyObject* AbandonedCount(PyObject*, PyObject*) {
  if (!abandoned.empty() && bound.test != nullptr) ReleaseFinished();
  return PyLong_FromSize_t(abandoned.size());
}

// A METH_FASTCALL function as the PyCFunction that PyMethodDef stores.
PyCFunction FastCall(PyObject* (*function)(PyObject*, PyObject* const*, Py_ssize_t)) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

PyMethodDef methods[] = {
    {"bind", FastCall(&Bind), METH_FASTCALL, "Binds the core's functions and the dtype codes."},
    {"submit", FastCall(&Submit), METH_FASTCALL,
     "Queues (or runs) one request on host arrays; returns (status, name)."},
    {"run_in_place", FastCall(&RunInPlace), METH_FASTCALL,
     "Runs one in-place request and waits for it; returns (status, message or None)."},
    {"abandoned_count", &AbandonedCount, METH_NOARGS,
     "Interrupted run_in_place requests and dropped handles whose record and arrays are "
     "still kept."},
    {"bind_errors", FastCall(&BindErrors), METH_FASTCALL,
     "Binds the functions that raise or build the core's errors."},
    {"bind_plain", FastCall(&BindPlain), METH_FASTCALL,
     "Binds what makes a request plain: the global process set, ndarray, the reduce ops."},
    {"run_plain", FastCall(&RunPlain), METH_FASTCALL,
     "Runs one plain in-place request and waits for it; False, having done nothing, if it "
     "is not plain."},
    {"allgather_plain", FastCall(&AllgatherPlain), METH_FASTCALL,
     "Runs one plain allgather and returns the gathered array; None, having done nothing, "
     "if it is not plain."},
    {"submit_plain", FastCall(&SubmitPlain), METH_FASTCALL,
     "Queues one plain in-place request; returns its native handle, or None, having done "
     "nothing, if it is not plain."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tutti.common._host_requests",
    "Queues requests on host arrays with the tutti core.", -1, methods,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__host_requests(void) {
  dtype_attribute = PyUnicode_InternFromString("dtype");
  if (dtype_attribute == nullptr) return nullptr;
  in_place_request_type.tp_name = "tutti.common._host_requests.InPlaceRequest";
  in_place_request_type.tp_basicsize = sizeof(InPlaceRequest);
  in_place_request_type.tp_flags = Py_TPFLAGS_DEFAULT;
  in_place_request_type.tp_doc = "An in-place request in flight; pass it to synchronize() or poll().";
  in_place_request_type.tp_dealloc = &InPlaceRequestDealloc;
  in_place_request_type.tp_methods = in_place_request_methods;
  in_place_request_type.tp_members = in_place_request_members;
  if (PyType_Ready(&in_place_request_type) < 0) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  Py_INCREF(&in_place_request_type);
  if (PyModule_AddObject(module, "InPlaceRequest",
                         reinterpret_cast<PyObject*>(&in_place_request_type)) < 0) {
    Py_DECREF(&in_place_request_type);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
