#include "base/dtype.h"

#include <cstring>

namespace tutti {

bool IsValidDtype(int dtype) { return dtype >= TUTTI_UINT8 && dtype <= TUTTI_BOOL; }

size_t DtypeSize(tutti_dtype dtype) {
  switch (dtype) {
    case TUTTI_UINT8:
    case TUTTI_INT8:
    case TUTTI_BOOL:
      return 1;
    case TUTTI_UINT16:
    case TUTTI_INT16:
    case TUTTI_FLOAT16:
    case TUTTI_BFLOAT16:
      return 2;
    case TUTTI_INT32:
    case TUTTI_FLOAT32:
      return 4;
    case TUTTI_INT64:
    case TUTTI_FLOAT64:
      return 8;
  }
  return 0;
}

const char* DtypeName(tutti_dtype dtype) {
  switch (dtype) {
    case TUTTI_UINT8: return "uint8";
    case TUTTI_INT8: return "int8";
    case TUTTI_UINT16: return "uint16";
    case TUTTI_INT16: return "int16";
    case TUTTI_INT32: return "int32";
    case TUTTI_INT64: return "int64";
    case TUTTI_FLOAT16: return "float16";
    case TUTTI_BFLOAT16: return "bfloat16";
    case TUTTI_FLOAT32: return "float32";
    case TUTTI_FLOAT64: return "float64";
    case TUTTI_BOOL: return "bool";
  }
  return "invalid";
}

bool IsValidReduceOp(int op) { return op >= TUTTI_REDUCE_AVERAGE && op <= TUTTI_REDUCE_ADASUM; }

const char* ReduceOpName(tutti_reduce_op op) {
  switch (op) {
    case TUTTI_REDUCE_AVERAGE: return "average";
    case TUTTI_REDUCE_SUM: return "sum";
    case TUTTI_REDUCE_MIN: return "min";
    case TUTTI_REDUCE_MAX: return "max";
    case TUTTI_REDUCE_PRODUCT: return "product";
    case TUTTI_REDUCE_ADASUM: return "adasum";
  }
  return "invalid";
}

namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN
    return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  uint32_t bits = FloatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN; keep NaN quiet and non-zero
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (abs >= 0x477ff000u) {  // rounds to a value beyond 65504
    return sign | 0x7c00u;
  }
  int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent < -14) {
    // Subnormal half (or zero): value = m * 2^-24 with m rounded to nearest even.
    if (exponent < -25) return sign;  // below half the smallest subnormal
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;  // 24 significant bits
    // value = mantissa * 2^(exponent - 23); in units of 2^-24 that is mantissa >> (-1 - exponent).
    int shift = -exponent - 1;
    uint32_t result = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal half: drop 13 mantissa bits with round to nearest even; a carry into the exponent
  // is the correct result.
  uint32_t rebased = abs - (112u << 23);
  uint32_t result = rebased >> 13;
  uint32_t remainder = rebased & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

float BFloat16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBFloat16(float value) {
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force a quiet payload
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace tutti
