#include "reduce_kernels.h"

#include <cmath>
#include <limits>
#include <string>

#include "adasum.h"

namespace tutti {
namespace {

template <typename T>
T RoundToInteger(double value) {
  if (std::isnan(value)) return 0;
  // Compare in double against the type's range; the bounds of int64 are not exact in double,
  // so clamp at or beyond them before converting.
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  double rounded = std::round(value);
  if (rounded <= lo) return std::numeric_limits<T>::min();
  if (rounded >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(rounded);
}

template <typename Kind, typename Storage>
struct Scaler {
  static Storage Apply(Storage x, double factor, int divisor) {
    const double scaled = static_cast<double>(x) * factor / divisor;
    if constexpr (std::is_integral<Storage>::value) {
      return RoundToInteger<Storage>(scaled);
    } else {
      return static_cast<Storage>(scaled);
    }
  }
};
template <>
struct Scaler<Float16Tag, uint16_t> {
  static uint16_t Apply(uint16_t x, double factor, int divisor) {
    return FloatToHalf(static_cast<float>(HalfToFloat(x) * factor / divisor));
  }
};
template <>
struct Scaler<BFloat16Tag, uint16_t> {
  static uint16_t Apply(uint16_t x, double factor, int divisor) {
    return FloatToBFloat16(static_cast<float>(BFloat16ToFloat(x) * factor / divisor));
  }
};
template <>
struct Scaler<BoolTag, uint8_t> {
  static uint8_t Apply(uint8_t x, double, int) { return x; }  // rejected by CheckReduction
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
  // The common case (gradients averaged in float32) as one multiplication per element, which
  // vectorises; a division per element costs several times the allreduce itself.
  if (dtype == TUTTI_FLOAT32) {
    const double multiplier = factor / divisor;
    float* values = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) {
      values[i] = static_cast<float>(static_cast<double>(values[i]) * multiplier);
    }
    return;
  }
  DispatchDtype(dtype, [&](auto d) {
    using Info = DtypeInfo<decltype(d)::value>;
    using Storage = typename Info::Storage;
    Storage* values = static_cast<Storage*>(data);
    for (size_t i = 0; i < count; ++i) {
      values[i] = Scaler<typename Info::Kind, Storage>::Apply(values[i], factor, divisor);
    }
  });
}

}  // namespace tutti
