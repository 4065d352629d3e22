#include "tuning/autotune.h"

#include "base/log.h"

namespace tutti {

AutotuneSession::AutotuneSession(const Config& config)
    : warmup_samples_(config.autotune_warmup_samples),
      steps_per_sample_(config.autotune_steps_per_sample) {
  std::vector<tuning::Dimension> dims = {
      {"cycle_time_ms", 0.1, 20.0, tuning::Dimension::kLog},
      {"fusion_threshold_bytes", double(1 << 20), double(256 << 20), tuning::Dimension::kLog},
      {"cache_enabled", 0, 1, tuning::Dimension::kBoolean},
  };
  tuning::BayesianTuner::Options options;
  options.max_samples = config.autotune_max_samples;
  options.noise = config.autotune_noise;
  options.initial_samples = std::min(options.initial_samples, options.max_samples);
  options.min_samples = std::min(options.min_samples, options.max_samples);
  std::vector<double> start = {config.cycle_time_ms,
                               static_cast<double>(config.fusion_threshold_bytes),
                               config.cache_capacity > 0 ? 1.0 : 0.0};
  Status s = tuning::BayesianTuner::Create(dims, start, options, &tuner_);
  if (!s.ok()) {
    LogWarning("autotune is off: " + s.message());
    tuner_.reset();
    return;
  }
  if (!config.autotune_log.empty()) {
    log_ = std::fopen(config.autotune_log.c_str(), "w");
    if (log_ == nullptr) {
      LogWarning("cannot write TUTTI_AUTOTUNE_LOG file '" + config.autotune_log + "'");
    }
    Log(tuning::BayesianTuner::LogHeader(dims));
  }
}

AutotuneSession::~AutotuneSession() {
  if (log_ != nullptr) std::fclose(log_);
}

void AutotuneSession::Log(const std::string& line) {
  if (log_ == nullptr || line.empty()) return;
  std::fprintf(log_, "%s\n", line.c_str());
  std::fflush(log_);
}

bool AutotuneSession::Observe(int64_t bytes, Clock::time_point now,
                              std::vector<double>* setting) {
  if (!tuner_ || tuner_->converged() || bytes <= 0) return false;
  if (!started_) {
    // The first sample starts with the first cycle that reduces anything.
    started_ = true;
    sample_start_ = now;
  }
  bytes_ += bytes;
  if (++steps_ < steps_per_sample_) return false;
  const double seconds = std::chrono::duration<double>(now - sample_start_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0;
  steps_ = 0;
  bytes_ = 0;
  sample_start_ = now;
  if (warmups_done_ < warmup_samples_ || settling_) {
    // The job is still warming up, or the window straddled a change of setting (it takes
    // effect a cycle after its announcement): nothing learned from this sample.
    if (!settling_) ++warmups_done_;
    settling_ = false;
    return false;
  }
  if (!tuner_->Record(score).ok()) return false;
  Log(tuner_->LogLine());
  if (tuner_->converged()) Log(tuner_->BestLogLine());
  *setting = tuner_->Next();
  settling_ = true;
  return true;
}

}  // namespace tutti
