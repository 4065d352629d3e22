#include "kernels/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tutti {
namespace {

// Reduces two buffers of the same type with `op` and returns the result.
template <typename T>
std::vector<T> Reduce(tutti_dtype dtype, tutti_reduce_op op, std::vector<T> a,
                      const std::vector<T>& b) {
  ReduceInto(dtype, op, a.data(), b.data(), a.size());
  return a;
}

template <typename T>
void CheckArithmetic(tutti_dtype dtype) {
  std::vector<T> a = {1, 5, 3, 0}, b = {4, 2, 3, 7};
  EXPECT_EQ(Reduce(dtype, TUTTI_REDUCE_SUM, a, b), (std::vector<T>{5, 7, 6, 7})) << DtypeName(dtype);
  EXPECT_EQ(Reduce(dtype, TUTTI_REDUCE_MIN, a, b), (std::vector<T>{1, 2, 3, 0})) << DtypeName(dtype);
  EXPECT_EQ(Reduce(dtype, TUTTI_REDUCE_MAX, a, b), (std::vector<T>{4, 5, 3, 7})) << DtypeName(dtype);
  EXPECT_EQ(Reduce(dtype, TUTTI_REDUCE_PRODUCT, a, b), (std::vector<T>{4, 10, 9, 0}))
      << DtypeName(dtype);
}

TEST(ReduceKernelsTest, IntegerAndFloatTypes) {
  CheckArithmetic<uint8_t>(TUTTI_UINT8);
  CheckArithmetic<int8_t>(TUTTI_INT8);
  CheckArithmetic<uint16_t>(TUTTI_UINT16);
  CheckArithmetic<int16_t>(TUTTI_INT16);
  CheckArithmetic<int32_t>(TUTTI_INT32);
  CheckArithmetic<int64_t>(TUTTI_INT64);
  CheckArithmetic<float>(TUTTI_FLOAT32);
  CheckArithmetic<double>(TUTTI_FLOAT64);
}

TEST(ReduceKernelsTest, NegativeValues) {
  std::vector<int8_t> a = {-3, 4}, b = {2, -5};
  EXPECT_EQ(Reduce(TUTTI_INT8, TUTTI_REDUCE_MIN, a, b), (std::vector<int8_t>{-3, -5}));
  EXPECT_EQ(Reduce(TUTTI_INT8, TUTTI_REDUCE_PRODUCT, a, b), (std::vector<int8_t>{-6, -20}));
  std::vector<double> c = {-1.5}, d = {-2.5};
  EXPECT_EQ(Reduce(TUTTI_FLOAT64, TUTTI_REDUCE_MAX, c, d), (std::vector<double>{-1.5}));
}

TEST(ReduceKernelsTest, IntegersWrapOnOverflow) {
  EXPECT_EQ(Reduce<uint8_t>(TUTTI_UINT8, TUTTI_REDUCE_SUM, {250}, {10}), (std::vector<uint8_t>{4}));
  EXPECT_EQ(Reduce<int8_t>(TUTTI_INT8, TUTTI_REDUCE_SUM, {127}, {1}), (std::vector<int8_t>{-128}));
  EXPECT_EQ(Reduce<uint16_t>(TUTTI_UINT16, TUTTI_REDUCE_PRODUCT, {65535}, {65535}),
            (std::vector<uint16_t>{1}));
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Reduce<int32_t>(TUTTI_INT32, TUTTI_REDUCE_SUM, {max32}, {1}),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Reduce<int64_t>(TUTTI_INT64, TUTTI_REDUCE_SUM, {max64}, {1}),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
}

TEST(ReduceKernelsTest, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (tutti_reduce_op op : {TUTTI_REDUCE_MIN, TUTTI_REDUCE_MAX}) {
    EXPECT_TRUE(std::isnan(Reduce<float>(TUTTI_FLOAT32, op, {nan}, {1.0f})[0]));
    EXPECT_TRUE(std::isnan(Reduce<float>(TUTTI_FLOAT32, op, {1.0f}, {nan})[0]));
  }
}

TEST(ReduceKernelsTest, Bool) {
  std::vector<uint8_t> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  const std::vector<uint8_t> logical_or = {0, 1, 1, 1}, logical_and = {0, 0, 0, 1};
  EXPECT_EQ(Reduce(TUTTI_BOOL, TUTTI_REDUCE_SUM, a, b), logical_or);
  EXPECT_EQ(Reduce(TUTTI_BOOL, TUTTI_REDUCE_MAX, a, b), logical_or);
  EXPECT_EQ(Reduce(TUTTI_BOOL, TUTTI_REDUCE_MIN, a, b), logical_and);
  EXPECT_EQ(Reduce(TUTTI_BOOL, TUTTI_REDUCE_PRODUCT, a, b), logical_and);
  // Any non-zero byte is true; results are normalised to 0/1.
  EXPECT_EQ(Reduce<uint8_t>(TUTTI_BOOL, TUTTI_REDUCE_SUM, {2}, {0}), (std::vector<uint8_t>{1}));
}

std::vector<uint16_t> Halves(std::vector<float> values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(FloatToHalf(v));
  return out;
}

TEST(ReduceKernelsTest, Float16UsesFloat32PerStep) {
  // 2048 + 1 = 2049 rounds to 2048 (ties to even) in half precision.
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_SUM, Halves({2048}), Halves({1})),
            Halves({2048}));
  // 2048 + 3 = 2051 rounds to 2052.
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_SUM, Halves({2048}), Halves({3})),
            Halves({2052}));
  // The exact float32 product of two halves is rounded once to half.
  float x = HalfToFloat(FloatToHalf(1.1f)), y = HalfToFloat(FloatToHalf(1.3f));
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_PRODUCT, Halves({x}), Halves({y})),
            Halves({x * y}));
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_MIN, Halves({-1, 2}), Halves({3, -4})),
            Halves({-1, -4}));
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_MAX, Halves({-1, 2}), Halves({3, -4})),
            Halves({3, 2}));
  // Overflow goes to infinity.
  EXPECT_EQ(Reduce(TUTTI_FLOAT16, TUTTI_REDUCE_SUM, Halves({60000}), Halves({60000})),
            std::vector<uint16_t>{0x7c00});
}

