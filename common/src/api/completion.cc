// tutti_completion: a request's outcome written by the core's thread and awaited by another,
// with a futex so that a done request with nobody asleep costs no system call.
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>

#include "tutti/c_api.h"

namespace {

enum : int32_t { kPending = 0, kDone = 1, kPendingWithSleeper = 2 };

// How long a waiter polls (yielding the CPU) before it sleeps: most small requests finish
// within this, and a sleep plus wake-up costs about as much again.
const auto kPollTime = std::chrono::microseconds(60);

long Futex(int32_t* word, int op, int32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

extern "C" {

void tutti_completion_done(void* user_data, tutti_status status, const char* message) {
  auto* completion = static_cast<tutti_completion*>(user_data);
  completion->status = status;
  completion->message[0] = '\0';
  if (message != nullptr) {
    std::strncpy(completion->message, message, sizeof(completion->message) - 1);
    completion->message[sizeof(completion->message) - 1] = '\0';
  }
  if (__atomic_exchange_n(&completion->state, kDone, __ATOMIC_ACQ_REL) == kPendingWithSleeper) {
    Futex(&completion->state, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  }
}

int tutti_completion_test(const tutti_completion* completion) {
  return __atomic_load_n(&completion->state, __ATOMIC_ACQUIRE) == kDone ? 1 : 0;
}

int tutti_completion_wait(tutti_completion* completion, double timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const bool forever = timeout_seconds < 0;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(forever ? 0 : timeout_seconds));
  while (Clock::now() - start < kPollTime) {
    if (tutti_completion_test(completion)) return 1;
    sched_yield();
  }
  while (true) {
    int32_t state = kPending;
    if (!__atomic_compare_exchange_n(&completion->state, &state, kPendingWithSleeper, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
        state == kDone) {
      return 1;
    }
    timespec slice{0, 0};
    if (forever) {
      slice.tv_sec = 1;
    } else {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return tutti_completion_test(completion);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      slice.tv_sec = ns / 1000000000;
      slice.tv_nsec = ns % 1000000000;
    }
    Futex(&completion->state, FUTEX_WAIT_PRIVATE, kPendingWithSleeper, &slice);
    if (tutti_completion_test(completion)) return 1;
  }
}

}  // extern "C"
