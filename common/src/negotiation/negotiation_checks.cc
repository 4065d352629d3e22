// How ranks' requests for one name can differ, and the execution plan of agreeing requests.
#include <functional>
#include <sstream>

#include "base/collective_plan.h"
#include "base/dtype.h"
#include "negotiation/negotiation.h"

namespace tutti {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape, size_t from = 0) {
  std::ostringstream out;
  out << "[";
  for (size_t i = from; i < shape.size(); ++i) out << (i > from ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::string ShapesString(const std::vector<std::vector<int64_t>>& shapes, size_t from) {
  std::string result;
  for (size_t i = 0; i < shapes.size(); ++i) {
    result += (i ? ", " : "") + ShapeString(shapes[i], from);
  }
  return result;
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

using Requests = std::vector<std::pair<int, const RequestMeta*>>;

// Groups ranks by the string form of one field; returns "" when all ranks agree.
std::string DescribeField(const std::string& field, const Requests& requests,
                          const std::function<std::string(const RequestMeta&)>& value) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // first-seen order
  for (const auto& item : requests) {
    std::string v = value(*item.second);
    auto it = groups.begin();
    while (it != groups.end() && it->first != v) ++it;
    if (it == groups.end()) {
      groups.push_back({v, {item.first}});
    } else {
      it->second.push_back(item.first);
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

bool ComparesFirstDimension(Collective c) {
  return c != Collective::kAllgather && c != Collective::kAlltoall;
}

}  // namespace

std::string DescribeMismatch(const Requests& requests) {
  if (requests.empty()) return "";
  using M = const RequestMeta&;
  const Collective collective = requests[0].second->collective;
  const bool whole_shape = ComparesFirstDimension(collective);
  const char* shape_label = collective == Collective::kAddProcessSet ? "process set ranks"
                            : whole_shape ? "shape"
                                          : "shape (all but the first dimension)";
  std::vector<std::string> parts = {
      DescribeField("collective", requests, [](M m) { return CollectiveName(m.collective); }),
      DescribeField("process set", requests, [](M m) { return std::to_string(m.process_set); }),
      DescribeField("number of tensors", requests,
                    [](M m) { return std::to_string(m.shapes.size()); }),
      DescribeField("reduce op", requests, [](M m) { return ReduceOpName(m.reduce_op); }),
      DescribeField("dtype", requests, [](M m) { return DtypeName(m.dtype); }),
      // Requests carry the root's rank within the set; say so where that is not the global rank.
      DescribeField(requests[0].second->process_set == TUTTI_GLOBAL_PROCESS_SET
                        ? "root_rank"
                        : "root (rank within the process set)",
                    requests, [](M m) { return std::to_string(m.root_rank); }),
      DescribeField(shape_label, requests,
                    [whole_shape](M m) { return ShapesString(m.shapes, whole_shape ? 0 : 1); }),
      DescribeField("prescale", requests, [](M m) { return DoubleString(m.prescale); }),
      DescribeField("postscale", requests, [](M m) { return DoubleString(m.postscale); }),
      DescribeField("device", requests,
                    [](M m) { return std::string(m.device == TUTTI_DEVICE_CUDA ? "CUDA" : "CPU"); }),
  };
  std::string result;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    result += (result.empty() ? "" : "; ") + p;
  }
  return result;
}

std::string DescribeMismatch(const std::vector<RequestMeta>& by_rank) {
  Requests requests;
  for (size_t r = 0; r < by_rank.size(); ++r) requests.push_back({static_cast<int>(r), &by_rank[r]});
  return DescribeMismatch(requests);
}

void PlanResponse(const std::vector<const RequestMeta*>& requests, Response* response) {
  const RequestMeta* first = nullptr;
  for (const RequestMeta* r : requests) {
    if (r != nullptr) {
      first = r;
      break;
    }
  }
  if (first == nullptr) return;
  const int parts = static_cast<int>(requests.size());
  response->dtype = first->dtype;
  response->reduce_op = first->reduce_op;
  response->counts.clear();
  for (const auto& shape : first->shapes) response->counts.push_back(ElementCount(shape));
  response->sizes.clear();
  if (first->collective == Collective::kAllgather) {
    for (size_t t = 0; t < first->shapes.size(); ++t) {
      for (const RequestMeta* r : requests) response->sizes.push_back(r->shapes[t][0]);
    }
  } else if (first->collective == Collective::kAlltoall) {
    for (const RequestMeta* r : requests) {
      std::vector<int64_t> row =
          r->splits.empty() ? EqualSplits(r->shapes[0][0], parts) : r->splits;
      response->sizes.insert(response->sizes.end(), row.begin(), row.end());
    }
  }
}

}  // namespace tutti
