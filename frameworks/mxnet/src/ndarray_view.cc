#include "ndarray_view.h"

#include <mshadow/base.h>

namespace tutti_mxnet {
namespace {

constexpr int kDefaultStorage = 0;  // mxnet::NDArrayStorageType::kDefaultStorage

// Message of the MXNet C API call that just failed on this thread.
std::string MXNetFailure(const char* what) {
  return std::string(what) + " failed: " + MXGetLastError();
}

}  // namespace

int TuttiDtype(int mxnet_dtype) {
  switch (mxnet_dtype) {
    case mshadow::kUint8: return TUTTI_UINT8;
    case mshadow::kInt8: return TUTTI_INT8;
    case mshadow::kUint16: return TUTTI_UINT16;
    case mshadow::kInt16: return TUTTI_INT16;
    case mshadow::kInt32: return TUTTI_INT32;
    case mshadow::kInt64: return TUTTI_INT64;
    case mshadow::kFloat16: return TUTTI_FLOAT16;
    case mshadow::kBfloat16: return TUTTI_BFLOAT16;
    case mshadow::kFloat32: return TUTTI_FLOAT32;
    case mshadow::kFloat64: return TUTTI_FLOAT64;
    case mshadow::kBool: return TUTTI_BOOL;
    default: return -1;
  }
}

bool NDArrayView::Read(NDArrayHandle array, std::string* error) {
  int storage = -1;
  if (MXNDArrayGetStorageType(array, &storage) != 0) {
    *error = MXNetFailure("MXNDArrayGetStorageType");
    return false;
  }
  if (storage != kDefaultStorage) {
    *error = "only dense NDArrays can be reduced; convert sparse arrays with tostype('default')";
    return false;
  }
  int mxnet_dtype = -1;
  if (MXNDArrayGetDType(array, &mxnet_dtype) != 0) {
    *error = MXNetFailure("MXNDArrayGetDType");
    return false;
  }
  const int dtype = TuttiDtype(mxnet_dtype);
  if (dtype < 0) {
    *error = "MXNet dtype code " + std::to_string(mxnet_dtype) + " is not supported by tutti";
    return false;
  }
  int ndim = 0;
  const int* dims = nullptr;
  if (MXNDArrayGetShapeEx(array, &ndim, &dims) != 0) {
    *error = MXNetFailure("MXNDArrayGetShapeEx");
    return false;
  }
  if (ndim < 0) {
    *error = "the NDArray has an unknown shape";
    return false;
  }
  void* data = nullptr;  // includes the offset of a slice; allocates a delayed array
  if (MXNDArrayGetData(array, &data) != 0) {
    *error = MXNetFailure("MXNDArrayGetData");
    return false;
  }
  shape_.assign(dims, dims + ndim);
  tensor_.data = data;
  tensor_.dtype = static_cast<tutti_dtype>(dtype);
  tensor_.ndim = ndim;
  tensor_.shape = shape_.empty() ? nullptr : shape_.data();
  return true;
}

}  // namespace tutti_mxnet
