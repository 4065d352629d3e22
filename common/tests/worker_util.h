// Helpers shared by the multi-process test workers: checks that count failures per rank,
// completion tracking for asynchronous requests, and dtype encodings computed independently
// of the core.
#ifndef TUTTI_TESTS_WORKER_UTIL_H_
#define TUTTI_TESTS_WORKER_UTIL_H_

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace worker {

inline int failures = 0;
inline int checks = 0;
inline int my_rank = -1;

#define CHECK(cond, ...)                                                            \
  do {                                                                              \
    ++worker::checks;                                                               \
    if (!(cond)) {                                                                  \
      ++worker::failures;                                                           \
      std::fprintf(stderr, "rank %d: FAIL %s:%d: ", worker::my_rank, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                   \
    }                                                                               \
  } while (0)

// One asynchronous request: its completion and the outputs the core asked it to allocate.
struct Call {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  tutti_status status = TUTTI_OK;
  std::string message;
  size_t element_size = 4;
  std::vector<std::vector<char>> outputs;
  std::vector<std::vector<int64_t>> shapes;
};

inline void OnCallDone(void* user_data, tutti_status status, const char* message) {
  Call* c = static_cast<Call*>(user_data);
  std::lock_guard<std::mutex> lock(c->mutex);
  c->done = true;
  c->status = status;
  c->message = message ? message : "";
  c->cv.notify_all();
}

inline void* AllocateOutput(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  Call* c = static_cast<Call*>(user_data);
  if (c->outputs.size() <= static_cast<size_t>(index)) {
    c->outputs.resize(index + 1);
    c->shapes.resize(index + 1);
  }
  int64_t count = 1;
  for (int32_t i = 0; i < ndim; ++i) count *= shape[i];
  c->outputs[index].assign(std::max<int64_t>(count, 1) * c->element_size, 0);
  c->shapes[index].assign(shape, shape + ndim);
  return c->outputs[index].data();
}

// Submits `r` like tutti_enqueue. With TUTTI_TEST_DEVICE=cuda (and TUTTI_DEVICE_RUNTIME=host,
// where host memory stands in for device memory) every request goes through
// tutti_enqueue_on_device as a CUDA request with ready and done events, so the same checks
// cover the device path: the negotiated device, the staged copies and the event ordering.
inline tutti_status Enqueue(const tutti_request* r) {
  const char* mode = std::getenv("TUTTI_TEST_DEVICE");
  if (mode == nullptr || std::string(mode) != "cuda") return tutti_enqueue(r);
  static int ready_event = 0, done_event = 0;  // opaque tokens for the host runtime
  tutti_device device = {sizeof(tutti_device), TUTTI_DEVICE_CUDA, 0, &ready_event, &done_event};
  return tutti_enqueue_on_device(r, &device);
}

inline bool Wait(Call* c, int seconds = 60) {
  std::unique_lock<std::mutex> lock(c->mutex);
  return c->cv.wait_for(lock, std::chrono::seconds(seconds), [c] { return c->done; });
}

// A request with this call's callbacks filled in.
inline tutti_request Request(const char* name, tutti_collective collective, Call* call) {
  tutti_request r = {};
  r.name = name;
  r.collective = collective;
  r.process_set = TUTTI_GLOBAL_PROCESS_SET;
  r.reduce_op = TUTTI_REDUCE_SUM;
  r.prescale = r.postscale = 1.0;
  r.allocate = AllocateOutput;
  r.done = OnCallDone;
  r.user_data = call;
  return r;
}

// ---- dtypes ----
inline uint16_t HalfBits(float f) {
  _Float16 h = static_cast<_Float16>(f);  // the compiler's own IEEE conversion
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
inline float HalfValue(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
inline uint16_t BFloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
inline float BFloatValue(uint16_t bits) {
  uint32_t b = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline size_t ElementSize(tutti_dtype d) {
  switch (d) {
    case TUTTI_UINT8: case TUTTI_INT8: case TUTTI_BOOL: return 1;
    case TUTTI_UINT16: case TUTTI_INT16: case TUTTI_FLOAT16: case TUTTI_BFLOAT16: return 2;
    case TUTTI_INT32: case TUTTI_FLOAT32: return 4;
    default: return 8;
  }
}

inline const char* DtypeName(tutti_dtype d) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "int32", "int64",
                                "float16", "bfloat16", "float32", "float64", "bool"};
  return names[d];
}

inline bool IsInteger(tutti_dtype d) { return d <= TUTTI_INT64; }

inline void Store(tutti_dtype d, void* buf, size_t i, double value) {
  switch (d) {
    case TUTTI_UINT8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(value); break;
    case TUTTI_INT8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(value); break;
    case TUTTI_UINT16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(value); break;
    case TUTTI_INT16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(value); break;
    case TUTTI_INT32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(value); break;
    case TUTTI_INT64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(value); break;
    case TUTTI_FLOAT16: static_cast<uint16_t*>(buf)[i] = HalfBits(static_cast<float>(value)); break;
    case TUTTI_BFLOAT16: static_cast<uint16_t*>(buf)[i] = BFloatBits(static_cast<float>(value)); break;
    case TUTTI_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(value); break;
    case TUTTI_FLOAT64: static_cast<double*>(buf)[i] = value; break;
    case TUTTI_BOOL: static_cast<uint8_t*>(buf)[i] = value != 0 ? 1 : 0; break;
  }
}

inline double Load(tutti_dtype d, const void* buf, size_t i) {
  switch (d) {
    case TUTTI_UINT8: return static_cast<const uint8_t*>(buf)[i];
    case TUTTI_INT8: return static_cast<const int8_t*>(buf)[i];
    case TUTTI_UINT16: return static_cast<const uint16_t*>(buf)[i];
    case TUTTI_INT16: return static_cast<const int16_t*>(buf)[i];
    case TUTTI_INT32: return static_cast<const int32_t*>(buf)[i];
    case TUTTI_INT64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case TUTTI_FLOAT16: return HalfValue(static_cast<const uint16_t*>(buf)[i]);
    case TUTTI_BFLOAT16: return BFloatValue(static_cast<const uint16_t*>(buf)[i]);
    case TUTTI_FLOAT32: return static_cast<const float*>(buf)[i];
    case TUTTI_FLOAT64: return static_cast<const double*>(buf)[i];
    case TUTTI_BOOL: return static_cast<const uint8_t*>(buf)[i];
  }
  return 0;
}

// Relative tolerance for results that went through division (AVERAGE, scale factors).
inline double Tolerance(tutti_dtype d) {
  switch (d) {
    case TUTTI_FLOAT16: return 1e-3;
    case TUTTI_BFLOAT16: return 8e-3;
    case TUTTI_FLOAT32: return 1e-6;
    case TUTTI_FLOAT64: return 1e-12;
    default: return 0;
  }
}

inline bool Close(tutti_dtype d, double got, double expected) {
  return std::fabs(got - expected) <= Tolerance(d) * std::fabs(expected);
}

// Prints the summary line and returns the process exit code.
inline int Finish() {
  if (failures == 0) {
    std::printf("rank %d: all %d checks passed\n", my_rank, checks);
  } else {
    std::printf("rank %d: %d of %d checks failed\n", my_rank, failures, checks);
  }
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}

}  // namespace worker

#endif  // TUTTI_TESTS_WORKER_UTIL_H_
