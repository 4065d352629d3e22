// Views of TensorFlow tensors in the core's C ABI terms.
#ifndef TUTTI_TENSORFLOW_TENSOR_VIEW_H_
#define TUTTI_TENSORFLOW_TENSOR_VIEW_H_

#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tutti/c_api.h"

namespace tutti {
namespace tensorflow_plugin {

// The tutti_dtype of a TensorFlow dtype; an InvalidArgument status for a dtype the core
// cannot reduce.
absl::Status ToTuttiDtype(::tensorflow::DataType dtype, tutti_dtype* out);

// A tutti_tensor over a TensorFlow tensor's buffer. It owns the shape array that the view
// points to, so it must outlive every C call that receives `view()`.
class TensorView {
 public:
  TensorView(const ::tensorflow::Tensor& tensor, tutti_dtype dtype);
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  const tutti_tensor* view() const { return &view_; }

 private:
  std::vector<int64_t> shape_;
  tutti_tensor view_;
};

}  // namespace tensorflow_plugin
}  // namespace tutti

#endif  // TUTTI_TENSORFLOW_TENSOR_VIEW_H_
