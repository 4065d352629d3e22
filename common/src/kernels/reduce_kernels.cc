#include "kernels/reduce_kernels.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/adasum.h"

namespace tutti {
namespace {

// C++'s conversion of a double to an integer (truncation toward zero, as Horovod's
// `output = scale * input` does), made total: NaN gives 0 and values beyond the type's range
// saturate instead of being undefined. int64's bounds are not exact in double, so the
// comparison clamps at or beyond them.
template <typename T>
T TruncateToInteger(double value) {
  if (std::isnan(value)) return 0;
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (value <= lo) return std::numeric_limits<T>::min();
  if (value >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

// x * scale in the arithmetic Horovod 0.28.1 uses per dtype (see reduce_kernels.h).
template <typename Kind, typename Storage>
struct Scaler {
  static Storage Apply(Storage x, double scale) {
    if constexpr (std::is_integral<Storage>::value) {
      return TruncateToInteger<Storage>(scale * static_cast<double>(x));
    } else if constexpr (std::is_same<Storage, float>::value) {
      return static_cast<float>(scale) * x;
    } else {
      return scale * x;
    }
  }
};
template <>
struct Scaler<Float16Tag, uint16_t> {
  static uint16_t Apply(uint16_t x, double scale) {
    return FloatToHalf(static_cast<float>(scale) * HalfToFloat(x));
  }
};
template <>
struct Scaler<BFloat16Tag, uint16_t> {
  static uint16_t Apply(uint16_t x, double scale) {
    return FloatToBFloat16(static_cast<float>(scale) * BFloat16ToFloat(x));
  }
};
template <>
struct Scaler<BoolTag, uint8_t> {
  static uint8_t Apply(uint8_t x, double) { return x; }  // rejected by CheckReduction
};

}  // namespace

Status CheckReduction(tutti_dtype dtype, tutti_reduce_op op, double prescale, double postscale) {
  if (!IsValidDtype(dtype)) {
    return Status::InvalidArgument("invalid dtype " + std::to_string(static_cast<int>(dtype)));
  }
  if (!IsValidReduceOp(op)) {
    return Status::InvalidArgument("invalid reduce op " + std::to_string(static_cast<int>(op)));
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return Status::InvalidArgument("prescale and postscale must be finite");
  }
  if (op == TUTTI_REDUCE_ADASUM && !adasum::SupportsDtype(dtype)) {
    return Status::InvalidArgument(std::string("ADASUM is defined for float16, float32 and "
                                               "float64 tensors only, not ") + DtypeName(dtype));
  }
  if (dtype == TUTTI_BOOL) {
    if (op == TUTTI_REDUCE_AVERAGE) {
      return Status::InvalidArgument(
          "AVERAGE is not defined for bool tensors; use SUM or MAX (logical or) or MIN or "
          "PRODUCT (logical and)");
    }
    if (prescale != 1.0 || postscale != 1.0) {
      return Status::InvalidArgument("prescale and postscale are not defined for bool tensors");
    }
  }
  return Status::OK();
}

void ReduceInto(tutti_dtype dtype, tutti_reduce_op op, void* inout, const void* in,
                size_t count) {
  DispatchDtype(dtype, [&](auto d) {
    using Storage = typename DtypeInfo<decltype(d)::value>::Storage;
    DispatchReduceOp(op, [&](auto o) {
      ReduceTyped<decltype(d)::value, decltype(o)::value>(
          static_cast<Storage*>(inout), static_cast<const Storage*>(in), count);
    });
  });
}

void ScaleInPlace(tutti_dtype dtype, void* data, size_t count, double factor, int divisor) {
  if (factor == 1.0 && divisor == 1) return;
  // One factor, divided once (Horovod divides the postscale factor by the set size), then
  // one multiplication per element, which vectorises.
  const double scale = divisor == 1 ? factor : factor / divisor;
  DispatchDtype(dtype, [&](auto d) {
    using Info = DtypeInfo<decltype(d)::value>;
    using Storage = typename Info::Storage;
    Storage* values = static_cast<Storage*>(data);
    for (size_t i = 0; i < count; ++i) {
      values[i] = Scaler<typename Info::Kind, Storage>::Apply(values[i], scale);
    }
  });
}

}  // namespace tutti
