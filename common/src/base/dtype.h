// Element types: sizes, names, and the float16/bfloat16 <-> float32 conversions.
#ifndef TUTTI_SRC_DTYPE_H_
#define TUTTI_SRC_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "tutti/c_api.h"

namespace tutti {

// True for the values defined by the ABI.
bool IsValidDtype(int dtype);

// Bytes per element; 0 for an invalid dtype.
size_t DtypeSize(tutti_dtype dtype);

// Lower-case name as numpy spells it ("float32", "bool"); "invalid" otherwise.
const char* DtypeName(tutti_dtype dtype);

bool IsValidReduceOp(int op);
const char* ReduceOpName(tutti_reduce_op op);

// IEEE 754 binary16. Conversion to half rounds to nearest, ties to even; NaN stays NaN.
float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);

// bfloat16: the upper 16 bits of a float32. Rounds to nearest, ties to even; NaN stays NaN.
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);

}  // namespace tutti

#endif  // TUTTI_SRC_DTYPE_H_
