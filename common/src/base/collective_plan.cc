#include "base/collective_plan.h"

#include <cstddef>

namespace tutti {

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (size_t i = 1; i < shape.size(); ++i) count *= shape[i];
  return count;
}

std::vector<int64_t> ReducescatterRows(int64_t rows, int parts) {
  std::vector<int64_t> result(parts, rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) ++result[i];
  return result;
}

std::vector<int64_t> EqualSplits(int64_t rows, int parts) {
  return std::vector<int64_t>(parts, rows / parts);
}

std::vector<int64_t> ReceivedSplits(const std::vector<int64_t>& matrix, int parts, int me) {
  std::vector<int64_t> result(parts);
  for (int i = 0; i < parts; ++i) result[i] = matrix[static_cast<size_t>(i) * parts + me];
  return result;
}

}  // namespace tutti
