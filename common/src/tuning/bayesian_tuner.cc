#include "tuning/bayesian_tuner.h"

#include <algorithm>
#include <cmath>
#include <locale>
#include <sstream>
#include <utility>

namespace tutti {
namespace tuning {
namespace {

// Candidates for the EI maximisation: uniform over the cube, and Gaussian steps of a few
// sizes around each of the best measured settings.
const int kRandomCandidates = 1000;
const int kLocalCenters = 3;
const int kLocalCandidatesPerCenter = 100;
const double kLocalSteps[] = {0.01, 0.03, 0.1, 0.3};
const double kBooleanFlipProbability = 0.2;

double ExpectedImprovement(double mean, double stddev, double incumbent) {
  const double gain = mean - incumbent;
  if (!(stddev > 1e-12 * (std::fabs(incumbent) + 1e-300))) return std::max(gain, 0.0);
  const double z = gain / stddev;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846);
  return std::max(gain * cdf + stddev * pdf, 0.0);
}

// The radical inverse of `index` in `base`: the index-th element of a Halton sequence.
double RadicalInverse(int index, int base) {
  double result = 0.0;
  double digit_value = 1.0 / base;
  for (int i = index; i > 0; i /= base) {
    result += (i % base) * digit_value;
    digit_value /= base;
  }
  return result;
}

int NthPrime(int n) {
  int found = -1;
  for (int candidate = 2;; ++candidate) {
    bool prime = true;
    for (int d = 2; d * d <= candidate; ++d) prime = prime && candidate % d != 0;
    if (prime && ++found == n) return candidate;
  }
}

bool BadName(const std::string& name) {
  return name.empty() || name.find_first_of(",\"\r\n") != std::string::npos;
}

double Clamp01(double u) { return std::min(std::max(u, 0.0), 1.0); }

}  // namespace

Status BayesianTuner::Create(std::vector<Dimension> dims, std::vector<double> start,
                             const Options& options, std::unique_ptr<BayesianTuner>* tuner) {
  if (dims.empty()) return Status::InvalidArgument("tuner: no dimensions to tune");
  if (start.size() != dims.size()) {
    return Status::InvalidArgument("tuner: " + std::to_string(start.size()) +
                                   " start values for " + std::to_string(dims.size()) +
                                   " dimensions");
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    Dimension& dim = dims[i];
    if (BadName(dim.name)) {
      return Status::InvalidArgument("tuner: dimension name '" + dim.name +
                                     "' must be non-empty without commas, quotes or newlines");
    }
    const std::string what = "tuner: dimension '" + dim.name + "'";
    if (!std::isfinite(start[i])) return Status::InvalidArgument(what + ": start is not finite");
    if (dim.scale == Dimension::kBoolean) {
      if (start[i] != 0.0 && start[i] != 1.0) {
        return Status::InvalidArgument(what + ": boolean start must be 0 or 1");
      }
      dim.min = 0.0;
      dim.max = 1.0;
      continue;
    }
    if (!std::isfinite(dim.min) || !std::isfinite(dim.max) || !(dim.min < dim.max)) {
      return Status::InvalidArgument(what + ": needs finite min < max");
    }
    if (dim.scale == Dimension::kLog && !(dim.min > 0.0)) {
      return Status::InvalidArgument(what + ": a log scale needs min > 0");
    }
    start[i] = std::min(std::max(start[i], dim.min), dim.max);
  }
  if (options.initial_samples < 1 || options.max_samples < options.initial_samples) {
    return Status::InvalidArgument("tuner: needs 1 <= initial samples (" +
                                   std::to_string(options.initial_samples) +
                                   ") <= max samples (" + std::to_string(options.max_samples) +
                                   ")");
  }
  if (!(options.noise >= 1e-6 && options.noise <= 100.0)) {
    return Status::InvalidArgument("tuner: noise ratio must be in [1e-6, 100]");
  }
  if (!(options.min_relative_improvement >= 0.0) ||
      !std::isfinite(options.min_relative_improvement)) {
    return Status::InvalidArgument("tuner: minimum relative improvement must be >= 0");
  }
  tuner->reset(new BayesianTuner(std::move(dims), std::move(start), options));
  return Status::OK();
}

BayesianTuner::BayesianTuner(std::vector<Dimension> dims, std::vector<double> start,
                             const Options& options)
    : dims_(std::move(dims)), options_(options), rng_(options.seed) {
  options_.min_samples =
      std::min(std::max(options_.min_samples, options_.initial_samples), options_.max_samples);
  for (size_t i = 0; i < dims_.size(); ++i) design_shift_.push_back(Uniform());
  start_unit_ = ToUnit(start);
  next_unit_ = start_unit_;
  next_ = std::move(start);
  best_ = next_;
}

Point BayesianTuner::ToUnit(const std::vector<double>& real) const {
  Point unit(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) {
    const Dimension& d = dims_[i];
    switch (d.scale) {
      case Dimension::kLinear:
        unit[i] = (real[i] - d.min) / (d.max - d.min);
        break;
      case Dimension::kLog:
        unit[i] = std::log(real[i] / d.min) / std::log(d.max / d.min);
        break;
      case Dimension::kBoolean:
        unit[i] = real[i] >= 0.5 ? 1.0 : 0.0;
        break;
    }
    unit[i] = Clamp01(unit[i]);
  }
  return unit;
}

std::vector<double> BayesianTuner::ToReal(const Point& unit) const {
  std::vector<double> real(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) {
    const Dimension& d = dims_[i];
    const double u = Clamp01(unit[i]);
    switch (d.scale) {
      case Dimension::kLinear:
        real[i] = d.min + u * (d.max - d.min);
        break;
      case Dimension::kLog:
        real[i] = d.min * std::exp(u * std::log(d.max / d.min));
        break;
      case Dimension::kBoolean:
        real[i] = u >= 0.5 ? 1.0 : 0.0;
        break;
    }
    // Rounding must not step outside the bounds.
    real[i] = std::min(std::max(real[i], d.min), d.max);
  }
  return real;
}

// Design point `index` >= 1 (0 is the start): continuous dimensions follow a shifted Halton
// sequence, one prime base each; boolean number b flips its start value where bit b of the
// index is set, so the design has each boolean both ways.
Point BayesianTuner::DesignPoint(int index) const {
  Point unit(dims_.size());
  int continuous = 0;
  int booleans = 0;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].scale == Dimension::kBoolean) {
      const bool flip = booleans < 30 && ((index >> booleans) & 1);
      unit[i] = flip ? 1.0 - start_unit_[i] : start_unit_[i];
      ++booleans;
    } else {
      const double u = RadicalInverse(index, NthPrime(continuous++)) + design_shift_[i];
      unit[i] = u - std::floor(u);
    }
  }
  return unit;
}

