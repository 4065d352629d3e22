// The torch library `tutti`: the one way from torch into the core.
//
//   enqueue(...) -> handle     any collective (allreduce, allgather, broadcast, alltoall,
//                              reducescatter, barrier, join), single or grouped, as one
//                              tutti_request: one crossing into the core per call
//   run(..., timeout) -> (handle, done, outputs, ints)
//                              the same for a caller about to wait: through tutti_run, so
//                              a host request usually completes on this thread (up to
//                              timeout_seconds) without a hand-off to the core's thread;
//                              once done, the request is collected as by wait()
//   poll(handle) -> bool       whether the request is done
//   wait(handle, timeout) -> (done, outputs, ints)
//                              waits up to timeout_seconds (negative: no limit); once done,
//                              forgets the request and returns its output tensors and
//                              integer results (alltoall's received splits, join's last
//                              rank), or raises its error
//   take_error_status() -> int the tutti_status behind this thread's latest error
//
// Every failure raises c10::Error (RuntimeError) with the core's message and remembers the
// status (request_support.h); tutti.torch maps it to the tutti.common exception class.
// These are plain torch operators, not a TorchScript API: the Python layer is the interface.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "device_support.h"
#include "request_support.h"
#include "request_table.h"
#include "tutti/c_api.h"

namespace tutti_torch {
namespace {

void AddTensors(at::TensorList tensors, const std::string& what, const char* role,
                std::vector<at::Tensor>* into) {
  into->reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) {
    CheckTensor(tensor, what.c_str());
    if (!tensor.is_contiguous()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": " + role + " tensors must be contiguous");
    }
    into->push_back(tensor);
  }
}

// collective: tutti_collective; name: the request's name (tutti.common.naming names
// unnamed requests); kind: the call, for messages; outputs: None when the core allocates
// them; splits: alltoall's rows for each rank of the set. run_seconds >= 0: the caller waits
// next, so a host request goes through tutti_run for up to that long.
int64_t Submit(int64_t collective, c10::string_view name, c10::string_view kind,
               int64_t process_set, at::TensorList inputs, c10::optional<at::TensorList> outputs,
               int64_t op, double prescale, double postscale, int64_t root_rank,
               c10::optional<at::IntArrayRef> splits, double run_seconds) {
  std::string what(kind);
  auto request = std::make_shared<Request>();
  AddTensors(inputs, what, "input", &request->inputs);
  if (outputs.has_value()) {
    AddTensors(*outputs, what, "output", &request->outputs);
    if (request->outputs.size() != request->inputs.size()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": needs as many outputs as inputs");
    }
  }
  if (!inputs.empty()) request->dtype = inputs[0].scalar_type();
  std::vector<at::Tensor> placed = request->inputs;
  placed.insert(placed.end(), request->outputs.begin(), request->outputs.end());
  request->device.reset(new DeviceRequest(placed, what.c_str()));
  int32_t set_id = static_cast<int32_t>(process_set);
  if (collective == TUTTI_OP_ALLTOALL) {
    if (!splits.has_value() || splits->empty()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": needs splits, one row count per rank of the set");
    }
    for (int64_t count : *splits) request->splits.push_back(static_cast<int32_t>(count));
    request->received_splits.assign(request->splits.size(), 0);
  }

  // The views own the shape arrays the tutti_tensors point to; reserve keeps them in place.
  std::vector<TensorView> views;
  views.reserve(request->inputs.size() + request->outputs.size());
  std::vector<tutti_tensor> in, out;
  in.reserve(request->inputs.size());
  out.reserve(request->outputs.size());
  for (const at::Tensor& tensor : request->inputs) {
    views.emplace_back(tensor);
    in.push_back(views.back().view);
  }
  for (const at::Tensor& tensor : request->outputs) {
    views.emplace_back(tensor);
    out.push_back(views.back().view);
  }

  tutti_request r{};
  r.collective = static_cast<tutti_collective>(collective);
  r.process_set = set_id;
  r.num_tensors = static_cast<int32_t>(in.size());
  r.inputs = in.empty() ? nullptr : in.data();
  r.outputs = outputs.has_value() ? out.data() : nullptr;
  r.allocate = outputs.has_value() ? nullptr : &Request::Allocate;
  r.reduce_op = static_cast<tutti_reduce_op>(op);
  r.prescale = prescale;
  r.postscale = postscale;
  r.root_rank = static_cast<int32_t>(root_rank);
  r.splits = request->splits.empty() ? nullptr : request->splits.data();
  r.received_splits = request->received_splits.empty() ? nullptr : request->received_splits.data();
  r.result = &request->result;
  r.done = &Request::OnDone;
  r.user_data = request.get();

  std::string request_name(name);
  r.name = request_name.c_str();

  // Registered first: the core may complete the request before tutti_enqueue returns.
  RequestTable& table = RequestTable::Instance();
  int64_t handle = table.Add(request);
  tutti_status status;
  if (run_seconds >= 0 && !request->device->on_device()) {
    // torch.ops calls run without the GIL, so the cycles may run other frontends' Python
    // callbacks (tutti.numpy's allocate) on this thread.
    status = tutti_run(&r, run_seconds, nullptr);
  } else {
    status = EnqueueOn(r, *request->device);
  }
  if (status != TUTTI_OK) {
    std::string message = tutti_last_error();
    table.Take(handle);
    Fail(status, message);
  }
  return handle;
}

