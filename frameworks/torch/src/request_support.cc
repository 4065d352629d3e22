#include "request_support.h"

#include <c10/util/Exception.h>

#include <stdexcept>

namespace tutti_torch {
namespace {

thread_local int64_t last_error_status = TUTTI_OK;

}  // namespace

void Fail(tutti_status status, const std::string& message) {
  last_error_status = status;
  TORCH_CHECK(false, message);
  throw std::logic_error("unreachable");  // TORCH_CHECK(false) always throws
}

int64_t TakeErrorStatus() {
  int64_t status = last_error_status;
  last_error_status = TUTTI_OK;
  return status;
}

tutti_dtype ToTuttiDtype(at::ScalarType type) {
  switch (type) {
    case at::kByte: return TUTTI_UINT8;
    case at::kChar: return TUTTI_INT8;
    case at::kUInt16: return TUTTI_UINT16;
    case at::kShort: return TUTTI_INT16;
    case at::kInt: return TUTTI_INT32;
    case at::kLong: return TUTTI_INT64;
    case at::kHalf: return TUTTI_FLOAT16;
    case at::kBFloat16: return TUTTI_BFLOAT16;
    case at::kFloat: return TUTTI_FLOAT32;
    case at::kDouble: return TUTTI_FLOAT64;
    case at::kBool: return TUTTI_BOOL;
    default:
      Fail(TUTTI_ERR_INVALID_ARGUMENT,
           "tutti does not support tensors of dtype torch." +
               std::string(c10::getDtypeNames(type).first) +
               "; supported: uint8, int8, uint16, int16, int32, int64, float16, bfloat16, "
               "float32, float64, bool");
  }
}

void CheckTensor(const at::Tensor& tensor, const char* op) {
  if (!tensor.defined()) Fail(TUTTI_ERR_INVALID_ARGUMENT, std::string(op) + ": tensor is undefined");
  if (tensor.layout() != at::kStrided) {
    Fail(TUTTI_ERR_INVALID_ARGUMENT,
         std::string(op) + ": only dense (strided) tensors are supported, got layout " +
             c10::str(tensor.layout()));
  }
  if (!tensor.device().is_cpu() && !tensor.device().is_cuda()) {
    Fail(TUTTI_ERR_UNSUPPORTED, std::string(op) + ": only CPU and CUDA tensors are supported, got "
                                    "a tensor on " + tensor.device().str() +
                                    "; move it with .cpu() or .cuda() first");
  }
  ToTuttiDtype(tensor.scalar_type());
}

tutti_tensor ViewOf(const at::Tensor& tensor) {
  tutti_tensor view{};
  view.data = tensor.data_ptr();
  view.dtype = ToTuttiDtype(tensor.scalar_type());
  view.ndim = static_cast<int32_t>(tensor.dim());
  view.shape = view.ndim == 0 ? nullptr : tensor.sizes().data();
  return view;
}

}  // namespace tutti_torch
