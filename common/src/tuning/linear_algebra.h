// The little dense linear algebra the Gaussian process needs: a square matrix, its Cholesky
// factor and triangular solves. Matrices here are at most a few dozen rows (one per tuning
// sample), so plain loops are fast enough and keep the core free of a maths library.
#ifndef TUTTI_SRC_TUNING_LINEAR_ALGEBRA_H_
#define TUTTI_SRC_TUNING_LINEAR_ALGEBRA_H_

#include <cstddef>
#include <vector>

namespace tutti {
namespace tuning {

// A dense n x n matrix, row-major.
class SquareMatrix {
 public:
  explicit SquareMatrix(size_t n = 0) : n_(n), data_(n * n, 0.0) {}

  size_t size() const { return n_; }
  double& operator()(size_t row, size_t col) { return data_[row * n_ + col]; }
  double operator()(size_t row, size_t col) const { return data_[row * n_ + col]; }

 private:
  size_t n_;
  std::vector<double> data_;
};

// Factors the symmetric matrix `a` as L * L^T with L lower triangular (only the lower
// triangle of `a` is read). Returns false, leaving `lower` unspecified, when `a` is not
// numerically positive definite.
bool CholeskyFactor(const SquareMatrix& a, SquareMatrix* lower);

// Solves L * x = b for lower triangular L (forward substitution).
std::vector<double> SolveLower(const SquareMatrix& lower, std::vector<double> b);

// Solves L^T * x = b for lower triangular L (back substitution).
std::vector<double> SolveLowerTransposed(const SquareMatrix& lower, std::vector<double> b);

// Solves A * x = b given the Cholesky factor L of A.
std::vector<double> CholeskySolve(const SquareMatrix& lower, std::vector<double> b);

// log(det(A)) given the Cholesky factor L of A.
double CholeskyLogDeterminant(const SquareMatrix& lower);

}  // namespace tuning
}  // namespace tutti

#endif  // TUTTI_SRC_TUNING_LINEAR_ALGEBRA_H_