double BayesianTuner::Uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1), 53 bits
}

double BayesianTuner::Gaussian() {
  const double radius = std::sqrt(-2.0 * std::log(1.0 - Uniform()));  // 1 - U is in (0, 1]
  return radius * std::cos(2.0 * 3.14159265358979323846 * Uniform());
}

void BayesianTuner::SetNext(const Point& unit) {
  next_unit_ = unit;
  next_ = ToReal(unit);
}

Status BayesianTuner::Record(double score) {
  if (!std::isfinite(score)) {
    return Status::InvalidArgument("tuner: score " + std::to_string(score) + " is not finite");
  }
  if (converged_) return Status::OK();
  points_.push_back(next_unit_);
  settings_.push_back(next_);
  scores_.push_back(score);
  from_search_.push_back(next_from_search_);
  FitAndPickBest();

  const int n = samples();
  if (n < options_.initial_samples) {
    SetNext(DesignPoint(n));
    next_from_search_ = false;
    return Status::OK();
  }
  bool stop = n >= options_.max_samples;
  Point candidate;
  if (!stop) {
    double improvement = 0.0;
    candidate = MaximiseExpectedImprovement(&improvement);
    stop = n >= options_.min_samples &&
           improvement < options_.min_relative_improvement * std::fabs(best_prediction_);
  }
  if (stop) {
    converged_ = true;
    next_unit_ = points_[best_index_];
    next_ = best_;
  } else {
    SetNext(candidate);
    next_from_search_ = true;
  }
  return Status::OK();
}

