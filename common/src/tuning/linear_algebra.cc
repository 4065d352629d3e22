#include "tuning/linear_algebra.h"

#include <cmath>
#include <utility>

namespace tutti {
namespace tuning {

bool CholeskyFactor(const SquareMatrix& a, SquareMatrix* lower) {
  const size_t n = a.size();
  SquareMatrix l(n);
  for (size_t j = 0; j < n; ++j) {
    double diagonal = a(j, j);
    for (size_t k = 0; k < j; ++k) diagonal -= l(j, k) * l(j, k);
    // Relative to the original diagonal: a pivot lost to rounding means "not positive".
    if (!(diagonal > 1e-12 * std::fabs(a(j, j)))) return false;
    const double pivot = std::sqrt(diagonal);
    l(j, j) = pivot;
    for (size_t i = j + 1; i < n; ++i) {
      double sum = a(i, j);
      for (size_t k = 0; k < j; ++k) sum -= l(i, k) * l(j, k);
      l(i, j) = sum / pivot;
    }
  }
  *lower = std::move(l);
  return true;
}

std::vector<double> SolveLower(const SquareMatrix& lower, std::vector<double> b) {
  const size_t n = lower.size();
  for (size_t i = 0; i < n; ++i) {
    double sum = b[i];
    for (size_t k = 0; k < i; ++k) sum -= lower(i, k) * b[k];
    b[i] = sum / lower(i, i);
  }
  return b;
}

std::vector<double> SolveLowerTransposed(const SquareMatrix& lower, std::vector<double> b) {
  const size_t n = lower.size();
  for (size_t i = n; i-- > 0;) {
    double sum = b[i];
    for (size_t k = i + 1; k < n; ++k) sum -= lower(k, i) * b[k];
    b[i] = sum / lower(i, i);
  }
  return b;
}

std::vector<double> CholeskySolve(const SquareMatrix& lower, std::vector<double> b) {
  return SolveLowerTransposed(lower, SolveLower(lower, std::move(b)));
}

double CholeskyLogDeterminant(const SquareMatrix& lower) {
  double sum = 0.0;
  for (size_t i = 0; i < lower.size(); ++i) sum += std::log(lower(i, i));
  return 2.0 * sum;
}

}  // namespace tuning
}  // namespace tutti
