// What tutti.torch asks of the core, in plain C++: submit a request, poll it, wait for it
// and collect its result. python_entry.cc exposes these to Python.
//
// Every failure raises c10::Error with the core's message and remembers the status
// (request_support.h), which the Python entry turns into the tutti.common exception.
#ifndef TUTTI_TORCH_REQUEST_CALLS_H_
#define TUTTI_TORCH_REQUEST_CALLS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tutti_torch {

// One request as tutti.torch describes it. collective: tutti_collective; name: the
// request's name (tutti.common.naming names unnamed requests); kind: the call, for
// messages; outputs: used when has_outputs, else the core allocates them; splits:
// alltoall's rows for each rank of the set.
struct Submission {
  int64_t collective = 0;
  std::string name;
  std::string kind;
  int64_t process_set = 0;
  std::vector<at::Tensor> inputs;
  bool has_outputs = false;
  std::vector<at::Tensor> outputs;
  int64_t op = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int64_t root_rank = 0;
  std::vector<int64_t> splits;
};

// A request's outcome as Python receives it: whether it is done and, once it is, its output
// tensors and integer results (alltoall's received splits, join's last rank).
struct Results {
  bool done = false;
  std::vector<at::Tensor> outputs;
  std::vector<int64_t> ints;
};

// Queues the request and returns its handle. run_seconds >= 0: the caller waits next, so a
// host request goes through tutti_run and usually completes on this thread within that long.
int64_t Submit(Submission submission, double run_seconds);

// The request's results if it is done (then forgotten: a handle is collected once), else
// {done = false}; raises the request's error.
Results CollectIfDone(int64_t handle);

// Whether the request behind `handle` is done.
bool Poll(int64_t handle);

// Waits up to timeout_seconds (negative: no limit), then CollectIfDone.
Results Wait(int64_t handle, double timeout_seconds);

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_REQUEST_CALLS_H_