int64_t Enqueue(int64_t collective, c10::string_view name, c10::string_view kind,
                int64_t process_set, at::TensorList inputs, c10::optional<at::TensorList> outputs,
                int64_t op, double prescale, double postscale, int64_t root_rank,
                c10::optional<at::IntArrayRef> splits) {
  return Submit(collective, name, kind, process_set, inputs, outputs, op, prescale, postscale,
                root_rank, splits, -1.0);
}

using Results = std::tuple<bool, std::vector<at::Tensor>, std::vector<int64_t>>;

// A done request's outputs and integer results, taken out of the table (or its error raised).
Results Collect(RequestTable& table, int64_t handle, const std::shared_ptr<Request>& request) {
  table.Take(handle);  // another thread that synchronized it first makes this fail
  if (request->status != TUTTI_OK) {
    Fail(request->status, request->error);
  }
  request->device->WaitOnCurrentStream();
  std::vector<int64_t> ints;
  if (!request->received_splits.empty()) {
    ints.assign(request->received_splits.begin(), request->received_splits.end());
  } else {
    ints.push_back(request->result);
  }
  return std::make_tuple(true, std::move(request->outputs), std::move(ints));
}

// The handle, and, when the request finished within the call, what wait() would return: a
// blocking call then needs no second crossing.
std::tuple<int64_t, bool, std::vector<at::Tensor>, std::vector<int64_t>> Run(
    int64_t collective, c10::string_view name, c10::string_view kind, int64_t process_set,
    at::TensorList inputs, c10::optional<at::TensorList> outputs, int64_t op, double prescale,
    double postscale, int64_t root_rank, c10::optional<at::IntArrayRef> splits,
    double timeout_seconds) {
  const int64_t handle =
      Submit(collective, name, kind, process_set, inputs, outputs, op, prescale, postscale,
             root_rank, splits, timeout_seconds < 0 ? 0.0 : timeout_seconds);
  RequestTable& table = RequestTable::Instance();
  std::shared_ptr<Request> request = table.Find(handle);
  if (!request->done()) {
    return std::make_tuple(handle, false, std::vector<at::Tensor>{}, std::vector<int64_t>{});
  }
  Results results = Collect(table, handle, request);
  return std::make_tuple(handle, true, std::move(std::get<1>(results)),
                         std::move(std::get<2>(results)));
}

bool Poll(int64_t handle) {
  return RequestTable::Instance().Find(handle)->done();
}

Results Wait(int64_t handle, double timeout_seconds) {
  RequestTable& table = RequestTable::Instance();
  std::shared_ptr<Request> request = table.Find(handle);
  if (!request->Wait(timeout_seconds)) {
    return std::make_tuple(false, std::vector<at::Tensor>{}, std::vector<int64_t>{});
  }
  return Collect(table, handle, request);
}

}  // namespace
}  // namespace tutti_torch

TORCH_LIBRARY(tutti, m) {
  m.def("enqueue(int collective, str name, str kind, int process_set, Tensor[] inputs,"
        " Tensor[]? outputs, int op, float prescale, float postscale, int root_rank,"
        " int[]? splits) -> int",
        &tutti_torch::Enqueue);
  m.def("run(int collective, str name, str kind, int process_set, Tensor[] inputs,"
        " Tensor[]? outputs, int op, float prescale, float postscale, int root_rank,"
        " int[]? splits, float timeout_seconds) -> (int, bool, Tensor[], int[])",
        &tutti_torch::Run);
  m.def("poll(int handle) -> bool", &tutti_torch::Poll);
  m.def("wait(int handle, float timeout_seconds=-1.0) -> (bool, Tensor[], int[])",
        &tutti_torch::Wait);
  m.def("take_error_status() -> int", &tutti_torch::TakeErrorStatus);
}
