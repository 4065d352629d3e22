#include "base/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace tutti {
namespace {

TEST(DtypeTest, SizesAndNames) {
  EXPECT_EQ(DtypeSize(TUTTI_UINT8), 1u);
  EXPECT_EQ(DtypeSize(TUTTI_BOOL), 1u);
  EXPECT_EQ(DtypeSize(TUTTI_FLOAT16), 2u);
  EXPECT_EQ(DtypeSize(TUTTI_BFLOAT16), 2u);
  EXPECT_EQ(DtypeSize(TUTTI_INT32), 4u);
  EXPECT_EQ(DtypeSize(TUTTI_FLOAT64), 8u);
  EXPECT_EQ(DtypeSize(static_cast<tutti_dtype>(99)), 0u);
  EXPECT_STREQ(DtypeName(TUTTI_BFLOAT16), "bfloat16");
  EXPECT_STREQ(DtypeName(static_cast<tutti_dtype>(-1)), "invalid");
  EXPECT_TRUE(IsValidDtype(TUTTI_BOOL));
  EXPECT_FALSE(IsValidDtype(11));
  EXPECT_STREQ(ReduceOpName(TUTTI_REDUCE_PRODUCT), "product");
  EXPECT_STREQ(ReduceOpName(TUTTI_REDUCE_ADASUM), "adasum");
  EXPECT_TRUE(IsValidReduceOp(5));  // ADASUM
  EXPECT_FALSE(IsValidReduceOp(6));
}

TEST(DtypeTest, HalfExactValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
}

TEST(DtypeTest, HalfRoundsToNearestEven) {
  // 2049 lies halfway between 2048 and 2050 (spacing 2): ties go to the even mantissa 2048.
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.0f)), 2048.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(2051.0f)), 2052.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.5f)), 2050.0f);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // still rounds down to the largest finite
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // halfway to 65536: overflows to inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  // Subnormal ties: 1.5 * 2^-24 rounds to 2 * 2^-24; 0.5 * 2^-24 rounds to zero.
  EXPECT_EQ(FloatToHalf(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(FloatToHalf(0.5f * std::ldexp(1.0f, -24)), 0x0000);
  EXPECT_EQ(FloatToHalf(0.51f * std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DtypeTest, HalfRoundTripsEveryValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = HalfToFloat(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), h) << "bits 0x" << std::hex << bits;
  }
}

TEST(DtypeTest, HalfMatchesCompilerConversion) {
  // _Float16 conversions are IEEE round-to-nearest-even; compare on many float inputs.
  for (uint32_t bits = 0; bits < 0xffffffffu - 40503; bits += 40503) {
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    _Float16 expected = static_cast<_Float16>(f);
    uint16_t expected_bits;
    std::memcpy(&expected_bits, &expected, 2);
    ASSERT_EQ(FloatToHalf(f), expected_bits) << "float bits 0x" << std::hex << bits;
  }
}

TEST(DtypeTest, BFloat16) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::max()))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = BFloat16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBFloat16(f), bits);
  }
}

}  // namespace
}  // namespace tutti
