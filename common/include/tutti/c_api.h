/* tutti core C ABI.
 *
 * This header is the only contract between the core (libtutti_core.so) and the
 * framework plugins. Only C types cross it: MXNet is built with the old libstdc++
 * ABI, torch and TensorFlow with the new one, so no std::string, container or
 * exception may pass through here.
 *
 * Versioning: TUTTI_C_API_VERSION changes whenever a declaration below changes in
 * an incompatible way. A plugin compares it with tutti_c_api_version() at load
 * time and refuses to run against a core with another version. Additions (new
 * functions, new enum values at the end) keep the version and raise
 * TUTTI_C_API_MINOR_VERSION: a plugin built against minor m runs on any core of the
 * same version whose tutti_c_api_minor_version() is >= m.
 *
 * Minor versions: 0 host tensors only; 1 device-aware requests (tutti_enqueue_on_device);
 * 2 requests run on the calling thread (tutti_run).
 *
 * Threading: every function may be called from any thread. Collective requests
 * are executed by the core's cycles, one at a time: on the core's background thread, or on a
 * thread inside tutti_run while the background thread is idle. Completion (and allocate)
 * callbacks run on the thread that runs the cycle and must not block.
 */
#ifndef TUTTI_C_API_H_
#define TUTTI_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_C_API_VERSION 1
#define TUTTI_C_API_MINOR_VERSION 2

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

/* Reduction applied by allreduce. The numbering is part of the ABI (Horovod's Python
 * constants are numbered differently; tutti.common.basics maps them for every plugin). */
