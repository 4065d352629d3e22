// Adasum's kernels and its halving/doubling schedule (adasum.h), against a straightforward
// float64 reference: combine whole vectors pairwise, rank blocks of 2, 4, 8, ... The ranks
// run as threads that swap data through an in-process mailbox.
#include "kernels/adasum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "base/dtype.h"

namespace tutti {
namespace {

// Adasum of two whole vectors in float64, written from the formula.
std::vector<double> Combine(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa >= 1e-8 ? 1 - dot / (2 * aa) : 1;
  const double cb = bb >= 1e-8 ? 1 - dot / (2 * bb) : 1;
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = ca * a[i] + cb * b[i];
  return r;
}

// Reference result of one tensor: rank r's vector is inputs[r]; blocks of 2d ranks combine
// their lower and upper halves' results, d = 1, 2, 4, ...
std::vector<double> Reference(std::vector<std::vector<double>> inputs) {
  const size_t n = inputs.size();
  for (size_t d = 1; d < n; d *= 2) {
    for (size_t b = 0; b < n; b += 2 * d) inputs[b] = Combine(inputs[b], inputs[b + d]);
  }
  return inputs[0];
}

// Point-to-point messages between rank threads, matched by (from, to, sequence).
class Mailbox {
 public:
  explicit Mailbox(int size) : sent_(size, std::vector<int>(size, 0)),
                               received_(size, std::vector<int>(size, 0)) {}

