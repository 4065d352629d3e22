// Adaptive summation (Adasum, Maleki et al., "Scaling Distributed Training with Adaptive
// Summation"): an allreduce that combines two partial results a and b of one tensor as
//   (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b
// instead of a + b, so parallel updates that point the same way are not double counted.
//
// The ranks of a set (a power of two) run it by recursive vector halving, distance doubling,
// the order Horovod 0.28.1 uses, so results agree with it: at distance d = 1, 2, 4, ... each
// rank keeps one half of its current window (the lower rank of a pair the first half),
// swaps the other half with rank ^ d and combines the two halves it now holds. The dot
// product and norms a combination needs are summed over the 2d ranks that hold pieces of
// the same two vectors. Then the windows are gathered back at d = size/2, ..., 1. A fused
// buffer keeps its tensor boundaries: every tensor gets its own dot product and norms.
//
// Precision, as Horovod's CPU implementation: dot products and norms accumulate in float64
// (float32 products are rounded to float32 first; float16 is widened exactly); the
// combination is computed in float64 for float32/float64 and in float32 (a multiply and a
// fused multiply-add) for float16. A vector with |x|^2 < 1e-8 keeps coefficient 1.
#ifndef TUTTI_SRC_ADASUM_H_
#define TUTTI_SRC_ADASUM_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "tutti/c_api.h"

namespace tutti {
namespace adasum {

// float16, float32 and float64: the dtypes Horovod's Adasum supports.
bool SupportsDtype(tutti_dtype dtype);
bool IsPowerOfTwo(int64_t n);

// Dot product a.b and squared norms |a|^2, |b|^2 of `count` elements.
struct DotAndNorms {
  double dot = 0;
  double a_norm_sq = 0;
  double b_norm_sq = 0;
};
DotAndNorms ComputeDotAndNorms(tutti_dtype dtype, const void* a, const void* b, int64_t count);

// The factor that multiplies vector x in a combination: 1 - dot / |x|^2 / 2, or 1 when
// |x|^2 < 1e-8 (a zero vector leaves the other one unchanged).
double Coefficient(double dot, double norm_sq);

// a[i] = a_coeff * a[i] + b_coeff * b[i] for `count` elements.
void ScaledAdd(tutti_dtype dtype, void* a, double a_coeff, const void* b, double b_coeff,
               int64_t count);

// Swaps data with `peer` (a rank of the set): sends send_bytes at `send` and receives
// recv_bytes into `recv`. Every rank of the set calls it at the same step (each with its own
// peer), so transports may implement it as a collective.
using Exchange = std::function<Status(int peer, const void* send, int64_t send_bytes,
                                      void* recv, int64_t recv_bytes)>;

// Adasum-reduces, in place, `buffer`: tensors of `counts` elements of `dtype` back to back,
// on rank `rank` of `size` ranks (a power of two). `scratch` holds at least as many bytes as
// `buffer`. Every rank ends with the same bits.
Status Allreduce(int rank, int size, tutti_dtype dtype, void* buffer,
                 const std::vector<int64_t>& counts, void* scratch, const Exchange& exchange);

}  // namespace adasum
}  // namespace tutti

#endif  // TUTTI_SRC_ADASUM_H_
