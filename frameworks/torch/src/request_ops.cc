// The general `tutti::enqueue` operator: any collective of the core (allreduce, allgather,
// broadcast, alltoall, reducescatter, barrier, join) as one tutti_request.
//
// Collectives whose output shape is only known once the ranks have negotiated (allgather,
// alltoall, reducescatter) get their outputs from the core's allocate callback, which creates
// torch tensors on the core's thread and keeps them in the request's state. After `wait`
// succeeded, `request_results` hands those tensors (and alltoall's received splits or join's
// last rank) to the caller and forgets the request.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "device_support.h"
#include "handle_table.h"
#include "request_support.h"
#include "tutti/c_api.h"

namespace tutti_torch {
namespace {

// Everything a request needs until it completes: its tensors, the views the core reads,
// and the buffers the core fills.
struct RequestState {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;  // given (allreduce, broadcast) or allocated
  std::vector<at::Tensor> allocation_buffers;
  std::vector<int32_t> splits;
  std::vector<int32_t> received_splits;
  int32_t result = -1;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = at::kCPU;  // where allocated outputs go
  std::shared_ptr<DeviceRequest> device_request;
};

std::mutex states_mutex;
std::unordered_map<int64_t, std::shared_ptr<RequestState>> states;

std::shared_ptr<RequestState> FindState(int64_t handle) {
  std::lock_guard<std::mutex> lock(states_mutex);
  auto it = states.find(handle);
  return it == states.end() ? nullptr : it->second;
}

// tutti_allocate_fn: a contiguous CPU tensor of the request's dtype. Zero-element outputs
// get one element of storage so that the core never sees a NULL buffer.
void* Allocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto state = FindState(static_cast<int64_t>(reinterpret_cast<intptr_t>(user_data)));
  if (state == nullptr || index < 0) return nullptr;
  try {
    std::vector<int64_t> sizes(shape, shape + ndim);
    int64_t numel = 1;
    for (int64_t size : sizes) numel *= size;
    at::Tensor buffer = at::empty({numel > 0 ? numel : 1},
                                  at::TensorOptions().dtype(state->dtype).device(state->device));
    at::Tensor output = buffer.narrow(0, 0, numel).view(sizes);
    if (state->outputs.size() <= static_cast<size_t>(index)) {
      state->outputs.resize(index + 1);
      state->allocation_buffers.resize(index + 1);
    }
    state->outputs[index] = output;
    state->allocation_buffers[index] = buffer;
    return buffer.data_ptr();
  } catch (...) {
    return nullptr;  // the core fails the request
  }
}

int32_t SetSize(int32_t process_set) {
  return process_set == TUTTI_GLOBAL_PROCESS_SET ? tutti_size()
                                                 : tutti_process_set_size(process_set);
}

int64_t Enqueue(int64_t collective, c10::string_view name, c10::string_view kind,
                int64_t process_set, at::TensorList inputs, c10::optional<at::TensorList> outputs,
                int64_t op, double prescale, double postscale, int64_t root_rank,
                c10::optional<at::IntArrayRef> splits) {
  std::string what(kind);
  auto state = std::make_shared<RequestState>();
  for (const at::Tensor& tensor : inputs) {
    CheckTensor(tensor, what.c_str());
    if (!tensor.is_contiguous()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": tensors must be contiguous");
    }
    state->inputs.push_back(tensor);
  }
  if (!inputs.empty()) state->dtype = inputs[0].scalar_type();
  if (outputs.has_value()) {
    for (const at::Tensor& tensor : *outputs) {
      CheckTensor(tensor, what.c_str());
      if (!tensor.is_contiguous()) {
        Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": output tensors must be contiguous");
      }
      state->outputs.push_back(tensor);
    }
    if (state->outputs.size() != state->inputs.size()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT, what + ": needs as many outputs as inputs");
    }
  }
  std::vector<at::Tensor> placed = state->inputs;
  placed.insert(placed.end(), state->outputs.begin(), state->outputs.end());
  state->device_request = std::make_shared<DeviceRequest>(placed, what.c_str());
  state->device = state->device_request->device();
  int32_t set_id = static_cast<int32_t>(process_set);
  if (collective == TUTTI_OP_ALLTOALL) {
    int32_t set_size = SetSize(set_id);
    if (set_size < 0) Fail(TUTTI_ERR_INVALID_ARGUMENT, tutti_last_error());
    state->received_splits.assign(set_size > 0 ? set_size : 1, 0);
    if (splits.has_value()) {
      for (int64_t count : *splits) state->splits.push_back(static_cast<int32_t>(count));
    }
  }

  // The views own the shape arrays the tutti_tensors point to; reserve keeps them in place.
  std::vector<TensorView> views;
  views.reserve(state->inputs.size() * 2);
  std::vector<tutti_tensor> in, out;
  for (const at::Tensor& tensor : state->inputs) {
    views.emplace_back(tensor);
    in.push_back(views.back().view);
  }
  if (outputs.has_value()) {
    for (const at::Tensor& tensor : state->outputs) {
      views.emplace_back(tensor);
      out.push_back(views.back().view);
    }
  }

  HandleTable& table = HandleTable::Instance();
  std::function<void()> finish;
  if (state->device_request->on_device()) {
    std::shared_ptr<DeviceRequest> device = state->device_request;
    finish = [device]() { device->WaitOnCurrentStream(); };
  }
  int64_t handle = table.Add(state, finish);
  {
    std::lock_guard<std::mutex> lock(states_mutex);
    states[handle] = state;
  }
  tutti_request request{};
  request.collective = static_cast<tutti_collective>(collective);
  request.process_set = set_id;
  request.num_tensors = static_cast<int32_t>(in.size());
  request.inputs = in.empty() ? nullptr : in.data();
  request.outputs = outputs.has_value() ? out.data() : nullptr;
  request.allocate = outputs.has_value() ? nullptr : &Allocate;
  request.reduce_op = static_cast<tutti_reduce_op>(op);
  request.prescale = prescale;
  request.postscale = postscale;
  request.root_rank = static_cast<int32_t>(root_rank);
  request.splits = state->splits.empty() && !splits.has_value() ? nullptr : state->splits.data();
  request.received_splits =
      state->received_splits.empty() ? nullptr : state->received_splits.data();
  request.result = &state->result;
  request.done = &HandleTable::OnDone;
  request.user_data = HandleTable::UserData(handle);

  tutti_status status = SubmitNamed(name, what, set_id, [&](const std::string& request_name) {
    request.name = request_name.c_str();
    return EnqueueOn(request, *state->device_request);
  });
  if (status != TUTTI_OK) {
    std::string message = tutti_last_error();
    {
      std::lock_guard<std::mutex> lock(states_mutex);
      states.erase(handle);
    }
    table.Discard(handle);
    Fail(status, message);
  }
  if (collective == TUTTI_OP_JOIN) RestartNumbering();
  return handle;
}

