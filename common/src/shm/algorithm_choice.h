// Chooses, per message size, among two or three algorithms for a large collective from their
// measured times on this host.
//
// Why measured and not fixed: which one wins changes with the machine and even within one
// run. The two vCPUs of a VM run, for seconds at a time, either on cores that share a cache
// or on cores that do not. Sharing one, the pipeline through the segment (copy in, reduce,
// copy out, chunk by chunk) is the fastest way for a 16 MiB allreduce; apart, every slot line
// it writes is fetched out of the other core's cache, and the same pipeline with streaming
// stores (which bypass the cache) is 3x faster than it, while it is 1.5x slower than it
// sharing one (docs/benchmarks.md, "Streaming stores while the vCPUs are apart"). The single
// copy between the ranks' buffers wins on some machines and sizes.
//
// Sizes fall into classes by their power of two. A class first tries each algorithm twice
// (the first time of each only warms it up: its page faults and cold caches say nothing
// about the next calls), then takes the one with the lowest recent time per byte (the
// median of its last three samples since it was last tried, the lower of two); every
// `interval` calls it tries another again for kTryCalls calls in a row (the others in turn),
// so a change of phase is noticed. The faster of a try's calls counts: the first often pays
// for what the other algorithm left behind (its memory in the caches) or for a peer that
// came late, and such a sample alone could confirm a wrong choice for many calls. The
// interval doubles (up to kMaxInterval; quadruples when the tried one was over 1.5x slower)
// while those tries confirm the choice and drops back to kMinInterval whenever the choice
// changes, so a stable machine pays for a try rarely. Slower samples of the chosen algorithm
// raise its estimate and can flip the choice by themselves: a lasting slow phase of the
// chosen algorithm is noticed at its second slow call (one slow call is an outlier), a fast
// phase of another at its next try.
//
// Used by the one rank that decides for the group (it publishes its choice with the call),
// from the thread that runs the group's collectives. What it learns is a property of the
// machine, not of one group: SharedAlgorithmChoice() keeps one per kind of call and group
// size for the whole process, so that a group set up again (a new init(), a new process set)
// does not pay for its warm-up and tries again.
#ifndef TUTTI_SRC_SHM_ALGORITHM_CHOICE_H_
#define TUTTI_SRC_SHM_ALGORITHM_CHOICE_H_

#include <cstddef>
#include <cstdint>

namespace tutti {
namespace shm {

class AlgorithmChoice {
 public:
  static constexpr int kMinInterval = 8;
  static constexpr int kMaxInterval = 64;
  static constexpr int kTryCalls = 2;
  static constexpr int kMaxAlgorithms = 3;

  // The size class of `bytes`: its power of two, 0-63.
  static int ClassOf(size_t bytes) {
    int c = 0;
    while (c < 63 && (size_t(1) << (c + 1)) <= bytes) ++c;
    return c;
  }

  // The algorithm (0 to algorithms - 1, at most kMaxAlgorithms) that the next call of
  // `bytes` should use. A caller passes the same count for a size class every time, except
  // that it may offer fewer (say, when another group cannot take the last one): the choice
  // is then among the first `algorithms` only.
  int Next(size_t bytes, int algorithms = 2) {
    if (algorithms < 2) return 0;  // nothing to choose
    if (algorithms > kMaxAlgorithms) algorithms = kMaxAlgorithms;
    Class& c = classes_[ClassOf(bytes)];
    c.algorithms = algorithms;
    // Warm-up: each algorithm twice. Counted when planned, not when recorded: a caller that
    // plans one call ahead (the group does) records a call only after planning the next.
    for (int a = 0; a < algorithms; ++a) {
      Window& w = c.recent[a];
      if (w.count == 0 && w.warm_up_planned < 2) {
        ++w.warm_up_planned;
        return a;
      }
    }
    if (c.try_calls_to_plan > 0 && c.tried < algorithms) {  // the rest of a try
      --c.try_calls_to_plan;
      return c.tried;
    }
    const int best = c.Best();
    if (++c.since_try >= c.interval) {
      int next = c.tried;  // the one after the last tried, other than the best
      do next = (next + 1) % algorithms; while (next == best);
      c.since_try = 0;
      c.trying = true;
      c.tried = next;
      c.best_before_try = best;
      c.try_calls_to_plan = kTryCalls - 1;
      c.try_calls_to_record = kTryCalls;
      return next;
    }
    return best;
  }

