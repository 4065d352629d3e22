#include "base/at_fork.h"

#include <atomic>

namespace tutti {
namespace {

std::atomic<int> forked_from{0};

}  // namespace

int ForkedFrom() { return forked_from.load(std::memory_order_relaxed); }

void SetForkedFrom(int parent_pid) { forked_from.store(parent_pid, std::memory_order_relaxed); }

}  // namespace tutti
