// Copies into the segment's slots that bypass this CPU's caches (non-temporal stores).
//
// Why: a slot line that a peer read last is in the peer's cache. An ordinary store first
// fetches the line from there; while the two vCPUs of a VM run on cores that share no cache,
// each such fetch crosses between the cores, and the pipeline runs 3-4x slower than while
// they share one. A streaming store writes whole lines to memory without fetching them, and
// the peer then reads them from memory. Sharing a cache, ordinary stores are faster (the line
// never leaves it): the measured choice (algorithm_choice.h) picks per size class.
#ifndef TUTTI_SRC_SHM_STREAMING_COPY_H_
#define TUTTI_SRC_SHM_STREAMING_COPY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tutti {
namespace shm {

// Copies n bytes from `from` to `to` with streaming stores where the target is 16-byte
// aligned (the ends that are not, with memcpy). The stores are ordered only by
// StreamingFence(): call it before publishing what was written.
inline void StreamingCopy(char* to, const char* from, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min<size_t>(n, (16 - (reinterpret_cast<uintptr_t>(to) & 15)) & 15);
  std::memcpy(to, from, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), d);
  }
  for (; i + 16 <= n; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
  }
  std::memcpy(to + i, from + i, n - i);
#else
  std::memcpy(to, from, n);
#endif
}

// Orders the streaming stores before the stores that follow (a phase posted to the peers).
inline void StreamingFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_STREAMING_COPY_H_
