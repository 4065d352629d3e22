// How a request maps onto NCCL: element type, reduction, and whether NCCL can run it at all
// (when it cannot, the staged path does; see device_executor.h).
#ifndef TUTTI_SRC_GPU_NCCL_TYPES_H_
#define TUTTI_SRC_GPU_NCCL_TYPES_H_

#include <cstdint>
#include <string>

#include "gpu/cuda_decls.h"
#include "tutti/c_api.h"

namespace tutti {
namespace gpu {

// ncclDataType_t for a dtype in reductions; false for dtypes NCCL cannot reduce (uint16,
// int16; bool is reduced as uint8, see NcclReduction).
bool NcclReduceType(tutti_dtype dtype, int* nccl_type);

// How an allreduce or reducescatter runs on NCCL: the op, and the scalar a PreMulSum op
// multiplies every input by before summing (scaling == false: none).
struct NcclReduction {
  int op = kNcclSum;
  bool scaling = false;
  double scalar = 1.0;
};

// Plans the reduction of `dtype` with `op`, prescale and postscale over `set_size` ranks, or
// returns false with the reason NCCL cannot do it exactly as the host path does:
//  - AVERAGE of floats: ncclAvg, or one PreMulSum by prescale * postscale / set_size
//    (sum(a * x) * b == sum(a * b * x));
//  - SUM of floats with scale factors: PreMulSum by prescale * postscale;
//  - integers: SUM/MIN/MAX/PRODUCT without scale factors (integer averages and scaling
//    round differently, so they stay on the host path);
//  - bool: uint8 MAX for SUM and MAX (logical or), MIN for MIN and PRODUCT (logical and);
//  - MIN/MAX/PRODUCT with scale factors: not on NCCL.
bool PlanNcclReduction(tutti_dtype dtype, tutti_reduce_op op, double prescale, double postscale,
                       int set_size, NcclReduction* plan, std::string* why_not);

// The PreMulSum scalar in the dtype's own representation (NCCL reads sizeof(dtype) bytes).
void EncodeScalar(tutti_dtype dtype, double value, uint64_t* storage);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_NCCL_TYPES_H_
