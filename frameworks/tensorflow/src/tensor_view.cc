#include "tensor_view.h"

#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/errors.h"

namespace tutti {
namespace tensorflow_plugin {

namespace tf = ::tensorflow;

absl::Status ToTuttiDtype(tf::DataType dtype, tutti_dtype* out) {
  switch (dtype) {
    case tf::DT_UINT8: *out = TUTTI_UINT8; break;
    case tf::DT_INT8: *out = TUTTI_INT8; break;
    case tf::DT_UINT16: *out = TUTTI_UINT16; break;
    case tf::DT_INT16: *out = TUTTI_INT16; break;
    case tf::DT_INT32: *out = TUTTI_INT32; break;
    case tf::DT_INT64: *out = TUTTI_INT64; break;
    case tf::DT_HALF: *out = TUTTI_FLOAT16; break;
    case tf::DT_BFLOAT16: *out = TUTTI_BFLOAT16; break;
    case tf::DT_FLOAT: *out = TUTTI_FLOAT32; break;
    case tf::DT_DOUBLE: *out = TUTTI_FLOAT64; break;
    case tf::DT_BOOL: *out = TUTTI_BOOL; break;
    default:
      return tf::errors::InvalidArgument("tutti cannot reduce tensors of type ",
                                         tf::DataTypeString(dtype));
  }
  return absl::OkStatus();
}

TensorView::TensorView(const tf::Tensor& tensor, tutti_dtype dtype) {
  const tf::TensorShape& shape = tensor.shape();
  shape_.reserve(shape.dims());
  for (int i = 0; i < shape.dims(); ++i) shape_.push_back(shape.dim_size(i));
  // The core only reads and writes the buffer, hence the const_cast.
  view_.data = const_cast<char*>(tensor.tensor_data().data());
  view_.dtype = dtype;
  view_.ndim = static_cast<int32_t>(shape_.size());
  view_.shape = shape_.empty() ? nullptr : shape_.data();
}

}  // namespace tensorflow_plugin
}  // namespace tutti
