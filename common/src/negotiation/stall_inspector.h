// Rank 0's watch over requests that wait for other ranks (TUTTI_STALL_CHECK_*): a warning
// listing them once per check time, failing them after the shutdown time, and failing every
// waiting request when the job is deadlocked. What it finds travels in the coordinator's
// answer of a negotiation, so every rank logs the same warning and fails the same requests.
// Background thread of rank 0 only.
#ifndef TUTTI_SRC_NEGOTIATION_STALL_INSPECTOR_H_
#define TUTTI_SRC_NEGOTIATION_STALL_INSPECTOR_H_

#include <chrono>

#include "base/config.h"
#include "negotiation/negotiation.h"
#include "requests/request.h"

namespace tutti {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  // Reads the stall settings of `config`; the first warning comes a check time after `start`.
  StallInspector(const Config& config, Clock::time_point start);

  // Whether Inspect would add something now, so that a negotiation must run this cycle.
  bool Due(const Coordinator& coordinator, Clock::time_point now) const;
  // Adds to *answer the failures of requests stalled past the shutdown time, of every waiting
  // request when the job is deadlocked, and (at most once per check time) a warning that
  // lists the stalled requests.
  void Inspect(Coordinator* coordinator, Clock::time_point now, ResponseList* answer);

 private:
  const bool disabled_;
  const Clock::duration check_;
  const double check_seconds_;  // as configured, for the messages
  const bool fail_stalled_;  // TUTTI_STALL_SHUTDOWN_TIME_SECONDS > 0
  const Clock::duration shutdown_;
  Clock::time_point last_report_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_NEGOTIATION_STALL_INSPECTOR_H_
