// Shape arithmetic shared by enqueue-time validation, the coordinator and execution.
#ifndef TUTTI_SRC_COLLECTIVE_PLAN_H_
#define TUTTI_SRC_COLLECTIVE_PLAN_H_

#include <cstdint>
#include <vector>

namespace tutti {

// Elements of a tensor of this shape (1 for a scalar).
int64_t ElementCount(const std::vector<int64_t>& shape);

// Elements in one row along the first dimension (the product of the other dimensions).
int64_t RowElements(const std::vector<int64_t>& shape);

// Reducescatter's split of `rows` first-dimension rows over `parts` ranks: as even as
// possible, the first rows % parts ranks get one extra row (7 rows over 3 ranks: 3, 2, 2).
std::vector<int64_t> ReducescatterRows(int64_t rows, int parts);

// Alltoall without explicit splits: `rows` must divide evenly; `rows / parts` each.
std::vector<int64_t> EqualSplits(int64_t rows, int parts);

// Alltoall: rows that set rank `me` receives from each rank, given the row-major split
// matrix (matrix[i * parts + j]: rows rank i sends to rank j).
std::vector<int64_t> ReceivedSplits(const std::vector<int64_t>& matrix, int parts, int me);

}  // namespace tutti

#endif  // TUTTI_SRC_COLLECTIVE_PLAN_H_
