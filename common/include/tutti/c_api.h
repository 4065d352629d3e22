/* tutti core C ABI.
 *
 * This header is the only contract between the core (libtutti_core.so) and the
 * framework plugins. Only C types cross it: MXNet is built with the old libstdc++
 * ABI, torch and TensorFlow with the new one, so no std::string, container or
 * exception may pass through here.
 *
 * Versioning: TUTTI_C_API_VERSION changes whenever a declaration below changes in
 * an incompatible way. A plugin compares it with tutti_c_api_version() at load
 * time and refuses to run against a core with another version.
 *
 * Threading: every function may be called from any thread. Collective requests
 * are executed by the core's single background thread; their completion
 * callbacks run on that thread and must not block.
 */
#ifndef TUTTI_C_API_H_
#define TUTTI_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_C_API_VERSION 1

#if defined(__GNUC__)
#define TUTTI_EXPORT __attribute__((visibility("default")))
#else
#define TUTTI_EXPORT
#endif

/* Result of a call or of a collective request. */
typedef enum {
  TUTTI_OK = 0,
  TUTTI_ERR_NOT_INITIALIZED = 1, /* init() was not called, or shutdown() was */
  TUTTI_ERR_INVALID_ARGUMENT = 2, /* bad dtype, op, shape, pointer, env value */
  TUTTI_ERR_PRECONDITION = 3,    /* ranks disagree, duplicate name, ... */
  TUTTI_ERR_UNSUPPORTED = 4,     /* valid request that this build cannot do */
  TUTTI_ERR_ABORTED = 5,         /* the job is shutting down or a peer failed */
  TUTTI_ERR_INTERNAL = 6         /* transport failure or core bug */
} tutti_status;

/* Element types. The numbering is part of the ABI. */
typedef enum {
  TUTTI_UINT8 = 0,
  TUTTI_INT8 = 1,
  TUTTI_UINT16 = 2,
  TUTTI_INT16 = 3,
  TUTTI_INT32 = 4,
  TUTTI_INT64 = 5,
  TUTTI_FLOAT16 = 6,
  TUTTI_BFLOAT16 = 7,
  TUTTI_FLOAT32 = 8,
  TUTTI_FLOAT64 = 9,
  TUTTI_BOOL = 10
} tutti_dtype;

/* Reduction applied by allreduce. The numbering is part of the ABI. */
typedef enum {
  TUTTI_REDUCE_AVERAGE = 0,
  TUTTI_REDUCE_SUM = 1,
  TUTTI_REDUCE_MIN = 2,
  TUTTI_REDUCE_MAX = 3,
  TUTTI_REDUCE_PRODUCT = 4
} tutti_reduce_op;

/* A dense, C-contiguous tensor in host memory. The core never frees `data`
 * and never keeps `shape` beyond the call that received the view. */
typedef struct {
  void* data;
  tutti_dtype dtype;
  int32_t ndim;
  const int64_t* shape; /* ndim entries; may be NULL when ndim == 0 */
} tutti_tensor;

/* Completion of an asynchronous request. `message` is NULL on success, else a
 * human-readable reason that is valid only during the call. Runs on the core's
 * background thread; a request refused at enqueue never calls it. */
typedef void (*tutti_done_fn)(void* user_data, tutti_status status, const char* message);

/* ---- version and build information ---------------------------------- */
TUTTI_EXPORT int tutti_c_api_version(void);
TUTTI_EXPORT const char* tutti_version(void);
/* 1 if the transport was compiled into this core. name: "mpi", "gloo", "nccl", "cuda". */
TUTTI_EXPORT int tutti_built(const char* name);

/* ---- lifecycle -------------------------------------------------------- */
/* Reads the TUTTI_* (or HOROVOD_*) environment, chooses the controller
 * (TUTTI_CONTROLLER=mpi|gloo; otherwise mpi under mpirun, gloo under tuttirun,
 * a single local process otherwise), connects and starts the background
 * thread. Calling it again while initialized is a no-op returning TUTTI_OK. */
TUTTI_EXPORT tutti_status tutti_init(void);
/* Fails every pending request with TUTTI_ERR_ABORTED, stops the background
 * thread and releases the transport. init() may be called again afterwards. */
TUTTI_EXPORT tutti_status tutti_shutdown(void);
TUTTI_EXPORT int tutti_is_initialized(void);

/* Message of the last failed call made on this thread (never NULL). */
TUTTI_EXPORT const char* tutti_last_error(void);

/* ---- topology: each returns -1 (and sets the last error) before init ---- */
TUTTI_EXPORT int tutti_rank(void);
TUTTI_EXPORT int tutti_size(void);
TUTTI_EXPORT int tutti_local_rank(void);
TUTTI_EXPORT int tutti_local_size(void);
TUTTI_EXPORT int tutti_cross_rank(void);
TUTTI_EXPORT int tutti_cross_size(void);
/* Name of the controller in use ("mpi", "gloo" or "local"), or "" before init. */
TUTTI_EXPORT const char* tutti_controller(void);
/* Linux thread id of the background thread (0 before init). Lets plugins and
 * tests check that every framework in a process shares one core. */
TUTTI_EXPORT int64_t tutti_background_thread_id(void);

/* ---- collectives ------------------------------------------------------ */
/* Allreduce `input` into `output` (which may alias `input` for in place).
 * Both views must have the same dtype and shape. `name` identifies the
 * request across ranks and must be unique among requests in flight.
 * prescale multiplies the input before the reduction and postscale the result
 * after it (1.0 for none). Returns TUTTI_OK when the request was queued; then
 * `done` is called exactly once. On any other return `done` is not called. */
TUTTI_EXPORT tutti_status tutti_allreduce_async(const char* name, const tutti_tensor* input,
                                                const tutti_tensor* output,
                                                tutti_reduce_op op, double prescale,
                                                double postscale, tutti_done_fn done,
                                                void* user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_C_API_H_ */
