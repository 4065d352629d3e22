// Online tuning of a few parameters whose effect can only be measured, noisily, one setting
// at a time: Bayesian optimisation with a Gaussian process and expected improvement.
//
// Why this method: each measurement costs a sampling window of real training time, so the
// tuner must find a good setting in a few dozen measurements. A Gaussian process
// (gaussian_process.h) gives, from every score seen so far, a prediction and an uncertainty
// for any untried setting; expected improvement (EI) turns the two into one number that
// favours settings either predicted good or still unknown, and is cheap to maximise.
//
// How it runs:
//  1. Initial design: the start setting (the configured values), then a deterministic
//     space-filling set: a Halton sequence with a seeded shift for the continuous dimensions
//     and a balanced on/off pattern for the boolean ones.
//  2. Then, after every score, the GP is refitted (kernel length scales and noise chosen by
//     marginal likelihood) and the next setting is the one of highest EI among random
//     candidates, local perturbations of the best settings, and the settings already measured.
//  3. Noise: the GP has a noise term with a floor (Options::noise), so it never interpolates a
//     lucky score. EI is measured against the best posterior MEAN at a measured setting, not
//     the best raw score, and measuring a setting again is a candidate like any other, so a
//     promising but uncertain setting gets repeated rather than trusted from one sample.
//  4. Stopping: after max_samples scores, or earlier (but not before min_samples) when the
//     largest EI is below min_relative_improvement times the best predicted score. The tuner
//     is then converged: Next() and Best() are the measured setting of highest posterior mean
//     (not the single luckiest sample), and they stay put.
//
// Everything is deterministic given the seed and the scores: the random candidates come from
// a std::mt19937_64 (fully specified by the standard) with the tuner's own transforms.
// Not thread-safe: one owner (rank 0's background thread) calls it between cycles; a Record()
// refits the GP and scores ~1,300 candidates, a few milliseconds at the sample counts used.
// Dimensions are searched in unit-cube coordinates: linear and log scales map [min, max] to
// [0, 1] (log scale: log(value) is linear), booleans are 0 or 1.
#ifndef TUTTI_SRC_TUNING_BAYESIAN_TUNER_H_
#define TUTTI_SRC_TUNING_BAYESIAN_TUNER_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "tuning/gaussian_process.h"

namespace tutti {
namespace tuning {

struct Dimension {
  enum Scale { kLinear, kLog, kBoolean };
  std::string name;  // a CSV column header: no commas, quotes or line breaks
  double min = 0.0;  // kLog: > 0; ignored for kBoolean (always 0 or 1)
  double max = 1.0;
  Scale scale = kLinear;
};

class BayesianTuner {
 public:
  struct Options {
    int initial_samples = 6;  // the start setting plus a space-filling design
    int min_samples = 10;     // no early stop before this many scores (clamped to the range
                              // [initial_samples, max_samples])
    int max_samples = 25;     // the tuner converges after this many scores at the latest
    uint64_t seed = 1;
    // Floor on the noise-to-signal variance ratio of the GP: larger keeps it from chasing
    // noise on a noisy machine, smaller lets it resolve smaller differences.
    double noise = 0.01;
    // Early stop when the best expected improvement is below this fraction of the best
    // predicted score.
    double min_relative_improvement = 0.002;
  };

  // Checks the dimensions, start and options: INVALID_ARGUMENT naming the problem. A start
  // value outside [min, max] is clamped; a boolean start must be 0 or 1.
  static Status Create(std::vector<Dimension> dims, std::vector<double> start,
                       const Options& options, std::unique_ptr<BayesianTuner>* tuner);

  // The setting to measure now, in real units, one value per dimension.
  const std::vector<double>& Next() const { return next_; }

  // Records the score (higher is better) measured with Next() and chooses the following
  // setting. Non-finite scores are refused (INVALID_ARGUMENT, nothing recorded). Once
  // converged, scores are ignored and Next() stays the best setting.
  Status Record(double score);

  bool converged() const { return converged_; }
  int samples() const { return static_cast<int>(scores_.size()); }

  // The measured setting of highest posterior mean (the start setting before any score).
  const std::vector<double>& Best() const { return best_; }
  // The posterior mean score of Best() (0 before any score).
  double BestPredictedScore() const { return best_prediction_; }

  // CSV for TUTTI_AUTOTUNE_LOG: the header, then one LogLine() after each Record() (the
  // sample just recorded: index from 0, its setting, its score, and "initial" or "search"),
  // and BestLogLine() once converged (index "best", Best(), its predicted score, "best").
  // Lines carry no trailing newline; LogLine() is empty before the first score.
  static std::string LogHeader(const std::vector<Dimension>& dims);
  std::string LogLine() const;
  std::string BestLogLine() const;

 private:
  BayesianTuner(std::vector<Dimension> dims, std::vector<double> start, const Options& options);

  Point ToUnit(const std::vector<double>& real) const;
  std::vector<double> ToReal(const Point& unit) const;
  Point DesignPoint(int index) const;
  double Uniform();
  double Gaussian();
  void FitAndPickBest();
  // Returns the candidate of highest expected improvement and that improvement.
  Point MaximiseExpectedImprovement(double* improvement);
  void SetNext(const Point& unit);
  std::string Line(const std::string& index, const std::vector<double>& values, double score,
                   const char* phase) const;

  std::vector<Dimension> dims_;
  Options options_;
  std::mt19937_64 rng_;
  Point start_unit_;
  std::vector<double> design_shift_;  // per dimension, for the Halton design

  std::vector<Point> points_;  // measured settings, unit coordinates
  std::vector<std::vector<double>> settings_;  // the same in real units
  std::vector<double> scores_;
  std::vector<bool> from_search_;  // whether each sample was chosen by EI

  Point next_unit_;
  std::vector<double> next_;
  bool next_from_search_ = false;
  GaussianProcess gp_;
  size_t best_index_ = 0;
  std::vector<double> best_;
  double best_prediction_ = 0.0;
  bool converged_ = false;
};

}  // namespace tuning
}  // namespace tutti

#endif  // TUTTI_SRC_TUNING_BAYESIAN_TUNER_H_
