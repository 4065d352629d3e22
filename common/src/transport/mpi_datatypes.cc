#include "transport/mpi_datatypes.h"

#include "kernels/reduce_kernels.h"

namespace tutti {
namespace {

template <tutti_dtype D, tutti_reduce_op OP>
void MpiUserReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  using Storage = typename DtypeInfo<D>::Storage;
  ReduceTyped<D, OP>(static_cast<Storage*>(inout), static_cast<const Storage*>(in),
                     static_cast<size_t>(*len));
}

}  // namespace

MPI_Datatype StorageDatatype(tutti_dtype dtype) {
  switch (dtype) {
    case TUTTI_UINT8: return MPI_UINT8_T;
    case TUTTI_INT8: return MPI_INT8_T;
    case TUTTI_UINT16: return MPI_UINT16_T;
    case TUTTI_INT16: return MPI_INT16_T;
    case TUTTI_INT32: return MPI_INT32_T;
    case TUTTI_INT64: return MPI_INT64_T;
    case TUTTI_FLOAT16: return MPI_UINT16_T;
    case TUTTI_BFLOAT16: return MPI_UINT16_T;
    case TUTTI_FLOAT32: return MPI_FLOAT;
    case TUTTI_FLOAT64: return MPI_DOUBLE;
    case TUTTI_BOOL: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op BuiltinOp(tutti_dtype dtype, tutti_reduce_op op) {
  if (dtype == TUTTI_FLOAT16 || dtype == TUTTI_BFLOAT16) return MPI_OP_NULL;
  if (dtype == TUTTI_BOOL) {
    return (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_MAX) ? MPI_LOR : MPI_LAND;
  }
  bool is_float = dtype == TUTTI_FLOAT32 || dtype == TUTTI_FLOAT64;
  switch (op) {
    case TUTTI_REDUCE_SUM: return MPI_SUM;
    case TUTTI_REDUCE_PRODUCT: return MPI_PROD;
    case TUTTI_REDUCE_MIN: return is_float ? MPI_OP_NULL : MPI_MIN;
    case TUTTI_REDUCE_MAX: return is_float ? MPI_OP_NULL : MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

MPI_User_function* UserFunction(tutti_dtype dtype, tutti_reduce_op op) {
  MPI_User_function* fn = nullptr;
  DispatchDtype(dtype, [&](auto d) {
    DispatchReduceOp(op, [&](auto o) { fn = &MpiUserReduce<decltype(d)::value, decltype(o)::value>; });
  });
  return fn;
}

MPI_Datatype ElementDatatype(size_t element_size) {
  switch (element_size) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
  }
  return MPI_DATATYPE_NULL;
}

Status MpiCounts(const std::vector<int64_t>& counts, std::vector<int>* ints,
                 std::vector<int>* offsets) {
  int64_t total = 0;
  ints->clear();
  offsets->clear();
  for (int64_t c : counts) {
    offsets->push_back(static_cast<int>(total));
    ints->push_back(static_cast<int>(c));
    total += c;
    if (total > INT32_MAX) {
      return Status::Unsupported("the MPI controller moves at most 2^31-1 elements per "
                                 "allgather, alltoall or reducescatter");
    }
  }
  return Status::OK();
}

}  // namespace tutti
