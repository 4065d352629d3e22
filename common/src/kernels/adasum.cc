#include "kernels/adasum.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "base/dtype.h"

namespace tutti {
namespace adasum {
namespace {

template <typename T>
DotAndNorms DotAndNormsOf(const T* a, const T* b, int64_t count) {
  // One sequential float64 sum per quantity; a float32 product is rounded to float32 before
  // it is added (the product is computed in T, as Horovod does).
  DotAndNorms r;
  for (int64_t i = 0; i < count; ++i) {
    r.dot += static_cast<double>(a[i] * b[i]);
    r.a_norm_sq += static_cast<double>(a[i] * a[i]);
    r.b_norm_sq += static_cast<double>(b[i] * b[i]);
  }
  return r;
}

DotAndNorms DotAndNormsOfHalf(const uint16_t* a, const uint16_t* b, int64_t count) {
  // float16 products are exact in float64. Four partial sums, element i going to sum i % 4,
  // combined as (s0 + s2) + (s1 + s3): the order of Horovod's four-lane vector loop, so the
  // rounding of the sums matches it too.
  double dot[4] = {0, 0, 0, 0}, an[4] = {0, 0, 0, 0}, bn[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < count; ++i) {
    const double x = HalfToFloat(a[i]), y = HalfToFloat(b[i]);
    dot[i % 4] += x * y;
    an[i % 4] += x * x;
    bn[i % 4] += y * y;
  }
  auto total = [](const double* s) { return (s[0] + s[2]) + (s[1] + s[3]); };
  DotAndNorms r;
  r.dot = total(dot);
  r.a_norm_sq = total(an);
  r.b_norm_sq = total(bn);
  return r;
}

template <typename T>
void ScaledAddOf(T* a, double a_coeff, const T* b, double b_coeff, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    a[i] = static_cast<T>(a_coeff * static_cast<double>(a[i]) +
                          b_coeff * static_cast<double>(b[i]));
  }
}

void ScaledAddOfHalf(uint16_t* a, double a_coeff, const uint16_t* b, double b_coeff,
                     int64_t count) {
  const float ac = static_cast<float>(a_coeff), bc = static_cast<float>(b_coeff);
  for (int64_t i = 0; i < count; ++i) {
    a[i] = FloatToHalf(std::fma(bc, HalfToFloat(b[i]), ac * HalfToFloat(a[i])));
  }
}

// Per-tensor element counts of the part [from, from + length) of a window whose tensors
// have `counts` elements there, back to back.
std::vector<int64_t> SliceCounts(const std::vector<int64_t>& counts, int64_t from,
                                 int64_t length) {
  std::vector<int64_t> result(counts.size(), 0);
  int64_t start = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t lo = std::max(start, from), hi = std::min(start + counts[i], from + length);
    if (hi > lo) result[i] = hi - lo;
    start += counts[i];
  }
  return result;
}

// Sums `values` over the `block` ranks (a power of two) whose rank differs from `rank` only
// in the low bits: recursive doubling, so every rank of the block gets the same bits.
Status SumOverBlock(int rank, int block, std::vector<double>* values,
                    std::vector<double>* incoming, const Exchange& exchange) {
  const int64_t bytes = static_cast<int64_t>(values->size() * sizeof(double));
  incoming->resize(values->size());
  for (int distance = 1; distance < block; distance <<= 1) {
    Status s = exchange(rank ^ distance, values->data(), bytes, incoming->data(), bytes);
    if (!s.ok()) return s;
    for (size_t i = 0; i < values->size(); ++i) (*values)[i] += (*incoming)[i];
  }
  return Status::OK();
}

// One rank's window of the buffer while the vectors are halved: elements [begin, begin +
// length), holding `counts[i]` elements of tensor i.
struct Window {
  int64_t begin;
  int64_t length;
  std::vector<int64_t> counts;
};

}  // namespace

bool SupportsDtype(tutti_dtype dtype) {
  return dtype == TUTTI_FLOAT16 || dtype == TUTTI_FLOAT32 || dtype == TUTTI_FLOAT64;
}

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

DotAndNorms ComputeDotAndNorms(tutti_dtype dtype, const void* a, const void* b, int64_t count) {
  switch (dtype) {
    case TUTTI_FLOAT16:
      return DotAndNormsOfHalf(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                               count);
    case TUTTI_FLOAT32:
      return DotAndNormsOf(static_cast<const float*>(a), static_cast<const float*>(b), count);
    case TUTTI_FLOAT64:
      return DotAndNormsOf(static_cast<const double*>(a), static_cast<const double*>(b), count);
    default:
      return DotAndNorms();  // refused before execution (SupportsDtype)
  }
}

