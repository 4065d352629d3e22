#include "shm/algorithm_choice.h"

#include <map>
#include <mutex>
#include <tuple>

namespace tutti {
namespace shm {

AlgorithmChoice* SharedAlgorithmChoice(int kind, int size, size_t chunk_bytes) {
  static std::mutex mu;
  static auto* choices = new std::map<std::tuple<int, int, size_t>, AlgorithmChoice>();
  std::lock_guard<std::mutex> lock(mu);
  return &(*choices)[std::make_tuple(kind, size, chunk_bytes)];
}

}  // namespace shm
}  // namespace tutti
