// Helpers of the native calls: error reporting, tensor checks and views for the core.
#ifndef TUTTI_TORCH_REQUEST_SUPPORT_H_
#define TUTTI_TORCH_REQUEST_SUPPORT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace tutti_torch {

// Raises c10::Error with `message`, remembering `status` for TakeErrorStatus() on this
// thread (python_entry.cc raises the tutti.common exception for it).
[[noreturn]] void Fail(tutti_status status, const std::string& message);

// The status behind the latest Fail() on this thread (TUTTI_OK if none); resets it.
int64_t TakeErrorStatus();

// The core's element type for a torch dtype; fails for dtypes the core does not know.
tutti_dtype ToTuttiDtype(at::ScalarType type);

// Fails unless `tensor` is a defined, dense CPU or CUDA tensor of a supported dtype.
void CheckTensor(const at::Tensor& tensor, const char* op);

// A tutti_tensor describing a contiguous tensor. Its shape points into the tensor's own
// sizes (no copy per tensor of a grouped request), so it is valid while the tensor lives.
tutti_tensor ViewOf(const at::Tensor& tensor);

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_REQUEST_SUPPORT_H_
