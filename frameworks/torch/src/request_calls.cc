#include "request_calls.h"

#include <memory>
#include <utility>

#include "device_support.h"
#include "request_support.h"
#include "request_table.h"
#include "tutti/c_api.h"

namespace tutti_torch {
namespace {

void CheckTensors(const std::vector<at::Tensor>& tensors, const std::string& what,
                  const char* role) {
  for (const at::Tensor& tensor : tensors) {
    CheckTensor(tensor, what.c_str());
    if (!tensor.is_contiguous()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": " + role + " tensors must be contiguous");
    }
  }
}

// A done request's outputs and integer results, taken out of the table (or its error raised).
Results Collect(RequestTable& table, int64_t handle, const std::shared_ptr<Request>& request) {
  table.Take(handle);  // another thread that synchronized it first makes this fail
  if (request->status != TUTTI_OK) {
    Fail(request->status, request->error);
  }
  request->device->WaitOnCurrentStream();
  Results results;
  results.done = true;
  results.outputs = std::move(request->outputs);
  if (!request->received_splits.empty()) {
    results.ints.assign(request->received_splits.begin(), request->received_splits.end());
  } else {
    results.ints.push_back(request->result);
  }
  return results;
}

}  // namespace

int64_t Submit(Submission submission, double run_seconds) {
  const std::string& what = submission.kind;
  auto request = std::make_shared<Request>();
  CheckTensors(submission.inputs, what, "input");
  request->inputs = std::move(submission.inputs);
  if (submission.has_outputs) {
    CheckTensors(submission.outputs, what, "output");
    if (submission.outputs.size() != request->inputs.size()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": needs as many outputs as inputs");
    }
    request->outputs = std::move(submission.outputs);
  }
  if (!request->inputs.empty()) request->dtype = request->inputs[0].scalar_type();
  request->device.reset(new DeviceRequest(request->inputs, request->outputs, what.c_str()));
  if (submission.collective == TUTTI_OP_ALLTOALL) {
    if (submission.splits.empty()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": needs splits, one row count per rank of the set");
    }
    for (int64_t count : submission.splits) request->splits.push_back(static_cast<int32_t>(count));
    request->received_splits.assign(request->splits.size(), 0);
  }

  // The views point into the request's tensors, which outlive the enqueue call.
  std::vector<tutti_tensor> in, out;
  in.reserve(request->inputs.size());
  out.reserve(request->outputs.size());
  for (const at::Tensor& tensor : request->inputs) in.push_back(ViewOf(tensor));
  for (const at::Tensor& tensor : request->outputs) out.push_back(ViewOf(tensor));

  tutti_request r{};
  r.collective = static_cast<tutti_collective>(submission.collective);
  r.name = submission.name.c_str();
  r.process_set = static_cast<int32_t>(submission.process_set);
  r.num_tensors = static_cast<int32_t>(in.size());
  r.inputs = in.empty() ? nullptr : in.data();
  r.outputs = submission.has_outputs ? out.data() : nullptr;
  r.allocate = submission.has_outputs ? nullptr : &Request::Allocate;
  r.reduce_op = static_cast<tutti_reduce_op>(submission.op);
  r.prescale = submission.prescale;
  r.postscale = submission.postscale;
  r.root_rank = static_cast<int32_t>(submission.root_rank);
  r.splits = request->splits.empty() ? nullptr : request->splits.data();
  r.received_splits = request->received_splits.empty() ? nullptr : request->received_splits.data();
  r.result = &request->result;
  r.done = &Request::OnDone;
  r.user_data = request.get();

  // Registered first: the core may complete the request before tutti_enqueue returns.
  RequestTable& table = RequestTable::Instance();
  int64_t handle = table.Add(request);
  tutti_status status;
  if (run_seconds >= 0 && !request->device->on_device()) {
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

Results CollectIfDone(int64_t handle) {
  RequestTable& table = RequestTable::Instance();
  std::shared_ptr<Request> request = table.Find(handle);
  if (!request->Finished()) return Results{};
  return Collect(table, handle, request);
}

bool Poll(int64_t handle) {
  return RequestTable::Instance().Find(handle)->done();
}

Results Wait(int64_t handle, double timeout_seconds) {
  RequestTable& table = RequestTable::Instance();
  std::shared_ptr<Request> request = table.Find(handle);
  if (!request->Wait(timeout_seconds)) return Results{};
  return Collect(table, handle, request);
}

}  // namespace tutti_torch