double Coefficient(double dot, double norm_sq) {
  return norm_sq >= 1e-8 ? 1.0 - dot / norm_sq * 0.5 : 1.0;
}

void ScaledAdd(tutti_dtype dtype, void* a, double a_coeff, const void* b, double b_coeff,
               int64_t count) {
  switch (dtype) {
    case TUTTI_FLOAT16:
      ScaledAddOfHalf(static_cast<uint16_t*>(a), a_coeff, static_cast<const uint16_t*>(b),
                      b_coeff, count);
      break;
    case TUTTI_FLOAT32:
      ScaledAddOf(static_cast<float*>(a), a_coeff, static_cast<const float*>(b), b_coeff, count);
      break;
    case TUTTI_FLOAT64:
      ScaledAddOf(static_cast<double*>(a), a_coeff, static_cast<const double*>(b), b_coeff,
                  count);
      break;
    default:
      break;
  }
}

Status Allreduce(int rank, int size, tutti_dtype dtype, void* buffer,
                 const std::vector<int64_t>& counts, void* scratch, const Exchange& exchange) {
  if (!SupportsDtype(dtype)) {
    return Status::InvalidArgument(std::string("ADASUM is defined for float16, float32 and "
                                               "float64 only, not ") + DtypeName(dtype));
  }
  if (!IsPowerOfTwo(size)) {
    return Status::Unsupported("ADASUM needs a number of ranks that is a power of two, not " +
                               std::to_string(size));
  }
  if (size == 1) return Status::OK();
  const int64_t element = static_cast<int64_t>(DtypeSize(dtype));
  char* data = static_cast<char*>(buffer);
  char* received = static_cast<char*>(scratch);
  std::vector<Window> windows;  // the window before each halving step
  Window w{0, std::accumulate(counts.begin(), counts.end(), int64_t(0)), counts};
  std::vector<double> sums, incoming;

  // Vector halving, distance doubling: combine.
  for (int distance = 1; distance < size; distance <<= 1) {
    const bool lower = (rank & distance) == 0;
    const int64_t first_half = w.length / 2;
    const int64_t keep_begin = lower ? w.begin : w.begin + first_half;
    const int64_t keep_length = lower ? first_half : w.length - first_half;
    const int64_t give_begin = lower ? w.begin + first_half : w.begin;
    windows.push_back(w);
    Window kept{keep_begin, keep_length, SliceCounts(w.counts, keep_begin - w.begin, keep_length)};
    Status s = exchange(rank ^ distance, data + give_begin * element,
                        (w.length - keep_length) * element, received + keep_begin * element,
                        keep_length * element);
    if (!s.ok()) return s;
    w = std::move(kept);

    // Per tensor: dot product, then the norms of the lower and the upper half-block's
    // vectors (ours is the lower one on a lower rank), summed over the 2 * distance ranks
    // that hold parts of these two vectors.
    sums.assign(3 * w.counts.size(), 0.0);
    int64_t offset = w.begin;
    for (size_t i = 0; i < w.counts.size(); ++i) {
      const DotAndNorms p = ComputeDotAndNorms(dtype, data + offset * element,
                                               received + offset * element, w.counts[i]);
      sums[3 * i] = p.dot;
      sums[3 * i + 1] = lower ? p.a_norm_sq : p.b_norm_sq;
      sums[3 * i + 2] = lower ? p.b_norm_sq : p.a_norm_sq;
      offset += w.counts[i];
    }
    s = SumOverBlock(rank, 2 * distance, &sums, &incoming, exchange);
    if (!s.ok()) return s;
    offset = w.begin;
    for (size_t i = 0; i < w.counts.size(); ++i) {
      const double dot = sums[3 * i];
      const double mine = lower ? sums[3 * i + 1] : sums[3 * i + 2];
      const double theirs = lower ? sums[3 * i + 2] : sums[3 * i + 1];
      ScaledAdd(dtype, data + offset * element, Coefficient(dot, mine),
                received + offset * element, Coefficient(dot, theirs), w.counts[i]);
      offset += w.counts[i];
    }
  }

  // Distance halving: gather the combined windows back.
  for (int distance = size / 2; distance >= 1; distance >>= 1) {
    const Window outer = windows.back();
    windows.pop_back();
    const int64_t their_begin = w.begin == outer.begin ? w.begin + w.length : outer.begin;
    Status s = exchange(rank ^ distance, data + w.begin * element, w.length * element,
                        data + their_begin * element, (outer.length - w.length) * element);
    if (!s.ok()) return s;
    w = outer;
  }
  return Status::OK();
}

}  // namespace adasum
}  // namespace tutti