void BayesianTuner::FitAndPickBest() {
  gp_.Fit(points_, scores_, options_.noise);
  best_index_ = 0;
  best_prediction_ = gp_.Predict(points_[0]).mean;
  for (size_t i = 1; i < points_.size(); ++i) {
    const double mean = gp_.Predict(points_[i]).mean;
    if (mean > best_prediction_) {
      best_prediction_ = mean;
      best_index_ = i;
    }
  }
  best_ = settings_[best_index_];
}

Point BayesianTuner::MaximiseExpectedImprovement(double* improvement) {
  Point best_candidate = points_[best_index_];
  double best_ei = -1.0;
  auto consider = [&](const Point& candidate) {
    const GaussianProcess::Prediction p = gp_.Predict(candidate);
    const double ei = ExpectedImprovement(p.mean, p.stddev, best_prediction_);
    if (ei > best_ei) {
      best_ei = ei;
      best_candidate = candidate;
    }
  };

  // Measuring a known setting again is a candidate: it is how noise gets averaged out.
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t i = 0; i < points_.size(); ++i) {
    consider(points_[i]);
    ranked.emplace_back(-gp_.Predict(points_[i]).mean, i);
  }
  std::stable_sort(ranked.begin(), ranked.end());

  Point candidate(dims_.size());
  for (int c = 0; c < kRandomCandidates; ++c) {
    for (size_t i = 0; i < dims_.size(); ++i) {
      const double u = Uniform();
      candidate[i] = dims_[i].scale == Dimension::kBoolean ? (u < 0.5 ? 0.0 : 1.0) : u;
    }
    consider(candidate);
  }
  const int centers = std::min<int>(kLocalCenters, static_cast<int>(ranked.size()));
  for (int k = 0; k < centers; ++k) {
    const Point& center = points_[ranked[k].second];
    for (int c = 0; c < kLocalCandidatesPerCenter; ++c) {
      const double step = kLocalSteps[c % (sizeof(kLocalSteps) / sizeof(kLocalSteps[0]))];
      for (size_t i = 0; i < dims_.size(); ++i) {
        if (dims_[i].scale == Dimension::kBoolean) {
          const bool flip = Uniform() < kBooleanFlipProbability;
          candidate[i] = flip ? 1.0 - center[i] : center[i];
        } else {
          candidate[i] = Clamp01(center[i] + step * Gaussian());
        }
      }
      consider(candidate);
    }
  }
  *improvement = std::max(best_ei, 0.0);
  return best_candidate;
}

std::string BayesianTuner::LogHeader(const std::vector<Dimension>& dims) {
  std::string header = "sample";
  for (const Dimension& d : dims) header += "," + d.name;
  return header + ",score,phase";
}

std::string BayesianTuner::Line(const std::string& index, const std::vector<double>& values,
                                double score, const char* phase) const {
  std::ostringstream out;
  out.imbue(std::locale::classic());  // a '.' decimal point whatever the process locale
  out.precision(10);
  out << index;
  for (double v : values) out << ',' << v;
  out << ',' << score << ',' << phase;
  return out.str();
}

std::string BayesianTuner::LogLine() const {
  if (scores_.empty()) return "";
  const size_t last = scores_.size() - 1;
  return Line(std::to_string(last), settings_[last], scores_[last],
              from_search_[last] ? "search" : "initial");
}

std::string BayesianTuner::BestLogLine() const {
  return Line("best", best_, best_prediction_, "best");
}

}  // namespace tuning
}  // namespace tutti
