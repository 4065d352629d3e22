// Device fusion and staging layouts: where each tensor goes and which copies move it.
#include "gpu/copy_plan.h"

#include <gtest/gtest.h>

#include "gpu/staged_operations.h"

namespace tutti {
namespace gpu {
namespace {

TEST(PackTensors, DenseForFusedReductions) {
  PackedLayout l = PackTensors({12, 4, 0, 8}, 4);
  EXPECT_EQ(l.offsets, (std::vector<size_t>{0, 12, 16, 16}));
  EXPECT_EQ(l.total_bytes, 24u);
}

TEST(PackTensors, AlignsEachSlot) {
  PackedLayout l = PackTensors({3, 70, 1}, 64);
  EXPECT_EQ(l.offsets, (std::vector<size_t>{0, 64, 192}));
  EXPECT_EQ(l.total_bytes, 193u);
  EXPECT_EQ(PackTensors({}, 64).total_bytes, 0u);
  EXPECT_EQ(PackTensors({5, 5}, 0).offsets, (std::vector<size_t>{0, 5}));  // 0 means 1
}

TEST(Copies, InAndOutSkipEmptyAndInPlace) {
  char buffer[64];
  char a[8], b[4];
  PackedLayout l = PackTensors({8, 0, 4, 4}, 4);
  // The last tensor already sits in its slot (a transport-provided buffer).
  std::vector<const void*> sources = {a, a, b, buffer + 12};
  std::vector<CopyItem> in = CopiesIn(l, sources, {8, 0, 4, 4}, buffer);
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].dst, buffer);
  EXPECT_EQ(in[0].src, a);
  EXPECT_EQ(in[0].bytes, 8u);
  EXPECT_EQ(in[1].dst, buffer + 8);
  EXPECT_EQ(in[1].src, b);
  std::vector<void*> targets = {a, a, b, buffer + 12};
  std::vector<CopyItem> out = CopiesOut(l, targets, {8, 0, 4, 4}, buffer);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].dst, b);
  EXPECT_EQ(out[1].src, buffer + 8);
}

TEST(SplitBatches, RespectsTheLimitAndDropsEmptyCopies) {
  char x[1];
  std::vector<CopyItem> copies(7, CopyItem{x, x, 1});
  copies[3].bytes = 0;
  auto batches = SplitBatches(copies, 4);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].size(), 4u);
  EXPECT_EQ(batches[1].size(), 2u);
  EXPECT_TRUE(SplitBatches({}, 4).empty());
}

TEST(PlanStaging, OneSlotPerTensorOnCacheLines) {
  PendingOp a, b;
  a.meta.dtype = TUTTI_FLOAT32;
  a.tensors.resize(2);
  a.tensors[0].shape = {3};      // 12 bytes
  a.tensors[1].shape = {2, 5};   // 40 bytes
  b.meta.dtype = TUTTI_FLOAT16;
  b.tensors.resize(1);
  b.tensors[0].shape = {};       // a scalar: 2 bytes
  PackedLayout l = PlanStaging({&a, &b});
  EXPECT_EQ(l.offsets, (std::vector<size_t>{0, 64, 128}));
  EXPECT_EQ(l.total_bytes, 130u);
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
