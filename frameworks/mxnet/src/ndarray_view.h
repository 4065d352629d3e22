// Reads an MXNet NDArray through MXNet's C API into the core's tensor view.
#ifndef TUTTI_MXNET_NDARRAY_VIEW_H_
#define TUTTI_MXNET_NDARRAY_VIEW_H_

#include <mxnet/c_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace tutti_mxnet {

// The tutti_dtype for an mshadow type flag, or -1 when the core has no such type.
int TuttiDtype(int mxnet_dtype);

// A tutti_tensor together with the storage its `shape` points into. Not copyable: the
// view points into itself.
class NDArrayView {
 public:
  NDArrayView() = default;
  NDArrayView(const NDArrayView&) = delete;
  NDArrayView& operator=(const NDArrayView&) = delete;

  // Fills the view from `array`. Must run where the array's data may be touched, i.e.
  // inside an engine operation that depends on the array's variable. Returns false and
  // sets `error` for arrays the core cannot take (sparse, unsupported dtype, no data).
  bool Read(NDArrayHandle array, std::string* error);

  const tutti_tensor* tensor() const { return &tensor_; }

 private:
  std::vector<int64_t> shape_;
  tutti_tensor tensor_{};
};

}  // namespace tutti_mxnet

#endif  // TUTTI_MXNET_NDARRAY_VIEW_H_