  // The time one call of `bytes` took with `algorithm` (one that Next returned).
  void Record(size_t bytes, int algorithm, int64_t ns) {
    Class& c = classes_[ClassOf(bytes)];
    const double per_byte = static_cast<double>(ns) / static_cast<double>(bytes > 0 ? bytes : 1);
    const int best_before = c.Best();
    const bool tried = c.trying && algorithm == c.tried;
    Window& w = c.recent[algorithm];
    if (!w.warm) {  // a first call pays for first touches (page faults, cold caches)
      w.warm = true;
      return;
    }
    if (tried && c.try_calls_to_record == kTryCalls) w.count = 0;  // older ones may be stale
    w.samples[w.next] = per_byte;
    w.next = (w.next + 1) % kWindow;
    if (w.count < kWindow) ++w.count;
    if (tried && --c.try_calls_to_record == 0) {  // the try is complete: judge it
      c.trying = false;
      if (c.Best() == best_before) {  // confirmed; by a wide margin, the next try can wait longer
        const bool wide = c.recent[algorithm].Median() > 1.5 * c.recent[best_before].Median();
        c.interval = c.interval * (wide ? 4 : 2) > kMaxInterval ? kMaxInterval
                                                                : c.interval * (wide ? 4 : 2);
      }
    }
    if (c.Best() != best_before) {  // a new choice: check it again soon
      c.interval = kMinInterval;
      c.since_try = 0;
    }
  }

  // The current estimate (ns per byte) of `algorithm` for sizes like `bytes`; 0 if untried.
  double Estimate(size_t bytes, int algorithm) const {
    return classes_[ClassOf(bytes)].recent[algorithm].Median();
  }

 private:
  // The last kWindow samples of one algorithm; their median is its estimate, so that one
  // outlier (a preempted rank) moves nothing and a lasting change shows at its second sample.
  // Outliers are slow ones (no call takes less than its work), so of two samples the lower
  // counts.
  static constexpr int kWindow = 3;
  struct Window {
    double samples[kWindow] = {0, 0, 0};
    int count = 0, next = 0;
    bool warm = false;  // the first sample, dropped, has been seen
    int warm_up_planned = 0;  // calls Next returned for the warm-up
    double Median() const {
      if (count == 0) return 0;
      if (count == 1) return samples[(next + kWindow - 1) % kWindow];
      if (count == 2) {
        const double a = samples[(next + kWindow - 1) % kWindow];
        const double b = samples[(next + kWindow - 2) % kWindow];
        return a < b ? a : b;
      }
      const double a = samples[0], b = samples[1], c = samples[2];
      return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
    }
  };
  struct Class {
    Window recent[kMaxAlgorithms];
    int algorithms = 2;  // offered by the last Next
    int interval = kMinInterval;
    int since_try = 0;
    bool trying = false;
    int tried = 0;  // the algorithm of the current (or last) try
    int best_before_try = 0;
    int try_calls_to_plan = 0;    // calls of the tried algorithm that Next still returns
    int try_calls_to_record = 0;  // samples of the try that Record still expects
    // The measured algorithm with the lowest estimate (0 while none is measured).
    int Best() const {
      int best = 0;
      for (int a = 1; a < algorithms; ++a) {
        const bool lower = recent[best].count == 0 || recent[a].Median() < recent[best].Median();
        if (recent[a].count > 0 && lower) best = a;
      }
      return best;
    }
  };


  Class classes_[64];
};

// The process's choice for calls of `kind` in groups of `size` ranks with `chunk_bytes`
// chunks; created on first use, never freed. `kind` names the kind of call and the set of
// algorithms it offers (the group's own numbering, single_copy.cc).
AlgorithmChoice* SharedAlgorithmChoice(int kind, int size, size_t chunk_bytes);

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_ALGORITHM_CHOICE_H_