TEST(ReduceKernelsTest, BFloat16UsesFloat32PerStep) {
  auto bf = [](std::vector<float> values) {
    std::vector<uint16_t> out;
    for (float v : values) out.push_back(FloatToBFloat16(v));
    return out;
  };
  // 256 + 1 = 257 rounds to 256 (8 significant bits, ties to even); 256 + 3 -> 260.
  EXPECT_EQ(Reduce(TUTTI_BFLOAT16, TUTTI_REDUCE_SUM, bf({256, 256}), bf({1, 3})), bf({256, 260}));
  EXPECT_EQ(Reduce(TUTTI_BFLOAT16, TUTTI_REDUCE_PRODUCT, bf({3, -2}), bf({5, 0.5})),
            bf({15, -1}));
  EXPECT_EQ(Reduce(TUTTI_BFLOAT16, TUTTI_REDUCE_MIN, bf({3, -2}), bf({5, 0.5})), bf({3, -2}));
  EXPECT_EQ(Reduce(TUTTI_BFLOAT16, TUTTI_REDUCE_MAX, bf({3, -2}), bf({5, 0.5})), bf({5, 0.5}));
}

TEST(ReduceKernelsTest, ScaleFloat32MultipliesByTheFloatScale) {
  // Horovod 0.28.1 rounds the scale to float and multiplies in float: 9 * float(0.1) is
  // 0.90000004f, where double arithmetic rounded once would give 0.9f.
  std::vector<float> f = {9};
  ScaleInPlace(TUTTI_FLOAT32, f.data(), 1, 0.1);
  EXPECT_EQ(f[0], 9.0f * static_cast<float>(0.1));
  EXPECT_NE(f[0], 0.9f);
  std::vector<uint16_t> h = Halves({9});
  ScaleInPlace(TUTTI_FLOAT16, h.data(), 1, 0.1);
  EXPECT_EQ(h, Halves({9.0f * static_cast<float>(0.1)}));
}

