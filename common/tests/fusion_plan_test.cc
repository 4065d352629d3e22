#include "execution/fusion_plan.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

FusionItem Item(int64_t bytes, tutti_dtype dtype = TUTTI_FLOAT32,
                tutti_reduce_op op = TUTTI_REDUCE_SUM) {
  FusionItem item;
  item.fusible = true;
  item.dtype = dtype;
  item.reduce_op = op;
  item.bytes = bytes;
  return item;
}

using Groups = std::vector<std::vector<size_t>>;

TEST(FusionPlanTest, SameKindShareOneGroupAcrossOthers) {
  FusionItem other;  // not fusible (e.g. a broadcast)
  std::vector<FusionItem> items = {Item(8), Item(8, TUTTI_FLOAT16), other, Item(8),
                                   Item(8, TUTTI_FLOAT16)};
  EXPECT_EQ(PlanFusion(items, 1 << 20), (Groups{{0, 3}, {1, 4}, {2}}));
}

TEST(FusionPlanTest, OpsAndScalesAndSetsKeepGroupsApart) {
  FusionItem scaled = Item(8);
  scaled.prescale = 2;
  FusionItem on_set = Item(8);
  on_set.process_set = 1;
  std::vector<FusionItem> items = {Item(8), Item(8, TUTTI_FLOAT32, TUTTI_REDUCE_MAX), scaled,
                                   on_set};
  EXPECT_EQ(PlanFusion(items, 1 << 20), (Groups{{0}, {1}, {2}, {3}}));
}

// Tensors on different devices (host, CUDA 0, CUDA 1) never share a fusion buffer.
TEST(FusionPlanTest, DevicesKeepGroupsApart) {
  std::vector<FusionItem> items = {Item(4), Item(4), Item(4), Item(4), Item(4)};
  items[1].device = 0;
  items[2].device = 1;
  items[3].device = 0;
  EXPECT_EQ(PlanFusion(items, 1 << 20), (Groups{{0, 4}, {1, 3}, {2}}));
}

TEST(FusionPlanTest, ThresholdStartsNewGroups) {
  std::vector<FusionItem> items = {Item(40), Item(40), Item(40), Item(100), Item(10), Item(20)};
  EXPECT_EQ(PlanFusion(items, 80), (Groups{{0, 1}, {2}, {3}, {4, 5}}));
  // Nothing fuses with a zero threshold; a tensor larger than the threshold runs alone.
  EXPECT_EQ(PlanFusion({Item(4), Item(4)}, 0), (Groups{{0}, {1}}));
}

}  // namespace
}  // namespace tutti
