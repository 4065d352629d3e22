// A Gaussian-process regression model of a noisy score over points of the unit cube.
//
// Model: score(x) = m + f(x) + e, with m the mean of the observed scores, f a zero-mean GP
// with a Matern 5/2 kernel (one length scale per dimension) and e independent Gaussian noise.
// Scores are standardised before fitting, so only shapes matter, not the score's units.
// The kernel's length scales and the noise-to-signal variance ratio are chosen by maximising
// the log marginal likelihood over a small grid (isotropic first, then one coordinate pass
// per dimension once there are enough points); the signal variance has a closed-form
// maximum-likelihood value for each grid point. The noise ratio never drops below a floor,
// which keeps repeated or nearby measurements from being interpolated exactly: the posterior
// mean then averages noise away instead of following it.
#ifndef TUTTI_SRC_TUNING_GAUSSIAN_PROCESS_H_
#define TUTTI_SRC_TUNING_GAUSSIAN_PROCESS_H_

#include <vector>

#include "tuning/linear_algebra.h"

namespace tutti {
namespace tuning {

using Point = std::vector<double>;

struct KernelParams {
  std::vector<double> length_scales;  // one per dimension, in unit-cube coordinates
  double noise_ratio = 0.01;          // noise variance / signal variance
};

// Matern 5/2 correlation (1 at distance 0) between two points.
double Matern52(const Point& a, const Point& b, const std::vector<double>& length_scales);

class GaussianProcess {
 public:
  struct Prediction {
    double mean = 0.0;    // posterior mean of the score (noise-free), in score units
    double stddev = 0.0;  // posterior standard deviation of the noise-free score
  };

  // Fits the model to observations `y` at `x` (at least one point, all of one dimension),
  // choosing the hyperparameters by marginal likelihood with noise_ratio >= min_noise_ratio.
  void Fit(std::vector<Point> x, std::vector<double> y, double min_noise_ratio);

  // Fits with fixed hyperparameters. False when the kernel matrix is not positive definite
  // (the model is then unchanged).
  bool FitWith(std::vector<Point> x, std::vector<double> y, const KernelParams& params);

  // Posterior at `point`. Requires a successful fit.
  Prediction Predict(const Point& point) const;

  const KernelParams& params() const { return params_; }
  // Log marginal likelihood of the standardised scores under the fitted hyperparameters.
  double log_marginal_likelihood() const { return log_likelihood_; }

 private:
  std::vector<Point> x_;
  double y_mean_ = 0.0;
  double y_scale_ = 1.0;
  KernelParams params_;
  double signal_variance_ = 1.0;     // of the standardised scores
  SquareMatrix lower_;               // Cholesky factor of correlation + noise_ratio * I
  std::vector<double> alpha_;        // (correlation + noise_ratio * I)^-1 * standardised y
  double log_likelihood_ = 0.0;
};

}  // namespace tuning
}  // namespace tutti

#endif  // TUTTI_SRC_TUNING_GAUSSIAN_PROCESS_H_
