#include "tuning/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace tutti {
namespace tuning {
namespace {

// Length scales tried, in unit-cube coordinates: from features a tenth of the range wide to
// almost linear trends. Longer scales would let the signal variance grow without bound.
const double kLengthScales[] = {0.08, 0.12, 0.18, 0.27, 0.4, 0.6, 0.9, 1.35, 2.0};
// Noise ratios tried: the floor times powers of three.
const int kNoiseSteps = 6;
// A coordinate pass over per-dimension length scales needs this many points per dimension
// to be better than fitting noise.
const size_t kPointsPerDimensionForScales = 3;

}  // namespace

double Matern52(const Point& a, const Point& b, const std::vector<double>& length_scales) {
  double squared = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = (a[i] - b[i]) / length_scales[i];
    squared += d * d;
  }
  const double r = std::sqrt(5.0 * squared);
  return (1.0 + r + r * r / 3.0) * std::exp(-r);
}

bool GaussianProcess::FitWith(std::vector<Point> x, std::vector<double> y,
                              const KernelParams& params) {
  const size_t n = x.size();
  double mean = 0.0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(n);
  double variance = 0.0;
  for (double v : y) variance += (v - mean) * (v - mean);
  variance /= static_cast<double>(n);
  // A constant score (or a single one) has no scale of its own: keep the units.
  const double scale = variance > 0.0 ? std::sqrt(variance) : 1.0;

  SquareMatrix k(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) k(i, j) = k(j, i) = Matern52(x[i], x[j], params.length_scales);
    k(i, i) = 1.0 + params.noise_ratio;
  }
  SquareMatrix lower;
  if (!CholeskyFactor(k, &lower)) return false;

  std::vector<double> z(n);
  for (size_t i = 0; i < n; ++i) z[i] = (y[i] - mean) / scale;
  std::vector<double> alpha = CholeskySolve(lower, z);
  double quadratic = 0.0;
  for (size_t i = 0; i < n; ++i) quadratic += z[i] * alpha[i];
  // Maximum-likelihood signal variance for this correlation; floored so a constant score
  // still has a (tiny) positive variance.
  const double signal_variance = std::max(quadratic / static_cast<double>(n), 1e-12);
  const double kLog2Pi = 1.8378770664093453;  // log(2 pi)
  log_likelihood_ = -0.5 * static_cast<double>(n) * (std::log(signal_variance) + 1.0 + kLog2Pi) -
                    0.5 * CholeskyLogDeterminant(lower);

  x_ = std::move(x);
  y_mean_ = mean;
  y_scale_ = scale;
  params_ = params;
  signal_variance_ = signal_variance;
  lower_ = std::move(lower);
  alpha_ = std::move(alpha);
  return true;
}

void GaussianProcess::Fit(std::vector<Point> x, std::vector<double> y, double min_noise_ratio) {
  const size_t dims = x.front().size();
  KernelParams best;
  double best_likelihood = -std::numeric_limits<double>::infinity();
  auto consider = [&](const KernelParams& candidate) {
    if (FitWith(x, y, candidate) && log_likelihood_ > best_likelihood) {
      best_likelihood = log_likelihood_;
      best = candidate;
    }
  };
  auto noise_sweep = [&](KernelParams candidate) {
    for (int step = 0; step < kNoiseSteps; ++step) {
      candidate.noise_ratio = min_noise_ratio * std::pow(3.0, step);
      consider(candidate);
    }
  };
  for (double scale : kLengthScales) noise_sweep({std::vector<double>(dims, scale), 0.0});
  if (dims > 1 && x.size() >= kPointsPerDimensionForScales * dims) {
    for (size_t d = 0; d < dims; ++d) {
      KernelParams candidate = best;
      for (double scale : kLengthScales) {
        candidate.length_scales[d] = scale;
        noise_sweep(candidate);
      }
    }
  }
  if (best_likelihood == -std::numeric_limits<double>::infinity()) {
    // Only a noise floor too small to absorb duplicated points gets here; a correlation
    // matrix plus the identity always factors.
    best = {std::vector<double>(dims, kLengthScales[0]), 1.0};
  }
  FitWith(std::move(x), std::move(y), best);
}

GaussianProcess::Prediction GaussianProcess::Predict(const Point& point) const {
  const size_t n = x_.size();
  std::vector<double> k(n);
  double mean = 0.0;
  for (size_t i = 0; i < n; ++i) {
    k[i] = Matern52(point, x_[i], params_.length_scales);
    mean += k[i] * alpha_[i];
  }
  const std::vector<double> v = SolveLower(lower_, k);
  double explained = 0.0;
  for (double e : v) explained += e * e;
  const double variance = signal_variance_ * std::max(1.0 - explained, 0.0);
  Prediction p;
  p.mean = y_mean_ + y_scale_ * mean;
  p.stddev = y_scale_ * std::sqrt(variance);
  return p;
}

}  // namespace tuning
}  // namespace tutti
