// Elementwise reduction and scaling kernels for every dtype.
//
// Semantics shared by all transports:
// - float16/bfloat16 are widened to float32 for each pairwise step and rounded back (nearest,
//   ties to even), so a reduction adds no rounding beyond the dtype's own.
// - Integers wrap around on overflow (two's complement), as MPI does.
// - bool: SUM and MAX are logical or, MIN and PRODUCT logical and; results are 0 or 1.
// - Floating-point MIN/MAX propagate NaN.
// - Scaling (prescale before the reduction on each rank; postscale, with AVERAGE's division by
//   the set size folded into it, after) gives Horovod 0.28.1's results bit for bit: the scale
//   is factor / divisor in double; integers are multiplied in double and truncated toward
//   zero (so an int32 average of -3 over 2 ranks is -1), saturating at the dtype's range
//   (NaN becomes 0) where Horovod's conversion is undefined; float16, bfloat16 and float32
//   multiply by the scale rounded to float, in float; float64 in double. int64 values beyond
//   2^53 lose precision when scaled, so a factor of exactly 1 with divisor 1 leaves the
//   buffer untouched.
#ifndef TUTTI_SRC_REDUCE_KERNELS_H_
#define TUTTI_SRC_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "base/status.h"
#include "tutti/c_api.h"

namespace tutti {

// Checks that `op` with these scale factors is defined for `dtype`.
Status CheckReduction(tutti_dtype dtype, tutti_reduce_op op, double prescale, double postscale);

// inout[i] = inout[i] (op) in[i]. `op` is SUM, MIN, MAX or PRODUCT (AVERAGE is a SUM followed
// by scaling, done by the caller).
void ReduceInto(tutti_dtype dtype, tutti_reduce_op op, void* inout, const void* in, size_t count);

// data[i] = (factor / divisor) * data[i], in the arithmetic described above.
void ScaleInPlace(tutti_dtype dtype, void* data, size_t count, double factor, int divisor = 1);

// ---- typed kernels, shared with transports that need a plain function per (dtype, op) ----

struct Float16Tag {};
struct BFloat16Tag {};
struct BoolTag {};

// Storage type of each dtype, and the tag used to pick its arithmetic.
template <tutti_dtype D> struct DtypeInfo;
template <> struct DtypeInfo<TUTTI_UINT8> { using Storage = uint8_t; using Kind = uint8_t; };
template <> struct DtypeInfo<TUTTI_INT8> { using Storage = int8_t; using Kind = int8_t; };
template <> struct DtypeInfo<TUTTI_UINT16> { using Storage = uint16_t; using Kind = uint16_t; };
template <> struct DtypeInfo<TUTTI_INT16> { using Storage = int16_t; using Kind = int16_t; };
template <> struct DtypeInfo<TUTTI_INT32> { using Storage = int32_t; using Kind = int32_t; };
template <> struct DtypeInfo<TUTTI_INT64> { using Storage = int64_t; using Kind = int64_t; };
template <> struct DtypeInfo<TUTTI_FLOAT16> { using Storage = uint16_t; using Kind = Float16Tag; };
template <> struct DtypeInfo<TUTTI_BFLOAT16> { using Storage = uint16_t; using Kind = BFloat16Tag; };
template <> struct DtypeInfo<TUTTI_FLOAT32> { using Storage = float; using Kind = float; };
template <> struct DtypeInfo<TUTTI_FLOAT64> { using Storage = double; using Kind = double; };
template <> struct DtypeInfo<TUTTI_BOOL> { using Storage = uint8_t; using Kind = BoolTag; };

namespace kernels {

template <typename T>
inline T FloatMin(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return b < a ? b : a;
}
template <typename T>
inline T FloatMax(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? b : a;
}

// Arithmetic per kind. Integers compute in an unsigned type at least as wide as int so that
// overflow wraps instead of being undefined.
template <typename Kind, typename Enable = void>
struct Arith;

template <typename T>
struct Arith<T, typename std::enable_if<std::is_integral<T>::value>::type> {
  using Wide = typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned,
                                         typename std::make_unsigned<T>::type>::type;
  static T Sum(T a, T b) { return static_cast<T>(static_cast<Wide>(a) + static_cast<Wide>(b)); }
  static T Product(T a, T b) {
    return static_cast<T>(static_cast<Wide>(a) * static_cast<Wide>(b));
  }
  static T Min(T a, T b) { return b < a ? b : a; }
  static T Max(T a, T b) { return a < b ? b : a; }
};

template <typename T>
struct Arith<T, typename std::enable_if<std::is_floating_point<T>::value>::type> {
  static T Sum(T a, T b) { return a + b; }
  static T Product(T a, T b) { return a * b; }
  static T Min(T a, T b) { return FloatMin(a, b); }
  static T Max(T a, T b) { return FloatMax(a, b); }
};

// float16 and bfloat16: widen, combine in float32, round back.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct NarrowFloatArith {
  static uint16_t Sum(uint16_t a, uint16_t b) { return FromFloat(ToFloat(a) + ToFloat(b)); }
  static uint16_t Product(uint16_t a, uint16_t b) { return FromFloat(ToFloat(a) * ToFloat(b)); }
  static uint16_t Min(uint16_t a, uint16_t b) { return FromFloat(FloatMin(ToFloat(a), ToFloat(b))); }
  static uint16_t Max(uint16_t a, uint16_t b) { return FromFloat(FloatMax(ToFloat(a), ToFloat(b))); }
};
template <>
struct Arith<Float16Tag> : NarrowFloatArith<HalfToFloat, FloatToHalf> {};
template <>
struct Arith<BFloat16Tag> : NarrowFloatArith<BFloat16ToFloat, FloatToBFloat16> {};

template <>
struct Arith<BoolTag> {
  static uint8_t Sum(uint8_t a, uint8_t b) { return (a != 0 || b != 0) ? 1 : 0; }
  static uint8_t Max(uint8_t a, uint8_t b) { return Sum(a, b); }
  static uint8_t Product(uint8_t a, uint8_t b) { return (a != 0 && b != 0) ? 1 : 0; }
  static uint8_t Min(uint8_t a, uint8_t b) { return Product(a, b); }
};

}  // namespace kernels