TEST(ReduceKernelsTest, ScaleFloats) {
  std::vector<float> f = {1, 3, -5};
  ScaleInPlace(TUTTI_FLOAT32, f.data(), f.size(), 0.5);
  EXPECT_EQ(f, (std::vector<float>{0.5f, 1.5f, -2.5f}));
  ScaleInPlace(TUTTI_FLOAT32, f.data(), f.size(), 1.0, 3);
  EXPECT_EQ(f[1], 0.5f);
  std::vector<double> d = {1};
  ScaleInPlace(TUTTI_FLOAT64, d.data(), 1, 1.0, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  std::vector<uint16_t> h = Halves({1});
  ScaleInPlace(TUTTI_FLOAT16, h.data(), 1, 1.0, 3);
  EXPECT_EQ(h, Halves({1.0f / 3.0f}));
  std::vector<uint16_t> b = {FloatToBFloat16(3)};
  ScaleInPlace(TUTTI_BFLOAT16, b.data(), 1, 2.0);
  EXPECT_EQ(BFloat16ToFloat(b[0]), 6.0f);
}

TEST(ReduceKernelsTest, ScaleIntegersTruncatesTowardZeroAndSaturates) {
  // Horovod 0.28.1: (postscale / size) * x in double, converted to the integer type.
  std::vector<int32_t> i = {5, -5, 7, 1, -3, 3, 5, -7};
  ScaleInPlace(TUTTI_INT32, i.data(), i.size(), 1.0, 2);
  EXPECT_EQ(i, (std::vector<int32_t>{2, -2, 3, 0, -1, 1, 2, -3}));
  // The factor is divided first: 3 * (1.0 / 3) is 1 in double, 6 * (0.9 / 3) is 1.7999...
  std::vector<int64_t> thirds = {3, -3, 6};
  ScaleInPlace(TUTTI_INT64, thirds.data(), thirds.size(), 1.0, 3);
  EXPECT_EQ(thirds, (std::vector<int64_t>{1, -1, 2}));
  std::vector<int16_t> pre = {7, -7};
  ScaleInPlace(TUTTI_INT16, pre.data(), pre.size(), 0.3);  // 2.1, -2.1
  EXPECT_EQ(pre, (std::vector<int16_t>{2, -2}));
  std::vector<uint8_t> u = {200, 10};
  ScaleInPlace(TUTTI_UINT8, u.data(), u.size(), 2.0);
  EXPECT_EQ(u, (std::vector<uint8_t>{255, 20}));
  ScaleInPlace(TUTTI_UINT8, u.data(), u.size(), -1.0);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  std::vector<int8_t> s = {100, -100};
  ScaleInPlace(TUTTI_INT8, s.data(), s.size(), 3.0);
  EXPECT_EQ(s, (std::vector<int8_t>{127, -128}));
  std::vector<int64_t> big = {std::numeric_limits<int64_t>::max()};
  ScaleInPlace(TUTTI_INT64, big.data(), 1, 1.0);  // factor 1: untouched, no precision loss
  EXPECT_EQ(big[0], std::numeric_limits<int64_t>::max());
  ScaleInPlace(TUTTI_INT64, big.data(), 1, 4.0);
  EXPECT_EQ(big[0], std::numeric_limits<int64_t>::max());
}

TEST(ReduceKernelsTest, CheckReduction) {
  EXPECT_TRUE(CheckReduction(TUTTI_FLOAT32, TUTTI_REDUCE_AVERAGE, 0.5, 2).ok());
  EXPECT_TRUE(CheckReduction(TUTTI_INT32, TUTTI_REDUCE_AVERAGE, 1, 1).ok());
  EXPECT_TRUE(CheckReduction(TUTTI_BOOL, TUTTI_REDUCE_PRODUCT, 1, 1).ok());
  Status s = CheckReduction(TUTTI_BOOL, TUTTI_REDUCE_AVERAGE, 1, 1);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("bool"), std::string::npos);
  EXPECT_EQ(CheckReduction(TUTTI_BOOL, TUTTI_REDUCE_SUM, 2, 1).code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CheckReduction(static_cast<tutti_dtype>(11), TUTTI_REDUCE_SUM, 1, 1).code(),
            TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CheckReduction(TUTTI_FLOAT32, static_cast<tutti_reduce_op>(7), 1, 1).code(),
            TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CheckReduction(TUTTI_FLOAT32, TUTTI_REDUCE_SUM, std::nan(""), 1).code(),
            TUTTI_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tutti
