// Autotune (TUTTI_AUTOTUNE=1), run by rank 0: measures the allreduce throughput of the job
// under one setting of (cycle time, fusion threshold, response cache on/off) for a sample of
// cycles, hands the score to a Bayesian optimiser (tuning/bayesian_tuner.h) and announces
// its next setting, which every rank adopts at the same cycle through negotiation. After
// the optimiser converges the best setting stays. TUTTI_AUTOTUNE_LOG records every sample.
#ifndef TUTTI_SRC_AUTOTUNE_H_
#define TUTTI_SRC_AUTOTUNE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/config.h"
#include "tuning/bayesian_tuner.h"

namespace tutti {

class AutotuneSession {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AutotuneSession(const Config& config);
  ~AutotuneSession();

  // Called after every cycle with the bytes this cycle allreduced. Returns true, with the
  // setting to announce as {cycle time ms, fusion threshold bytes, cache 0/1}, when a sample
  // ended and the setting changes.
  bool Observe(int64_t bytes, Clock::time_point now, std::vector<double>* setting);

  int samples() const { return tuner_ ? tuner_->samples() : 0; }
  bool converged() const { return !tuner_ || tuner_->converged(); }

 private:
  void Log(const std::string& line);

  std::unique_ptr<tuning::BayesianTuner> tuner_;
  const int warmup_samples_;
  const int steps_per_sample_;
  int warmups_done_ = 0;
  int steps_ = 0;
  int64_t bytes_ = 0;
  Clock::time_point sample_start_;
  bool started_ = false;
  bool settling_ = false;  // the next sample straddles a change of setting
  std::FILE* log_ = nullptr;
};

}  // namespace tutti

#endif  // TUTTI_SRC_AUTOTUNE_H_
