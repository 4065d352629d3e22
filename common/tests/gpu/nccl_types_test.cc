// dtype and reduction mapping onto NCCL, and when a request must stay on the staged path.
#include "gpu/nccl_types.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tutti {
namespace gpu {
namespace {

TEST(NcclReduceType, EveryDtype) {
  const std::pair<tutti_dtype, int> expected[] = {
      {TUTTI_UINT8, kNcclUint8},     {TUTTI_INT8, kNcclInt8},       {TUTTI_INT32, kNcclInt32},
      {TUTTI_INT64, kNcclInt64},     {TUTTI_FLOAT16, kNcclFloat16}, {TUTTI_BFLOAT16, kNcclBfloat16},
      {TUTTI_FLOAT32, kNcclFloat32}, {TUTTI_FLOAT64, kNcclFloat64}, {TUTTI_BOOL, kNcclUint8},
  };
  for (const auto& e : expected) {
    int type = -1;
    EXPECT_TRUE(NcclReduceType(e.first, &type)) << e.first;
    EXPECT_EQ(type, e.second) << e.first;
  }
  int type;
  EXPECT_FALSE(NcclReduceType(TUTTI_UINT16, &type));
  EXPECT_FALSE(NcclReduceType(TUTTI_INT16, &type));
}

NcclReduction Plan(tutti_dtype d, tutti_reduce_op op, double pre, double post, int n,
                   bool expect_ok = true, std::string* why = nullptr) {
  NcclReduction plan;
  std::string reason;
  EXPECT_EQ(PlanNcclReduction(d, op, pre, post, n, &plan, &reason), expect_ok) << reason;
  if (why) *why = reason;
  return plan;
}

TEST(PlanNcclReduction, FloatAverageAndScaling) {
  NcclReduction p = Plan(TUTTI_FLOAT32, TUTTI_REDUCE_AVERAGE, 1, 1, 4);
  EXPECT_EQ(p.op, kNcclAvg);
  EXPECT_FALSE(p.scaling);
  p = Plan(TUTTI_BFLOAT16, TUTTI_REDUCE_AVERAGE, 2, 1, 4);
  EXPECT_EQ(p.op, kNcclSum);
  EXPECT_TRUE(p.scaling);
  EXPECT_DOUBLE_EQ(p.scalar, 0.5);
  p = Plan(TUTTI_FLOAT16, TUTTI_REDUCE_SUM, 0.5, 2, 3);  // scales cancel: a plain sum
  EXPECT_EQ(p.op, kNcclSum);
  EXPECT_FALSE(p.scaling);
  p = Plan(TUTTI_FLOAT64, TUTTI_REDUCE_SUM, 3, 1, 3);
  EXPECT_TRUE(p.scaling);
  EXPECT_DOUBLE_EQ(p.scalar, 3);
}

TEST(PlanNcclReduction, MinMaxProductAndIntegers) {
  EXPECT_EQ(Plan(TUTTI_FLOAT32, TUTTI_REDUCE_MIN, 1, 1, 2).op, kNcclMin);
  EXPECT_EQ(Plan(TUTTI_INT64, TUTTI_REDUCE_MAX, 1, 1, 2).op, kNcclMax);
  EXPECT_EQ(Plan(TUTTI_INT32, TUTTI_REDUCE_PRODUCT, 1, 1, 2).op, kNcclProd);
  EXPECT_EQ(Plan(TUTTI_UINT8, TUTTI_REDUCE_SUM, 1, 1, 2).op, kNcclSum);
  std::string why;
  Plan(TUTTI_FLOAT32, TUTTI_REDUCE_MAX, 2, 1, 2, false, &why);
  EXPECT_EQ(why, "NCCL cannot scale a MIN, MAX or PRODUCT");
  Plan(TUTTI_INT32, TUTTI_REDUCE_AVERAGE, 1, 1, 2, false, &why);
  EXPECT_EQ(why, "integer averages and scale factors round on the host path");
  Plan(TUTTI_INT16, TUTTI_REDUCE_SUM, 1, 1, 2, false, &why);
  EXPECT_EQ(why, "NCCL has no int16 reductions");
}

TEST(PlanNcclReduction, BoolIsLogical) {
  EXPECT_EQ(Plan(TUTTI_BOOL, TUTTI_REDUCE_SUM, 1, 1, 2).op, kNcclMax);  // or
  EXPECT_EQ(Plan(TUTTI_BOOL, TUTTI_REDUCE_MAX, 1, 1, 2).op, kNcclMax);
  EXPECT_EQ(Plan(TUTTI_BOOL, TUTTI_REDUCE_MIN, 1, 1, 2).op, kNcclMin);  // and
  EXPECT_EQ(Plan(TUTTI_BOOL, TUTTI_REDUCE_PRODUCT, 1, 1, 2).op, kNcclMin);
}

TEST(EncodeScalar, InTheDtypesOwnBits) {
  uint64_t s;
  EncodeScalar(TUTTI_FLOAT16, 0.5, &s);
  EXPECT_EQ(s, 0x3800u);
  EncodeScalar(TUTTI_BFLOAT16, 0.5, &s);
  EXPECT_EQ(s, 0x3f00u);
  EncodeScalar(TUTTI_FLOAT32, 0.25, &s);
  float f;
  std::memcpy(&f, &s, 4);
  EXPECT_EQ(f, 0.25f);
  EncodeScalar(TUTTI_FLOAT64, 0.125, &s);
  double d;
  std::memcpy(&d, &s, 8);
  EXPECT_EQ(d, 0.125);
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
