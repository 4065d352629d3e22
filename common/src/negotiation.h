// The coordinator's bookkeeping (runs on rank 0): which request names each rank has
// submitted, which are ready everywhere, and whether the ranks agree on them. Pure logic with
// no transport, so it is unit-tested directly.
#ifndef TUTTI_SRC_NEGOTIATION_H_
#define TUTTI_SRC_NEGOTIATION_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "request.h"

namespace tutti {

class Coordinator {
 public:
  explicit Coordinator(int size);

  // Records a request from `rank`. Names are matched across ranks; order does not matter.
  void Submit(int rank, const RequestMeta& request);

  // Responses for every name that all ranks have now submitted, in the order they became
  // ready. A name whose metadata differs between ranks gets an error response naming the
  // tensor, the ranks and what differs. Ready names are forgotten.
  std::vector<Response> TakeReady();

  // Names submitted by some ranks only, first seen at least `age` ago, with the missing ranks
  // ("'w' (missing ranks 1, 2)"); for stall warnings.
  std::vector<std::string> Stalled(std::chrono::steady_clock::duration age) const;

  size_t pending() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<RequestMeta> by_rank;  // indexed by rank
    std::vector<bool> submitted;
    int count = 0;
    std::chrono::steady_clock::time_point first_seen;
    std::string duplicate_error;  // set when a rank submitted the name twice
  };

  Response Decide(const std::string& name, const Entry& entry) const;

  int size_;
  std::map<std::string, Entry> table_;
  std::vector<std::string> ready_order_;  // names that became complete, in order
};

// Describes how the ranks' requests for one name differ, e.g.
// "dtype differs: float32 on ranks 0, 2; float16 on rank 1". Empty when they agree.
std::string DescribeMismatch(const std::vector<RequestMeta>& by_rank);

}  // namespace tutti

#endif  // TUTTI_SRC_NEGOTIATION_H_
