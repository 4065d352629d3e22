#include "gpu/nccl_types.h"

#include <cstring>

#include "base/dtype.h"

namespace tutti {
namespace gpu {
namespace {

bool IsFloat(tutti_dtype dtype) {
  return dtype == TUTTI_FLOAT16 || dtype == TUTTI_BFLOAT16 || dtype == TUTTI_FLOAT32 ||
         dtype == TUTTI_FLOAT64;
}

}  // namespace

bool NcclReduceType(tutti_dtype dtype, int* nccl_type) {
  switch (dtype) {
    case TUTTI_UINT8: *nccl_type = kNcclUint8; return true;
    case TUTTI_BOOL: *nccl_type = kNcclUint8; return true;
    case TUTTI_INT8: *nccl_type = kNcclInt8; return true;
    case TUTTI_INT32: *nccl_type = kNcclInt32; return true;
    case TUTTI_INT64: *nccl_type = kNcclInt64; return true;
    case TUTTI_FLOAT16: *nccl_type = kNcclFloat16; return true;
    case TUTTI_BFLOAT16: *nccl_type = kNcclBfloat16; return true;
    case TUTTI_FLOAT32: *nccl_type = kNcclFloat32; return true;
    case TUTTI_FLOAT64: *nccl_type = kNcclFloat64; return true;
    case TUTTI_UINT16:
    case TUTTI_INT16:
      return false;
  }
  return false;
}

bool PlanNcclReduction(tutti_dtype dtype, tutti_reduce_op op, double prescale, double postscale,
                       int set_size, NcclReduction* plan, std::string* why_not) {
  int type;
  if (!NcclReduceType(dtype, &type)) {
    *why_not = std::string("NCCL has no ") + DtypeName(dtype) + " reductions";
    return false;
  }
  const bool scaled = prescale != 1.0 || postscale != 1.0;
  *plan = NcclReduction();
  if (dtype == TUTTI_BOOL) {
    // Validation already refuses scale factors and AVERAGE on bool.
    plan->op = (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_MAX) ? kNcclMax : kNcclMin;
    return true;
  }
  if (op == TUTTI_REDUCE_MIN || op == TUTTI_REDUCE_MAX || op == TUTTI_REDUCE_PRODUCT) {
    if (scaled) {
      *why_not = "NCCL cannot scale a MIN, MAX or PRODUCT";
      return false;
    }
    plan->op = op == TUTTI_REDUCE_MIN ? kNcclMin : op == TUTTI_REDUCE_MAX ? kNcclMax : kNcclProd;
    return true;
  }
  const bool average = op == TUTTI_REDUCE_AVERAGE;
  if (!IsFloat(dtype)) {
    if (average || scaled) {
      *why_not = "integer averages and scale factors round on the host path";
      return false;
    }
    plan->op = kNcclSum;
    return true;
  }
  const double scalar = prescale * postscale / (average ? set_size : 1);
  if (average && !scaled) {
    plan->op = kNcclAvg;
  } else if (scalar == 1.0) {
    plan->op = kNcclSum;
  } else {
    plan->op = kNcclSum;
    plan->scaling = true;
    plan->scalar = scalar;
  }
  return true;
}

void EncodeScalar(tutti_dtype dtype, double value, uint64_t* storage) {
  *storage = 0;
  switch (dtype) {
    case TUTTI_FLOAT16: {
      uint16_t bits = FloatToHalf(static_cast<float>(value));
      std::memcpy(storage, &bits, sizeof bits);
      break;
    }
    case TUTTI_BFLOAT16: {
      uint16_t bits = FloatToBFloat16(static_cast<float>(value));
      std::memcpy(storage, &bits, sizeof bits);
      break;
    }
    case TUTTI_FLOAT32: {
      float f = static_cast<float>(value);
      std::memcpy(storage, &f, sizeof f);
      break;
    }
    default:
      std::memcpy(storage, &value, sizeof value);
      break;
  }
}

}  // namespace gpu
}  // namespace tutti
