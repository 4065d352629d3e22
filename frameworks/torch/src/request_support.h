// Helpers of the torch operators: error reporting, tensor checks, views for the
// core, and the automatic names of unnamed requests.
#ifndef TUTTI_TORCH_REQUEST_SUPPORT_H_
#define TUTTI_TORCH_REQUEST_SUPPORT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace tutti_torch {

// Raises c10::Error (RuntimeError in Python) with `message`, remembering `status` for
// TakeErrorStatus() on this thread.
[[noreturn]] void Fail(tutti_status status, const std::string& message);

// The status behind the latest Fail() on this thread (TUTTI_OK if none); resets it.
int64_t TakeErrorStatus();

// The core's element type for a torch dtype; fails for dtypes the core does not know.
tutti_dtype ToTuttiDtype(at::ScalarType type);

// Fails unless `tensor` is a defined, dense CPU or CUDA tensor of a supported dtype.
void CheckTensor(const at::Tensor& tensor, const char* op);

// A tutti_tensor describing a contiguous tensor; owns the shape array it points to.
struct TensorView {
  explicit TensorView(const at::Tensor& tensor);
  TensorView(const TensorView& other);
  TensorView& operator=(const TensorView&) = delete;
  std::vector<int64_t> shape;
  tutti_tensor view;
};

// Calls submit(name) with `name`, or, when it is empty, with the next automatic name for
// (kind, process_set). Unnamed requests are numbered in the order the core accepts them,
// so the names match across ranks as long as every rank makes its unnamed calls in the
// same order; a refused request takes no number.
tutti_status SubmitNamed(c10::string_view name, const std::string& kind, int32_t process_set,
                         const std::function<tutti_status(const std::string&)>& submit);

// Numbers unnamed requests from 0 again (after join, where ranks may have made different
// numbers of calls).
void RestartNumbering();

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_REQUEST_SUPPORT_H_