// The outputs of a request that `wait` reported finished, and its integer results
// (alltoall: received splits; join: the last rank). Forgets the request.
std::tuple<std::vector<at::Tensor>, std::vector<int64_t>> RequestResults(int64_t handle) {
  std::shared_ptr<RequestState> state;
  {
    std::lock_guard<std::mutex> lock(states_mutex);
    auto it = states.find(handle);
    if (it == states.end()) {
      Fail(TUTTI_ERR_INVALID_ARGUMENT,
           "no results for tutti handle " + std::to_string(handle));
    }
    state = it->second;
    states.erase(it);
  }
  std::vector<int64_t> extra;
  if (!state->received_splits.empty()) {
    int32_t set_size = static_cast<int32_t>(state->received_splits.size());
    extra.assign(state->received_splits.begin(), state->received_splits.begin() + set_size);
  } else {
    extra.push_back(state->result);
  }
  return std::make_tuple(state->outputs, extra);
}

// Forgets a request whose wait failed (its outputs are not wanted).
void DiscardResults(int64_t handle) {
  std::lock_guard<std::mutex> lock(states_mutex);
  states.erase(handle);
}

}  // namespace
}  // namespace tutti_torch

TORCH_LIBRARY_FRAGMENT(tutti, m) {
  // collective: tutti_collective; outputs: None when the core allocates them; splits:
  // alltoall's rows per rank (None for equal parts). An empty name lets the plugin number
  // the request by `kind` and process set.
  m.def("enqueue(int collective, str name, str kind, int process_set, Tensor[] inputs,"
        " Tensor[]? outputs, int op, float prescale, float postscale, int root_rank,"
        " int[]? splits) -> int",
        &tutti_torch::Enqueue);
  m.def("request_results(int handle) -> (Tensor[], int[])", &tutti_torch::RequestResults);
  m.def("discard_results(int handle) -> ()", &tutti_torch::DiscardResults);
}