// x[i] = x[i] (OP) y[i] for dtype D; OP is SUM, MIN, MAX or PRODUCT. Its signature matches
// what Gloo's ReductionFunction and MPI user-defined ops need (after a cast).
template <tutti_dtype D, tutti_reduce_op OP>
void ReduceTyped(typename DtypeInfo<D>::Storage* x, const typename DtypeInfo<D>::Storage* y,
                 size_t n) {
  using A = kernels::Arith<typename DtypeInfo<D>::Kind>;
  for (size_t i = 0; i < n; ++i) {
    switch (OP) {
      case TUTTI_REDUCE_MIN: x[i] = A::Min(x[i], y[i]); break;
      case TUTTI_REDUCE_MAX: x[i] = A::Max(x[i], y[i]); break;
      case TUTTI_REDUCE_PRODUCT: x[i] = A::Product(x[i], y[i]); break;
      default: x[i] = A::Sum(x[i], y[i]); break;
    }
  }
}

// Calls f(std::integral_constant<tutti_dtype, D>{}) for the runtime dtype.
template <typename F>
void DispatchDtype(tutti_dtype dtype, F&& f) {
  switch (dtype) {
#define TUTTI_DISPATCH_CASE(D) \
  case D: f(std::integral_constant<tutti_dtype, D>{}); break;
    TUTTI_DISPATCH_CASE(TUTTI_UINT8)
    TUTTI_DISPATCH_CASE(TUTTI_INT8)
    TUTTI_DISPATCH_CASE(TUTTI_UINT16)
    TUTTI_DISPATCH_CASE(TUTTI_INT16)
    TUTTI_DISPATCH_CASE(TUTTI_INT32)
    TUTTI_DISPATCH_CASE(TUTTI_INT64)
    TUTTI_DISPATCH_CASE(TUTTI_FLOAT16)
    TUTTI_DISPATCH_CASE(TUTTI_BFLOAT16)
    TUTTI_DISPATCH_CASE(TUTTI_FLOAT32)
    TUTTI_DISPATCH_CASE(TUTTI_FLOAT64)
    TUTTI_DISPATCH_CASE(TUTTI_BOOL)
#undef TUTTI_DISPATCH_CASE
  }
}

// Calls f(std::integral_constant<tutti_reduce_op, OP>{}) for SUM, MIN, MAX, PRODUCT.
template <typename F>
void DispatchReduceOp(tutti_reduce_op op, F&& f) {
  switch (op) {
    case TUTTI_REDUCE_MIN: f(std::integral_constant<tutti_reduce_op, TUTTI_REDUCE_MIN>{}); break;
    case TUTTI_REDUCE_MAX: f(std::integral_constant<tutti_reduce_op, TUTTI_REDUCE_MAX>{}); break;
    case TUTTI_REDUCE_PRODUCT:
      f(std::integral_constant<tutti_reduce_op, TUTTI_REDUCE_PRODUCT>{});
      break;
    default: f(std::integral_constant<tutti_reduce_op, TUTTI_REDUCE_SUM>{}); break;
  }
}

}  // namespace tutti

#endif  // TUTTI_SRC_REDUCE_KERNELS_H_
