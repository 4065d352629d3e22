#include "negotiation/negotiation.h"

#include <sstream>

namespace tutti {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  return out.str();
}

}  // namespace

Coordinator::Coordinator(int size, const ProcessSetRegistry* sets)
    : size_(size), sets_(sets), joined_(size, false) {}

void Coordinator::Submit(int rank, const RequestMeta& request) {
  last_submission_ = std::chrono::steady_clock::now();
  if (request.collective == Collective::kJoin) {
    joined_[rank] = true;
    last_joined_ = rank;
    join_name_ = request.name;
    // Requests that waited only for this rank are ready now.
    for (auto& item : table_) MarkIfReady(item.first, &item.second);
    return;
  }
  auto inserted = table_.emplace(request.name, Entry());
  Entry& entry = inserted.first->second;
  if (inserted.second) {
    entry.by_rank.resize(size_);
    entry.submitted.assign(size_, false);
    entry.first_seen = std::chrono::steady_clock::now();
    if (sets_ == nullptr) {
      for (int r = 0; r < size_; ++r) entry.members.push_back(r);
      if (request.process_set != TUTTI_GLOBAL_PROCESS_SET) entry.set_error = "unknown";
    } else if (!sets_->Members(request.process_set, &entry.members)) {
      entry.set_error = "unknown";
    }
    if (!entry.set_error.empty()) {
      entry.set_error = "process set " + std::to_string(request.process_set) +
                        " is unknown (it was removed or never added)";
      entry.members = {rank};
    }
  }
  if (entry.submitted[rank]) {
    // The queue rejects duplicates in flight, so this means a broken rank; fail the name.
    entry.duplicate_error = "rank " + std::to_string(rank) + " submitted it twice";
    return;
  }
  entry.submitted[rank] = true;
  entry.by_rank[rank] = request;
  MarkIfReady(request.name, &entry);
}

bool Coordinator::IsReady(const Entry& entry) const {
  for (int32_t m : entry.members) {
    if (!entry.submitted[m] && !joined_[m]) return false;
  }
  return true;
}

void Coordinator::MarkIfReady(const std::string& name, Entry* entry) {
  if (entry->ready || !IsReady(*entry)) return;
  entry->ready = true;
  ready_order_.push_back(name);
}

Response Coordinator::Decide(const std::string& name, const Entry& entry) const {
  Response response;
  const RequestMeta* first = nullptr;
  std::vector<std::pair<int, const RequestMeta*>> submitted;
  for (int r = 0; r < size_; ++r) {
    if (!entry.submitted[r]) continue;
    submitted.push_back({r, &entry.by_rank[r]});
    if (first == nullptr) first = &entry.by_rank[r];
  }
  response.collective = first->collective;
  response.process_set = first->process_set;
  response.names.push_back(name);
  std::vector<const RequestMeta*> in_set_order;
  std::vector<int> joined_missing;
  for (int32_t m : entry.members) {
    if (entry.submitted[m]) {
      in_set_order.push_back(&entry.by_rank[m]);
    } else {
      in_set_order.push_back(nullptr);
      joined_missing.push_back(m);
      response.joined_ranks.push_back(m);
    }
  }
  const std::string what =
      std::string(CollectiveName(response.collective)) + " of tensor '" + name + "': ";
  std::string problem = entry.set_error;
  if (problem.empty() && !entry.duplicate_error.empty()) {
    problem = "ranks disagree: " + entry.duplicate_error;
  }
  if (problem.empty()) {
    std::string mismatch = DescribeMismatch(submitted);
    if (!mismatch.empty()) problem = "ranks disagree: " + mismatch;
  }
  if (problem.empty() && !joined_missing.empty() &&
      response.collective != Collective::kAllreduce) {
    problem = RankList(joined_missing) + (joined_missing.size() == 1 ? " has" : " have") +
              " joined (called join()) and cannot take part; only allreduce runs while ranks "
              "are joined";
  }
  if (!problem.empty()) {
    response.kind = Response::Kind::kError;
    response.error = what + problem;
    response.joined_ranks.clear();
    return response;
  }
  PlanResponse(in_set_order, &response);
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
  bool all_joined = size_ > 0;
  for (bool j : joined_) all_joined = all_joined && j;
  if (all_joined) {
    Response join;
    join.collective = Collective::kJoin;
    join.names.push_back(join_name_);
    join.join_result = last_joined_;
    responses.push_back(join);
    joined_.assign(size_, false);
    last_joined_ = -1;
  }
  return responses;
}

