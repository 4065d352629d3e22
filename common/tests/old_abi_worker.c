/* A plugin built against C ABI 1.0 (the header as it was before device-aware requests,
 * frozen in tests/abi/c_api_1_0) running on the current core: same major version, a minor
 * version at least 0, and its host-memory requests work unchanged. Plain C, as a plugin
 * written in C would be. Exits 0 when every check passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tutti/c_api.h"

#ifdef TUTTI_C_API_MINOR_VERSION
#error "this worker must be compiled against the frozen 1.0 header"
#endif

static int failures = 0;
#define CHECK(cond, what)                                     \
  do {                                                        \
    if (!(cond)) {                                            \
      ++failures;                                             \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what); \
    }                                                         \
  } while (0)

static void on_done(void* user_data, tutti_status status, const char* message) {
  tutti_completion_done(user_data, status, message);
}

static char gathered[64 * sizeof(float)];
static void* allocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  (void)user_data;
  (void)index;
  (void)ndim;
  return shape[0] <= 64 ? gathered : NULL;
}

int main(int argc, char** argv) {
  int expected = argc > 1 ? atoi(argv[1]) : 0;
  CHECK(tutti_c_api_version() == TUTTI_C_API_VERSION, "major version");
  CHECK(tutti_init() == TUTTI_OK, tutti_last_error());
  int rank = tutti_rank(), size = tutti_size();
  if (expected > 0) CHECK(size == expected, "size");

  float data[8];
  int64_t shape[1] = {8};
  for (int i = 0; i < 8; ++i) data[i] = (float)(rank + i);
  tutti_tensor t = {data, TUTTI_FLOAT32, 1, shape};
  tutti_completion c;
  memset(&c, 0, sizeof c);
  CHECK(tutti_allreduce_async("old.allreduce", &t, &t, TUTTI_REDUCE_SUM, 1.0, 1.0, on_done,
                              &c) == TUTTI_OK, tutti_last_error());
  CHECK(tutti_completion_wait(&c, 60) == 1 && c.status == TUTTI_OK, c.message);
  for (int i = 0; i < 8; ++i) {
    CHECK(data[i] == (float)(size * (size - 1) / 2 + size * i), "allreduce value");
  }

  tutti_request r;
  memset(&r, 0, sizeof r);
  float mine[2] = {(float)rank, (float)rank};
  int64_t row[1] = {2};
  tutti_tensor in = {mine, TUTTI_FLOAT32, 1, row};
  r.name = "old.allgather";
  r.collective = TUTTI_OP_ALLGATHER;
  r.num_tensors = 1;
  r.inputs = &in;
  r.allocate = allocate;
  r.prescale = r.postscale = 1.0;
  r.done = on_done;
  memset(&c, 0, sizeof c);
  r.user_data = &c;
  CHECK(tutti_enqueue(&r) == TUTTI_OK, tutti_last_error());
  CHECK(tutti_completion_wait(&c, 60) == 1 && c.status == TUTTI_OK, c.message);
  const float* out = (const float*)gathered;
  for (int i = 0; i < 2 * size; ++i) CHECK(out[i] == (float)(i / 2), "allgather value");

  CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
  printf("rank %d: ABI 1.0 plugin on core minor version %s: %s\n", rank, "current",
         failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
