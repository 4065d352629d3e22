#include "negotiation.h"

#include <functional>
#include <sstream>

#include "dtype.h"

namespace tutti {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::string DoubleString(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  return out.str();
}

// Groups ranks by the string form of one field; returns "" when all ranks agree.
std::string DescribeField(const char* field, const std::vector<RequestMeta>& by_rank,
                          const std::function<std::string(const RequestMeta&)>& value) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // first-seen order
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    std::string v = value(by_rank[rank]);
    auto it = groups.begin();
    while (it != groups.end() && it->first != v) ++it;
    if (it == groups.end()) {
      groups.push_back({v, {static_cast<int>(rank)}});
    } else {
      it->second.push_back(static_cast<int>(rank));
    }
  }
  if (groups.size() <= 1) return "";
  std::ostringstream out;
  out << field << " differs: ";
  for (size_t i = 0; i < groups.size(); ++i) {
    out << (i ? "; " : "") << groups[i].first << " on " << RankList(groups[i].second);
  }
  return out.str();
}

}  // namespace

std::string DescribeMismatch(const std::vector<RequestMeta>& by_rank) {
  using M = const RequestMeta&;
  std::vector<std::string> parts = {
      DescribeField("collective", by_rank, [](M m) { return CollectiveName(m.collective); }),
      DescribeField("reduce op", by_rank, [](M m) { return ReduceOpName(m.reduce_op); }),
      DescribeField("dtype", by_rank, [](M m) { return DtypeName(m.dtype); }),
      DescribeField("shape", by_rank, [](M m) { return ShapeString(m.shape); }),
      DescribeField("prescale", by_rank, [](M m) { return DoubleString(m.prescale); }),
      DescribeField("postscale", by_rank, [](M m) { return DoubleString(m.postscale); }),
  };
  std::string result;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    result += (result.empty() ? "" : "; ") + p;
  }
  return result;
}

Coordinator::Coordinator(int size) : size_(size) {}

void Coordinator::Submit(int rank, const RequestMeta& request) {
  auto inserted = table_.emplace(request.name, Entry());
  Entry& entry = inserted.first->second;
  if (inserted.second) {
    entry.by_rank.resize(size_);
    entry.submitted.assign(size_, false);
    entry.first_seen = std::chrono::steady_clock::now();
  }
  if (entry.submitted[rank]) {
    // The queue rejects duplicates in flight, so this means a broken rank; fail the name.
    entry.duplicate_error = "rank " + std::to_string(rank) + " submitted it twice";
    return;
  }
  entry.submitted[rank] = true;
  entry.by_rank[rank] = request;
  if (++entry.count == size_) ready_order_.push_back(request.name);
}

Response Coordinator::Decide(const std::string& name, const Entry& entry) const {
  Response response;
  response.collective = entry.by_rank[0].collective;
  response.names.push_back(name);
  std::string problem = entry.duplicate_error;
  if (problem.empty()) problem = DescribeMismatch(entry.by_rank);
  if (!problem.empty()) {
    response.kind = Response::Kind::kError;
    response.error = std::string(CollectiveName(response.collective)) + " of tensor '" + name +
                     "': ranks disagree: " + problem;
  }
  return response;
}

std::vector<Response> Coordinator::TakeReady() {
  std::vector<Response> responses;
  for (const std::string& name : ready_order_) {
    auto it = table_.find(name);
    responses.push_back(Decide(name, it->second));
    table_.erase(it);
  }
  ready_order_.clear();
  return responses;
}

std::vector<std::string> Coordinator::Stalled(std::chrono::steady_clock::duration age) const {
  std::vector<std::string> result;
  auto now = std::chrono::steady_clock::now();
  for (const auto& item : table_) {
    if (now - item.second.first_seen < age) continue;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!item.second.submitted[r]) missing.push_back(r);
    }
    result.push_back("'" + item.first + "' (missing " + RankList(missing) + ")");
  }
  return result;
}

}  // namespace tutti