std::vector<int> Coordinator::Missing(const Entry& entry) const {
  std::vector<int> missing;
  for (int32_t r : entry.members) {
    if (!entry.submitted[r] && !joined_[r]) missing.push_back(r);
  }
  return missing;
}

Response Coordinator::WaitingError(const std::string& name, const Entry& entry,
                                   const std::string& detail) const {
  const RequestMeta* first = nullptr;
  for (int r = 0; r < size_ && first == nullptr; ++r) {
    if (entry.submitted[r]) first = &entry.by_rank[r];
  }
  Response response;
  response.kind = Response::Kind::kError;
  response.collective = first->collective;
  response.process_set = first->process_set;
  response.names.push_back(name);
  response.error = std::string(CollectiveName(first->collective)) + " of tensor '" + name +
                   "'" + detail;
  return response;
}

std::vector<std::string> Coordinator::Stalled(std::chrono::steady_clock::duration age) const {
  std::vector<std::string> result;
  auto now = std::chrono::steady_clock::now();
  for (const auto& item : table_) {
    if (now - item.second.first_seen < age) continue;
    result.push_back("'" + item.first + "' (missing " + RankList(Missing(item.second)) + ")");
  }
  return result;
}

std::vector<Response> Coordinator::FailStalled(std::chrono::steady_clock::duration age) {
  std::vector<Response> failed;
  const auto now = std::chrono::steady_clock::now();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(age).count();
  for (auto it = table_.begin(); it != table_.end();) {
    const Entry& entry = it->second;
    if (entry.ready || now - entry.first_seen < age) {
      ++it;
      continue;
    }
    failed.push_back(WaitingError(it->first, entry,
                                  ": waited more than " + std::to_string(seconds) + " s for " +
                                      RankList(Missing(entry)) +
                                      " to submit it (TUTTI_STALL_SHUTDOWN_TIME_SECONDS)"));
    it = table_.erase(it);
  }
  return failed;
}

bool Coordinator::Deadlocked(std::chrono::steady_clock::duration quiet) const {
  if (std::chrono::steady_clock::now() - last_submission_ < quiet) return false;
  std::vector<bool> waiting(size_, false);
  bool any = false;
  for (const auto& item : table_) {
    if (item.second.ready) continue;
    for (int r = 0; r < size_; ++r) {
      if (item.second.submitted[r]) waiting[r] = any = true;
    }
  }
  if (!any) return false;
  for (int r = 0; r < size_; ++r) {
    if (!waiting[r] && !joined_[r]) return false;
  }
  return true;
}

std::vector<Response> Coordinator::FailAllWaiting(const std::string& why) {
  std::vector<Response> failed;
  for (auto it = table_.begin(); it != table_.end();) {
    const Entry& entry = it->second;
    if (entry.ready) {
      ++it;
      continue;
    }
    failed.push_back(WaitingError(it->first, entry, ": " + why));
    it = table_.erase(it);
  }
  return failed;
}

std::chrono::steady_clock::time_point Coordinator::OldestPending() const {
  auto oldest = std::chrono::steady_clock::now();
  for (const auto& item : table_) {
    if (!item.second.ready && item.second.first_seen < oldest) oldest = item.second.first_seen;
  }
  return oldest;
}

}  // namespace tutti
