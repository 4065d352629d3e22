#include "tuning/linear_algebra.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tutti {
namespace tuning {
namespace {

SquareMatrix FromRows(const std::vector<std::vector<double>>& rows) {
  SquareMatrix m(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows.size(); ++j) m(i, j) = rows[i][j];
  }
  return m;
}

TEST(LinearAlgebraTest, CholeskyOfAKnownMatrix) {
  const SquareMatrix a = FromRows({{4, 12, -16}, {12, 37, -43}, {-16, -43, 98}});
  SquareMatrix l;
  ASSERT_TRUE(CholeskyFactor(a, &l));
  const SquareMatrix expected = FromRows({{2, 0, 0}, {6, 1, 0}, {-8, 5, 3}});
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(l(i, j), expected(i, j), 1e-12) << i << "," << j;
  }
  EXPECT_NEAR(CholeskyLogDeterminant(l), std::log(36.0), 1e-12);  // det = (2 * 1 * 3)^2
}

TEST(LinearAlgebraTest, NotPositiveDefiniteIsRefused) {
  SquareMatrix l;
  EXPECT_FALSE(CholeskyFactor(FromRows({{1, 2}, {2, 1}}), &l));   // eigenvalue -1
  EXPECT_FALSE(CholeskyFactor(FromRows({{1, 1}, {1, 1}}), &l));   // singular
  EXPECT_FALSE(CholeskyFactor(FromRows({{-1, 0}, {0, 1}}), &l));  // negative diagonal
}

TEST(LinearAlgebraTest, SolvesARandomSystem) {
  // A = B B^T + n I is positive definite; check A x = b to rounding.
  const size_t n = 40;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  SquareMatrix b_matrix(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) b_matrix(i, j) = uniform(rng);
  }
  SquareMatrix a(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = i == j ? static_cast<double>(n) : 0.0;
      for (size_t k = 0; k < n; ++k) sum += b_matrix(i, k) * b_matrix(j, k);
      a(i, j) = sum;
    }
  }
  std::vector<double> rhs(n);
  for (double& v : rhs) v = uniform(rng);

  SquareMatrix l;
  ASSERT_TRUE(CholeskyFactor(a, &l));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) EXPECT_EQ(l(i, j), 0.0);  // lower triangular
  }
  const std::vector<double> x = CholeskySolve(l, rhs);
  for (size_t i = 0; i < n; ++i) {
    double ax = 0.0;
    for (size_t j = 0; j < n; ++j) ax += a(i, j) * x[j];
    EXPECT_NEAR(ax, rhs[i], 1e-9) << i;
  }

  // The two triangular halves on their own.
  const std::vector<double> y = SolveLower(l, rhs);
  for (size_t i = 0; i < n; ++i) {
    double ly = 0.0;
    for (size_t j = 0; j <= i; ++j) ly += l(i, j) * y[j];
    EXPECT_NEAR(ly, rhs[i], 1e-9) << i;
  }
  const std::vector<double> z = SolveLowerTransposed(l, rhs);
  for (size_t i = 0; i < n; ++i) {
    double ltz = 0.0;
    for (size_t j = i; j < n; ++j) ltz += l(j, i) * z[j];
    EXPECT_NEAR(ltz, rhs[i], 1e-9) << i;
  }
}

}  // namespace
}  // namespace tuning
}  // namespace tutti
