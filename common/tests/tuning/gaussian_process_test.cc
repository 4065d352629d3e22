#include "tuning/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tutti {
namespace tuning {
namespace {

const double kPi = 3.14159265358979323846;

TEST(GaussianProcessTest, Matern52Values) {
  const std::vector<double> unit = {1.0, 1.0};
  EXPECT_DOUBLE_EQ(Matern52({0.3, 0.7}, {0.3, 0.7}, unit), 1.0);
  // Distance 1 at length scale 1: (1 + sqrt5 + 5/3) exp(-sqrt5).
  const double s5 = std::sqrt(5.0);
  EXPECT_NEAR(Matern52({0.0, 0.0}, {1.0, 0.0}, unit), (1 + s5 + 5.0 / 3) * std::exp(-s5), 1e-15);
  EXPECT_DOUBLE_EQ(Matern52({0.1, 0.2}, {0.6, 0.9}, unit), Matern52({0.6, 0.9}, {0.1, 0.2}, unit));
  // Falls with distance; a longer length scale along a dimension means higher correlation.
  EXPECT_GT(Matern52({0.0, 0.0}, {0.2, 0.0}, unit), Matern52({0.0, 0.0}, {0.4, 0.0}, unit));
  EXPECT_GT(Matern52({0.0, 0.0}, {0.4, 0.0}, {2.0, 1.0}), Matern52({0.0, 0.0}, {0.4, 0.0}, unit));
  EXPECT_DOUBLE_EQ(Matern52({0.0, 0.0}, {0.0, 0.4}, {2.0, 1.0}),
                   Matern52({0.0, 0.0}, {0.0, 0.4}, unit));
}

TEST(GaussianProcessTest, InterpolatesKnownPointsAndIsSureOnlyThere) {
  std::vector<Point> x;
  std::vector<double> y;
  for (int i = 0; i <= 6; ++i) {
    const double u = i / 6.0;
    x.push_back({u});
    y.push_back(std::sin(2 * kPi * u));
  }
  GaussianProcess gp;
  ASSERT_TRUE(gp.FitWith(x, y, {{0.3}, 1e-8}));
  for (size_t i = 0; i < x.size(); ++i) {
    const GaussianProcess::Prediction p = gp.Predict(x[i]);
    EXPECT_NEAR(p.mean, y[i], 1e-4) << "at " << x[i][0];
    EXPECT_LT(p.stddev, 1e-3) << "at " << x[i][0];
  }
  // Between samples: close to the function, and less sure than at a sample.
  const GaussianProcess::Prediction mid = gp.Predict({1.0 / 12});
  EXPECT_NEAR(mid.mean, std::sin(2 * kPi / 12), 0.1);
  EXPECT_GT(mid.stddev, 10 * gp.Predict(x[1]).stddev);
}

TEST(GaussianProcessTest, VarianceShrinksWhereSamplesAre) {
  std::vector<Point> x = {{0.1, 0.1}, {0.2, 0.8}, {0.9, 0.3}};
  std::vector<double> y = {1.0, 2.0, 0.5};
  const KernelParams params = {{0.3, 0.3}, 0.01};
  GaussianProcess gp;
  ASSERT_TRUE(gp.FitWith(x, y, params));
  const Point probe = {0.6, 0.6};
  const double far = gp.Predict(probe).stddev;
  EXPECT_LT(gp.Predict(x[0]).stddev, far / 3);

  x.push_back({0.55, 0.6});
  y.push_back(1.5);
  ASSERT_TRUE(gp.FitWith(x, y, params));
  EXPECT_LT(gp.Predict(probe).stddev, far / 2);
}

TEST(GaussianProcessTest, RepeatedNoisyMeasurementsAreAveraged) {
  // Five measurements of one setting and a few elsewhere: the posterior mean there is near
  // the average of the five, not the luckiest one.
  std::vector<Point> x;
  std::vector<double> y;
  const double at_half[] = {9.0, 11.5, 10.2, 8.7, 10.6};  // mean 10
  for (double v : at_half) {
    x.push_back({0.5});
    y.push_back(v);
  }
  for (double u : {0.0, 0.2, 0.8, 1.0}) {
    x.push_back({u});
    y.push_back(10.0 - 8.0 * (u - 0.5) * (u - 0.5));
  }
  GaussianProcess gp;
  gp.Fit(x, y, 0.01);
  EXPECT_GT(gp.params().noise_ratio, 0.01);  // the likelihood saw the scatter
  EXPECT_NEAR(gp.Predict({0.5}).mean, 10.0, 0.5);
  EXPECT_GT(gp.Predict({0.5}).stddev, 0.05);
}

TEST(GaussianProcessTest, LikelihoodPicksLengthScaleFromTheData) {
  std::vector<Point> x;
  std::vector<double> smooth, wiggly;
  for (int i = 0; i < 25; ++i) {
    const double u = i / 24.0;
    x.push_back({u});
    smooth.push_back(0.3 * u);
    wiggly.push_back(std::sin(8 * kPi * u));
  }
  GaussianProcess smooth_gp, wiggly_gp;
  smooth_gp.Fit(x, smooth, 0.001);
  wiggly_gp.Fit(x, wiggly, 0.001);
  EXPECT_GT(smooth_gp.params().length_scales[0], 2 * wiggly_gp.params().length_scales[0]);
  EXPECT_LT(wiggly_gp.params().length_scales[0], 0.2);
  EXPECT_TRUE(std::isfinite(wiggly_gp.log_marginal_likelihood()));
}

TEST(GaussianProcessTest, ScoreUnitsDoNotMatter) {
  // Throughput-sized scores (1e9 bytes/s) with an offset fit like their standardised form.
  std::vector<Point> x = {{0.1, 0.0}, {0.4, 1.0}, {0.7, 0.0}, {0.9, 1.0}, {0.3, 0.0}};
  std::vector<double> y = {1.0, 3.0, 2.0, 2.5, 1.5};
  std::vector<double> scaled;
  for (double v : y) scaled.push_back(2e9 + 1e9 * v);
  GaussianProcess small, large;
  small.Fit(x, y, 0.01);
  large.Fit(x, scaled, 0.01);
  EXPECT_EQ(small.params().length_scales, large.params().length_scales);
  EXPECT_EQ(small.params().noise_ratio, large.params().noise_ratio);
  const Point probe = {0.5, 1.0};
  EXPECT_NEAR(large.Predict(probe).mean, 2e9 + 1e9 * small.Predict(probe).mean, 1.0);
  EXPECT_NEAR(large.Predict(probe).stddev, 1e9 * small.Predict(probe).stddev, 1.0);
}

TEST(GaussianProcessTest, ConstantScoresAndDuplicatePoints) {
  // No spread at all, and the same point twice: still a finite, exact model.
  GaussianProcess gp;
  gp.Fit({{0.5}, {0.5}, {0.2}}, {4.0, 4.0, 4.0}, 0.01);
  EXPECT_DOUBLE_EQ(gp.Predict({0.7}).mean, 4.0);
  EXPECT_TRUE(std::isfinite(gp.Predict({0.7}).stddev));
  gp.Fit({{0.3}}, {7.0}, 0.01);  // a single point
  EXPECT_DOUBLE_EQ(gp.Predict({0.3}).mean, 7.0);
}

}  // namespace
}  // namespace tuning
}  // namespace tutti