  adasum::Exchange For(int me) {
    return [this, me](int peer, const void* send, int64_t send_bytes, void* recv,
                      int64_t recv_bytes) {
      std::unique_lock<std::mutex> lock(mutex_);
      const char* bytes = static_cast<const char*>(send);
      messages_[std::make_tuple(me, peer, sent_[me][peer]++)] =
          std::vector<char>(bytes, bytes + send_bytes);
      changed_.notify_all();
      const auto key = std::make_tuple(peer, me, received_[me][peer]++);
      changed_.wait(lock, [&] { return messages_.count(key) > 0; });
      const std::vector<char>& message = messages_[key];
      if (static_cast<int64_t>(message.size()) != recv_bytes) {
        return Status::Internal("rank " + std::to_string(me) + " expected " +
                                std::to_string(recv_bytes) + " bytes from " +
                                std::to_string(peer) + ", got " + std::to_string(message.size()));
      }
      if (recv_bytes > 0) std::memcpy(recv, message.data(), recv_bytes);
      messages_.erase(key);
      return Status::OK();
    };
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::tuple<int, int, int>, std::vector<char>> messages_;
  std::vector<std::vector<int>> sent_, received_;
};

template <typename T>
T FromDouble(double v);
template <>
float FromDouble<float>(double v) { return static_cast<float>(v); }
template <>
double FromDouble<double>(double v) { return v; }
template <>
uint16_t FromDouble<uint16_t>(double v) { return FloatToHalf(static_cast<float>(v)); }

template <typename T>
double ToDouble(T v) { return static_cast<double>(v); }
template <>
double ToDouble<uint16_t>(uint16_t v) { return HalfToFloat(v); }

// Runs Adasum on `size` rank threads over tensors of `counts` elements with random inputs
// (some tensors zero on some ranks), and checks every rank's result against the reference.
template <typename T>
void CheckAgainstReference(tutti_dtype dtype, int size, const std::vector<int64_t>& counts,
                           double tolerance, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> normal;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<std::vector<T>> buffers(size, std::vector<T>(total));
  for (int r = 0; r < size; ++r) {
    int64_t offset = 0;
    for (size_t t = 0; t < counts.size(); ++t) {
      const bool zero = (r + t) % 5 == 3;  // a rank with nothing for this tensor
      for (int64_t i = 0; i < counts[t]; ++i) {
        buffers[r][offset + i] = FromDouble<T>(zero ? 0.0 : normal(random) * (1 + t));
      }
      offset += counts[t];
    }
  }
  // The reference sees exactly the values the ranks start with.
  std::vector<std::vector<double>> expected;
  int64_t offset = 0;
  for (int64_t c : counts) {
    std::vector<std::vector<double>> inputs(size, std::vector<double>(c));
    for (int r = 0; r < size; ++r) {
      for (int64_t i = 0; i < c; ++i) inputs[r][i] = ToDouble(buffers[r][offset + i]);
    }
    expected.push_back(Reference(inputs));
    offset += c;
  }

  Mailbox mailbox(size);
  std::vector<Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::vector<T> scratch(total);
      statuses[r] = adasum::Allreduce(r, size, dtype, buffers[r].data(), counts, scratch.data(),
                                      mailbox.For(r));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r].message();
    EXPECT_EQ(0, std::memcmp(buffers[r].data(), buffers[0].data(), total * sizeof(T)))
        << "rank " << r << " differs from rank 0";
  }
  offset = 0;
  for (size_t t = 0; t < counts.size(); ++t) {
    double scale = 1e-30;
    for (double v : expected[t]) scale = std::max(scale, std::fabs(v));
    for (int64_t i = 0; i < counts[t]; ++i) {
      ASSERT_NEAR(ToDouble(buffers[0][offset + i]), expected[t][i], tolerance * scale)
          << DtypeName(dtype) << " size " << size << " tensor " << t << " element " << i;
    }
    offset += counts[t];
  }
}

const std::vector<int64_t> kCounts = {0, 1, 2, 7, 33, 100, 5};

TEST(AdasumTest, MatchesReferenceFloat64) {
  for (int size : {1, 2, 4, 8}) {
    CheckAgainstReference<double>(TUTTI_FLOAT64, size, kCounts, 1e-12, 1);
  }
}

TEST(AdasumTest, MatchesReferenceFloat32) {
  for (int size : {2, 4, 8}) CheckAgainstReference<float>(TUTTI_FLOAT32, size, kCounts, 1e-5, 2);
}

TEST(AdasumTest, MatchesReferenceFloat16) {
  for (int size : {2, 4}) CheckAgainstReference<uint16_t>(TUTTI_FLOAT16, size, kCounts, 5e-3, 3);
}

TEST(AdasumTest, OneLongTensorAndTensorsShorterThanTheRanks) {
  CheckAgainstReference<double>(TUTTI_FLOAT64, 8, {1000}, 1e-12, 4);
  CheckAgainstReference<double>(TUTTI_FLOAT64, 8, {1, 1, 1}, 1e-12, 5);
}

TEST(AdasumTest, PairOfKnownVectors) {
  // a = (1, 0), b = (1, 1): a.b = 1, |a|^2 = 1, |b|^2 = 2 -> 0.5 a + 0.75 b = (1.25, 0.75).
  std::vector<double> a = {1, 0}, b = {1, 1}, sa(2), sb(2);
  Mailbox mailbox(2);
  Status s0, s1;
  std::thread t0([&] {
    s0 = adasum::Allreduce(0, 2, TUTTI_FLOAT64, a.data(), {2}, sa.data(), mailbox.For(0));
  });
  std::thread t1([&] {
    s1 = adasum::Allreduce(1, 2, TUTTI_FLOAT64, b.data(), {2}, sb.data(), mailbox.For(1));
  });
  t0.join();
  t1.join();
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(a, (std::vector<double>{1.25, 0.75}));
  EXPECT_EQ(b, a);
}

TEST(AdasumTest, Kernels) {
  const float a[] = {1.5f, -2.0f, 3.0f}, b[] = {0.5f, 4.0f, -1.0f};
  adasum::DotAndNorms p = adasum::ComputeDotAndNorms(TUTTI_FLOAT32, a, b, 3);
  EXPECT_DOUBLE_EQ(p.dot, 0.75 - 8 - 3);
  EXPECT_DOUBLE_EQ(p.a_norm_sq, 2.25 + 4 + 9);
  EXPECT_DOUBLE_EQ(p.b_norm_sq, 0.25 + 16 + 1);
  uint16_t ha[5], hb[5];
  for (int i = 0; i < 5; ++i) {
    ha[i] = FloatToHalf(0.25f * (i + 1));
    hb[i] = FloatToHalf(-1.0f * i);
  }
  p = adasum::ComputeDotAndNorms(TUTTI_FLOAT16, ha, hb, 5);
  EXPECT_DOUBLE_EQ(p.dot, -0.25 * (0 + 2 + 6 + 12 + 20));
  EXPECT_DOUBLE_EQ(p.a_norm_sq, 0.0625 * (1 + 4 + 9 + 16 + 25));

  EXPECT_EQ(adasum::Coefficient(3.0, 2.0), 1.0 - 3.0 / 2.0 * 0.5);
  EXPECT_EQ(adasum::Coefficient(3.0, 0.99e-8), 1.0);  // a (near) zero vector keeps 1

  float x[] = {1.0f, 2.0f};
  const float y[] = {4.0f, -1.0f};
  adasum::ScaledAdd(TUTTI_FLOAT32, x, 0.5, y, 0.25, 2);
  EXPECT_EQ(x[0], 1.5f);
  EXPECT_EQ(x[1], 0.75f);
}

TEST(AdasumTest, RefusesWhatHorovodRefuses) {
  std::vector<float> data(4), scratch(4);
  const adasum::Exchange nothing = [](int, const void*, int64_t, void*, int64_t) {
    return Status::OK();
  };
  Status s = adasum::Allreduce(0, 3, TUTTI_FLOAT32, data.data(), {4}, scratch.data(), nothing);
  EXPECT_EQ(s.code(), TUTTI_ERR_UNSUPPORTED);
  EXPECT_NE(s.message().find("power of two"), std::string::npos) << s.message();
  std::vector<int32_t> ints(4);
  s = adasum::Allreduce(0, 2, TUTTI_INT32, ints.data(), {4}, scratch.data(), nothing);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("float16, float32 and float64 only, not int32"), std::string::npos)
      << s.message();
  EXPECT_TRUE(adasum::SupportsDtype(TUTTI_FLOAT16));
  EXPECT_FALSE(adasum::SupportsDtype(TUTTI_BFLOAT16));
}

}  // namespace
}  // namespace tutti