typedef enum {
  TUTTI_REDUCE_AVERAGE = 0,
  TUTTI_REDUCE_SUM = 1,
  TUTTI_REDUCE_MIN = 2,
  TUTTI_REDUCE_MAX = 3,
  TUTTI_REDUCE_PRODUCT = 4,
  /* Adaptive summation (addition to version 1): allreduce only, float16/32/64, a process
   * set whose size is a power of two. Pairs of partial results a, b are combined per
   * tensor as (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b by recursive vector halving,
   * distance doubling; see docs/adasum.md. */
  TUTTI_REDUCE_ADASUM = 5
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
 * human-readable reason that is valid only during the call. Runs on the thread
 * running the core's cycle (see Threading); a request refused at enqueue never calls it. */
typedef void (*tutti_done_fn)(void* user_data, tutti_status status, const char* message);

/* ---- version and build information ---------------------------------- */
TUTTI_EXPORT int tutti_c_api_version(void);
TUTTI_EXPORT const char* tutti_version(void);
/* 1 if the transport can be used by this core. name: "mpi", "gloo" (compiled in), "cuda",
 * "nccl" (libcudart / libnccl load at run time; see tutti_gpu_library_error). */
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

/* ---- general collectives (additions to version 1) ----------------------- */

/* The collective a request asks for. The numbering is part of the ABI. */
typedef enum {
  TUTTI_OP_ALLREDUCE = 0,
  TUTTI_OP_ALLGATHER = 1,     /* concatenation along the first dimension, which may differ */
  TUTTI_OP_BROADCAST = 2,     /* root_rank's tensor to every rank of the set */
  TUTTI_OP_ALLTOALL = 3,      /* splits along the first dimension, rank i's part j goes to j */
  TUTTI_OP_REDUCESCATTER = 4, /* reduce, then rank i keeps the i-th part of the first dimension:
                                 rows / size rows each, the first rows % size ranks one more */
  TUTTI_OP_BARRIER = 5,       /* no tensors */
  TUTTI_OP_JOIN = 6           /* no tensors; see tutti_request.result. Global set only. Until
                                 every rank has joined, allreduces the others submit run with
                                 zeros from the joined ranks (AVERAGE still divides by the full
                                 set size); other collectives fail naming the joined ranks. */
} tutti_collective;

/* The global process set, containing every rank. */
#define TUTTI_GLOBAL_PROCESS_SET 0

/* Allocates output `index` of a request once its shape is known (allgather,
 * alltoall, reducescatter): a C-contiguous host buffer of the request's dtype
 * and `ndim` dimensions `shape`. Runs on the thread running the core's cycle
 * before the collective; returning NULL fails the request. The buffer must stay valid
 * until `done` has been called. */
typedef void* (*tutti_allocate_fn)(void* user_data, int32_t index, int32_t ndim,
                                   const int64_t* shape);

/* One request. `num_tensors` > 1 makes a grouped request (allreduce, allgather,
 * reducescatter): the tensors, which share one dtype, are negotiated and completed
 * together under `name`. Names must be unique among this rank's requests in
 * flight, whatever their process sets; a join's name is ignored. Fields a
 * collective does not use are ignored (and not compared across ranks). */
typedef struct {
  const char* name;
  tutti_collective collective;
  int32_t process_set;          /* TUTTI_GLOBAL_PROCESS_SET or an id from tutti_add_process_set */
  int32_t num_tensors;          /* 0 for barrier and join */
  const tutti_tensor* inputs;   /* num_tensors views */
  const tutti_tensor* outputs;  /* allreduce, broadcast: num_tensors views (may alias inputs);
                                   NULL for the collectives that allocate */
  tutti_allocate_fn allocate;   /* allgather, alltoall, reducescatter */
  tutti_reduce_op reduce_op;    /* allreduce, reducescatter */
  double prescale;              /* allreduce, reducescatter (1.0 for none) */
  double postscale;
  int32_t root_rank;            /* broadcast: the root's GLOBAL rank, a member of the set
                                   (Horovod's convention); INVALID_ARGUMENT otherwise */
  const int32_t* splits;        /* alltoall: one count of first-dimension rows per rank of
                                   the set, or NULL for equal parts */
  int32_t* received_splits;     /* alltoall: set size entries, filled before done */
  int32_t* result;              /* join: the last rank (global) to join, filled before done */
  tutti_done_fn done;
  void* user_data;              /* passed to done and allocate */
} tutti_request;

/* Queues a request; same contract as tutti_allreduce_async (done is called
 * exactly once if and only if this returns TUTTI_OK). The core copies what it
 * needs from `request` and the views before returning; the tensors' data must
 * stay valid until done. */
TUTTI_EXPORT tutti_status tutti_enqueue(const tutti_request* request);

/* ---- process sets --------------------------------------------------------- */
/* Registers a process set of the given global ranks (sorted, distinct). Every
 * rank of the job must call it with the same ranks, in the same order relative to
 * other process-set calls; it blocks until all have (at most
 * TUTTI_GLOO_TIMEOUT_SECONDS, then TUTTI_ERR_ABORTED). Writes the new id; ids
 * are never reused. Must not be called from a done or allocate callback. */
TUTTI_EXPORT tutti_status tutti_add_process_set(const int32_t* ranks, int32_t num_ranks,
                                                int32_t* id_out);
/* Removes a process set (collective over every rank, like adding it). */
TUTTI_EXPORT tutti_status tutti_remove_process_set(int32_t id);
/* This rank's rank within the set, or -1 if not included (or unknown id). */
TUTTI_EXPORT int tutti_process_set_rank(int32_t id);
/* Number of ranks in the set, or -1 for an unknown id. */
TUTTI_EXPORT int tutti_process_set_size(int32_t id);
/* Copies up to `capacity` global ranks of the set; returns the set's size or -1. */
TUTTI_EXPORT int tutti_process_set_ranks(int32_t id, int32_t* ranks_out, int32_t capacity);
/* 1 if MPI was initialized with MPI_THREAD_MULTIPLE (0 otherwise, or not MPI). */
TUTTI_EXPORT int tutti_mpi_threads_supported(void);

/* ---- waiting for a request from another thread ------------------------------- */
/* A completion record: pass tutti_completion_done as a request's `done` and the
 * record as its user_data, then wait with tutti_completion_wait. Saves callers
 * whose callbacks are expensive (e.g. Python) a callback on the core's thread.
 * The record must stay valid until it is done. */
typedef struct tutti_completion {
  int32_t state;  /* 0 pending, then 1 once done (read it with tutti_completion_test) */
  int32_t status; /* the request's tutti_status, valid once done */
  char message[1024]; /* its error message (truncated), valid once done */
} tutti_completion;
TUTTI_EXPORT void tutti_completion_done(void* completion, tutti_status status,
                                        const char* message);
/* 1 when the request is done, else 0. */
TUTTI_EXPORT int tutti_completion_test(const tutti_completion* completion);
/* Waits at most timeout_seconds (< 0: forever); returns 1 when done, 0 on timeout. Polls
 * briefly, then sleeps until woken. */
TUTTI_EXPORT int tutti_completion_wait(tutti_completion* completion, double timeout_seconds);

/* ---- devices (minor version 1) ---------------------------------------------- */
/* Where a request's tensors live. The numbering is part of the ABI. */
typedef enum {
  TUTTI_DEVICE_CPU = 0,
  TUTTI_DEVICE_CUDA = 1
} tutti_device_type;

/* The device of a request and how its work is ordered with the framework's. Set
 * struct_size to sizeof(tutti_device): later minor versions append fields. For CUDA every
 * tensor of the request (inputs, given outputs, allocated outputs) is device memory on
 * `index`. The core never blocks a framework stream: its own stream waits on ready_event,
 * and, before `done` is called, it records done_event on that stream once the outputs are
 * written there; the framework's stream then waits on done_event (e.g. torch
 * Stream.wait_event). With no done_event the core waits for its stream before `done`, so the
 * outputs are complete when it is called. */
typedef struct {
  uint32_t struct_size;      /* sizeof(tutti_device) */
  tutti_device_type type;
  int32_t index;             /* CUDA device ordinal; ignored for CPU */
  void* ready_event;         /* cudaEvent_t recorded after the inputs were written, or NULL
                                (the inputs are complete already) */
  void* done_event;          /* cudaEvent_t (created by the caller) that the core records, or
                                NULL */
} tutti_device;

/* The minor version of the ABI this core implements (TUTTI_C_API_MINOR_VERSION when built). */
TUTTI_EXPORT int tutti_c_api_minor_version(void);
/* tutti_enqueue for tensors on `device` (NULL: CPU). Ranks must agree on the device type of a
 * request (not on the ordinal). CUDA requests run on NCCL where it loads and can run them,
 * otherwise staged through pinned host buffers over the controller's transport
 * (TUTTI_GPU_OPERATIONS=nccl|mpi|gloo). Fails with TUTTI_ERR_UNSUPPORTED, naming what was
 * tried, when the CUDA runtime cannot be loaded. */
TUTTI_EXPORT tutti_status tutti_enqueue_on_device(const tutti_request* request,
                                                  const tutti_device* device);
/* Why `name` ("cuda" or "nccl") cannot be used ("" when it can). Valid until the next call. */
TUTTI_EXPORT const char* tutti_gpu_library_error(const char* name);

/* ---- running a request on the calling thread (minor version 2) ---------------- */
/* tutti_enqueue, then, when the core's background thread is idle, the calling thread runs the
 * core's cycles itself until the request is done: a blocking call then costs no hand-off to
 * the background thread and no wake-ups. Returns as tutti_enqueue does (done is called exactly
 * once if and only if this returns TUTTI_OK). On TUTTI_OK, *finished (if not NULL) is 1 when
 * done was called before the return, else 0: the request was left to the background thread
 * (it was running a cycle, the request did not finish within timeout_seconds (< 0: no limit),
 * or a CUDA request was ever queued in this session); then wait for done as after
 * tutti_enqueue. A cycle waits for every rank's next cycle (at most the peers' cycle time,
 * or the idle tick of 5 ms), so a timeout is noticed within about that. Host tensors only.
 * Callbacks of every request those cycles complete run on the calling thread: it must not
 * hold a lock that a callback takes (e.g. Python's GIL, where callbacks are Python). */
TUTTI_EXPORT tutti_status tutti_run(const tutti_request* request, double timeout_seconds,
                                    int32_t* finished);

/* ---- observability ---------------------------------------------------------- */
/* Starts writing a Chrome trace of the core's activity to `path` (rank 0 only;
 * other ranks return TUTTI_OK and write nothing). Replaces a trace in progress. */
TUTTI_EXPORT tutti_status tutti_start_timeline(const char* path);
/* Finishes the trace (a no-op when none is being written). */
TUTTI_EXPORT tutti_status tutti_stop_timeline(void);
/* Number of counters; their names are tutti_counter_name(0 .. n-1). */
TUTTI_EXPORT int tutti_counter_count(void);
/* Name of counter `index` ("cycles", "cache_hits", ...), or NULL out of range. */
TUTTI_EXPORT const char* tutti_counter_name(int index);
/* Copies up to `capacity` counter values (in name order); returns how many there
 * are, or -1 before init. */
TUTTI_EXPORT int tutti_counters(int64_t* values_out, int capacity);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_C_API_H_ */
