#include "negotiation/stall_inspector.h"

#include <cstdio>
#include <string>
#include <vector>

namespace tutti {
namespace {

std::chrono::steady_clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

std::string Joined(const std::vector<std::string>& items) {
  std::string list;
  for (const std::string& item : items) list += (list.empty() ? "" : "; ") + item;
  return list;
}

}  // namespace

StallInspector::StallInspector(const Config& config, Clock::time_point start)
    : disabled_(config.stall_check_disabled),
      check_(Seconds(config.stall_check_seconds)),
      check_seconds_(config.stall_check_seconds),
      fail_stalled_(config.stall_shutdown_seconds > 0),
      shutdown_(Seconds(config.stall_shutdown_seconds)),
      last_report_(start) {}

bool StallInspector::Due(const Coordinator& coordinator, Clock::time_point now) const {
  if (coordinator.pending() == 0) return false;
  const auto waited = now - coordinator.OldestPending();
  if (fail_stalled_ && waited >= shutdown_) return true;
  return !disabled_ && waited >= check_ && now - last_report_ >= check_;
}

void StallInspector::Inspect(Coordinator* coordinator, Clock::time_point now,
                             ResponseList* answer) {
  if (fail_stalled_) {
    for (Response& failed : coordinator->FailStalled(shutdown_)) {
      answer->responses.push_back(std::move(failed));
    }
  }
  if (disabled_) return;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", check_seconds_);
  if (coordinator->Deadlocked(check_)) {
    // Every rank waits for requests the others have not made, and nothing new came for the
    // stall check time: fail them all with the whole picture instead of waiting forever.
    const std::string why =
        std::string("deadlock: every rank is waiting for requests the others have not "
                    "submitted, and none submitted anything for ") + seconds +
        " s (TUTTI_STALL_CHECK_TIME_SECONDS; TUTTI_STALL_CHECK_DISABLE=1 turns this off). "
        "Waiting: " + Joined(coordinator->Stalled(std::chrono::seconds(0)));
    for (Response& failed : coordinator->FailAllWaiting(why)) {
      answer->responses.push_back(std::move(failed));
    }
  }
  if (now - last_report_ < check_) return;
  std::vector<std::string> stalled = coordinator->Stalled(check_);
  if (stalled.empty()) return;
  last_report_ = now;
  answer->warnings.push_back(
      std::string("stall: some ranks have waited more than ") + seconds +
      " s (TUTTI_STALL_CHECK_TIME_SECONDS) for others to submit the same tensors; every "
      "rank must submit the same names: " + Joined(stalled));
}

}  // namespace tutti
