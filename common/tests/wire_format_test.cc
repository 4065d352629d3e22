#include "negotiation/wire_format.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

TEST(WireFormatTest, RequestListRoundTrip) {
  RequestList list;
  list.shutdown = true;
  RequestMeta m;
  m.name = std::string("name with \0 byte", 16);
  m.reduce_op = TUTTI_REDUCE_PRODUCT;
  m.dtype = TUTTI_BFLOAT16;
  m.shapes = {{3, 0, int64_t(1) << 40}, {}};
  m.collective = Collective::kAlltoall;
  m.process_set = 7;
  m.root_rank = 2;
  m.splits = {1, 2};
  m.device = TUTTI_DEVICE_CUDA;
  m.prescale = 0.125;
  m.postscale = -3.5;
  list.requests = {m, RequestMeta()};
  RequestList parsed;
  ASSERT_TRUE(ParseRequestList(SerializeRequestList(list), &parsed).ok());
  EXPECT_TRUE(parsed.shutdown);
  ASSERT_EQ(parsed.requests.size(), 2u);
  const RequestMeta& p = parsed.requests[0];
  EXPECT_EQ(p.name, m.name);
  EXPECT_EQ(p.reduce_op, m.reduce_op);
  EXPECT_EQ(p.dtype, m.dtype);
  EXPECT_EQ(p.shapes, m.shapes);
  EXPECT_EQ(p.collective, m.collective);
  EXPECT_EQ(p.process_set, 7);
  EXPECT_EQ(p.root_rank, 2);
  EXPECT_EQ(p.splits, m.splits);
  EXPECT_EQ(p.device, TUTTI_DEVICE_CUDA);
  EXPECT_EQ(p.prescale, m.prescale);
  EXPECT_EQ(p.postscale, m.postscale);
  EXPECT_TRUE(parsed.requests[1].shapes.empty());
}

TEST(WireFormatTest, ResponseListRoundTrip) {
  ResponseList list;
  Response ok;
  ok.names = {"a", "b"};
  ok.collective = Collective::kAllgather;
  ok.process_set = 3;
  ok.dtype = TUTTI_BFLOAT16;
  ok.reduce_op = TUTTI_REDUCE_MIN;
  ok.counts = {6};
  ok.joined_ranks = {2};
  ok.sizes = {1, 2, 3};
  ok.join_result = 1;
  Response error;
  error.kind = Response::Kind::kError;
  error.names = {"c"};
  error.error = "ranks disagree";
  list.responses = {ok, error};
  list.shutdown_ranks = {1, 3};
  ResponseList parsed;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(list), &parsed).ok());
  EXPECT_EQ(parsed.shutdown_ranks, (std::vector<int32_t>{1, 3}));
  ASSERT_EQ(parsed.responses.size(), 2u);
  const Response& p = parsed.responses[0];
  EXPECT_EQ(p.names, ok.names);
  EXPECT_EQ(p.collective, ok.collective);
  EXPECT_EQ(p.process_set, 3);
  EXPECT_EQ(p.dtype, TUTTI_BFLOAT16);
  EXPECT_EQ(p.reduce_op, TUTTI_REDUCE_MIN);
  EXPECT_EQ(p.counts, ok.counts);
  EXPECT_EQ(p.joined_ranks, ok.joined_ranks);
  EXPECT_EQ(p.sizes, ok.sizes);
  EXPECT_EQ(p.join_result, 1);
  EXPECT_EQ(parsed.responses[1].kind, Response::Kind::kError);
  EXPECT_EQ(parsed.responses[1].error, "ranks disagree");
}

TEST(WireFormatTest, RejectsTruncatedAndCorruptMessages) {
  RequestList list;
  RequestMeta m;
  m.name = "tensor";
  m.shapes = {{2, 2}};
  list.requests = {m};
  const std::string bytes = SerializeRequestList(list);
  RequestList parsed;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(ParseRequestList(bytes.substr(0, cut), &parsed).ok()) << cut;
  }
  EXPECT_FALSE(ParseRequestList(bytes + "x", &parsed).ok());
  std::string huge_count = bytes;
  huge_count[2] = '\xff';  // request count
  huge_count[3] = '\xff';
  Status s = ParseRequestList(huge_count, &parsed);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), std::string::npos);
  std::string wrong_version = bytes;
  wrong_version[0] = 9;
  EXPECT_FALSE(ParseRequestList(wrong_version, &parsed).ok());
  ResponseList responses;
  EXPECT_FALSE(ParseResponseList("", &responses).ok());
}

}  // namespace
}  // namespace tutti
