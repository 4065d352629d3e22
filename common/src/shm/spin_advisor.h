// Whether a shared-memory wait should spin before it yields the CPU.
//
// Spinning pays when the awaited peer runs on another CPU: it arrives within microseconds
// and a yield or a sleep would only add latency. It is pure loss when the scheduler has put
// the peer on this rank's CPU (two ranks sharing one core while the other core is busy
// elsewhere): the peer cannot move until this rank gives the CPU up, so every wait costs a
// whole spin (30 us) for nothing — a back-to-back 4-byte allreduce took 80 us instead of
// 6 us in such a phase. The advisor learns that from the waits themselves: a wait whose
// spin ran out and which then ended at the first yields marks spinning as useless; after
// two in a row the waits yield at once, spinning again every kProbeEvery waits to notice
// when the ranks are apart again (a wait that ends while spinning).
#ifndef TUTTI_SRC_SHM_SPIN_ADVISOR_H_
#define TUTTI_SRC_SHM_SPIN_ADVISOR_H_

#include <cstdint>

namespace tutti {
namespace shm {

class SpinAdvisor {
 public:
  enum class Outcome {
    kDuringSpin,      // the peer arrived while this rank spun: it runs elsewhere
    kAtFirstYields,   // the spin ran out and the peer arrived as soon as this rank yielded
    kLater,           // a long wait (the peer was busy): says nothing about placement
  };

  static constexpr int kUselessToStop = 2;
  static constexpr uint32_t kProbeEvery = 32;
  // Yields after a spin that still count as "at once" (the peer ran in between).
  static constexpr int kFirstYields = 4;

  // Asked once at the start of each wait that may spin.
  bool ShouldSpin() {
    if (!skipping_) return true;
    return ++waits_skipped_ % kProbeEvery == 0;
  }

  // How the wait that ShouldSpin() was asked for ended, if it spun.
  void Record(Outcome outcome) {
    switch (outcome) {
      case Outcome::kDuringSpin:
        useless_ = 0;
        skipping_ = false;
        break;
      case Outcome::kAtFirstYields:
        if (++useless_ >= kUselessToStop) skipping_ = true;
        break;
      case Outcome::kLater:
        break;
    }
  }

  // Forgets what the waits said: the ranks were just put on different CPUs.
  void Reset() {
    useless_ = 0;
    skipping_ = false;
  }

  bool skipping() const { return skipping_; }

 private:
  int useless_ = 0;
  bool skipping_ = false;
  uint32_t waits_skipped_ = 0;
};

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_SPIN_ADVISOR_H_
