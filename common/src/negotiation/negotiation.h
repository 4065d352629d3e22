// The coordinator's bookkeeping (runs on rank 0): which request names each rank has
// submitted, which are ready, whether the ranks agree on them, and which ranks have joined.
// Pure logic with no transport, so it is unit-tested directly.
//
// A request is ready when every member of its process set (the set named by its first
// submission) has submitted it or has joined. All sets share this one table and one order,
// which is what keeps overlapping sets from deadlocking. Names are matched across sets too:
// a name must be unique among a rank's requests in flight, whatever their sets.
#ifndef TUTTI_SRC_NEGOTIATION_H_
#define TUTTI_SRC_NEGOTIATION_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "requests/process_sets.h"
#include "requests/request.h"

namespace tutti {

class Coordinator {
 public:
  // `sets` resolves process-set ids (must outlive the coordinator); null: only the global set.
  explicit Coordinator(int size, const ProcessSetRegistry* sets = nullptr);

  // Records a request from `rank`. Names are matched across ranks; order does not matter.
  // A join request marks the rank joined instead.
  void Submit(int rank, const RequestMeta& request);

  // Responses for every name that is now ready, in the order they became ready, followed by
  // the join response once every rank has joined (which also clears the joined state). A name
  // whose metadata differs between ranks gets an error response naming the tensor, the ranks
  // and what differs. Ready names are forgotten.
  std::vector<Response> TakeReady();

  // Names submitted by some ranks only, first seen at least `age` ago, with the missing ranks
  // ("'w' (missing ranks 1, 2)"); for stall warnings.
  std::vector<std::string> Stalled(std::chrono::steady_clock::duration age) const;

  // Fails every name submitted by some ranks only and first seen at least `age` ago: an error
  // response (for the ranks that submitted it) naming the missing ranks; the names are
  // forgotten.
  std::vector<Response> FailStalled(std::chrono::steady_clock::duration age);

  // True when the job is deadlocked: every rank that has not joined has submitted at least
  // one name that still waits for other ranks, and no rank has submitted anything for
  // `quiet`. Each rank then waits for requests the others have not made, and none makes
  // progress (a rank computing that long between an asynchronous submission and the next
  // one is the only false positive; the stall settings turn the check off or lengthen it).
  bool Deadlocked(std::chrono::steady_clock::duration quiet) const;

  // Fails every name that still waits, each with `why` appended to its error; for a
  // deadlock. The names are forgotten.
  std::vector<Response> FailAllWaiting(const std::string& why);

  // When the oldest name still waiting was first seen (now when none waits).
  std::chrono::steady_clock::time_point OldestPending() const;

  size_t pending() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<RequestMeta> by_rank;  // indexed by global rank
    std::vector<bool> submitted;
    std::vector<int32_t> members;  // of the first submission's set
    std::string set_error;         // the set is unknown
    bool ready = false;
    std::chrono::steady_clock::time_point first_seen;
    std::string duplicate_error;  // set when a rank submitted the name twice
  };

  bool IsReady(const Entry& entry) const;
  void MarkIfReady(const std::string& name, Entry* entry);
  Response Decide(const std::string& name, const Entry& entry) const;
  // Members of the entry's set that have neither submitted it nor joined.
  std::vector<int> Missing(const Entry& entry) const;
  // An error response for a waiting entry: "<collective> of tensor '<name>'<detail>".
  Response WaitingError(const std::string& name, const Entry& entry,
                        const std::string& detail) const;

  int size_;
  const ProcessSetRegistry* sets_;
  std::map<std::string, Entry> table_;
  std::vector<std::string> ready_order_;  // names that became ready, in order
  std::vector<bool> joined_;
  int32_t last_joined_ = -1;
  std::string join_name_;
  std::chrono::steady_clock::time_point last_submission_ = std::chrono::steady_clock::now();
};

// Describes how the ranks' requests for one name differ, e.g.
// "dtype differs: float32 on ranks 0, 2; float16 on rank 1". Empty when they agree. Each
// entry is (global rank, request).
std::string DescribeMismatch(const std::vector<std::pair<int, const RequestMeta*>>& requests);
// The same for requests from ranks 0, 1, 2, ...
std::string DescribeMismatch(const std::vector<RequestMeta>& by_rank);

// Builds the execution plan for agreeing requests: counts, first dimensions, split matrix.
// `requests` holds each set member's request in set-rank order (null for joined ranks).
void PlanResponse(const std::vector<const RequestMeta*>& requests, Response* response);

}  // namespace tutti

#endif  // TUTTI_SRC_NEGOTIATION_H_
