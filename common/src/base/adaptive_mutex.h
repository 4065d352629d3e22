// A mutex whose contended lock spins for a moment before it sleeps (glibc's adaptive
// mutex). Where two threads take turns on short critical sections (a submitting thread and
// the core's thread on the request queue: a few hundred nanoseconds each), std::mutex puts
// the second one to sleep in the kernel at once, a context switch each way, several
// microseconds on small VMs. Elsewhere it is std::mutex's equal (lock, unlock, try_lock).
#ifndef TUTTI_SRC_ADAPTIVE_MUTEX_H_
#define TUTTI_SRC_ADAPTIVE_MUTEX_H_

#include <pthread.h>

namespace tutti {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
#if defined(__GLIBC__)
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&mutex_, &attributes);
    pthread_mutexattr_destroy(&attributes);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&mutex_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void lock() { pthread_mutex_lock(&mutex_); }
  void unlock() { pthread_mutex_unlock(&mutex_); }
  bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }

 private:
  pthread_mutex_t mutex_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_ADAPTIVE_MUTEX_H_
