/* C functions of libtutti_mxnet_ops.so, called from tutti.mxnet through ctypes.
 *
 * The library is compiled with MXNet's flags (old libstdc++ ABI) and talks to the core
 * only through the C ABI of tutti/c_api.h, so the ABI difference never matters.
 */
#ifndef TUTTI_MXNET_OPS_H_
#define TUTTI_MXNET_OPS_H_

#include <mxnet/c_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_MXNET_EXPORT __attribute__((visibility("default")))

/* Pushes one collective request (a tutti_collective with tensors: allreduce, allgather,
 * broadcast, alltoall, reducescatter) onto MXNet's dependency engine.
 *
 * inputs / outputs: `num_tensors` NDArrays each. outputs[i] may be inputs[i] (in place,
 * allreduce and broadcast). Every output must already have its final shape: for the
 * collectives whose output the core allocates (allgather, alltoall, reducescatter) the
 * caller computes that shape first, and the core's allocation is answered with the
 * output's own memory after checking that the shapes agree.
 *
 * The engine runs the operation once the inputs are readable and the outputs writable;
 * it hands them to the core, and the outputs become readable when the core has
 * finished. A failure reported by the core is attached to the outputs, so waiting on
 * them raises MXNetError with the core's message. The library holds its own references
 * to the arrays until the operation completes.
 *
 * op: a tutti_reduce_op; root_rank: broadcast's root, a global rank; splits: alltoall's
 * rows per rank (num_splits entries, copied) or NULL; priority: MXNet engine priority
 * (higher runs earlier). Returns 0 when the operation was pushed, -1 otherwise (see
 * tutti_mxnet_last_error). */
TUTTI_MXNET_EXPORT int tutti_mxnet_enqueue_async(int collective, const NDArrayHandle* inputs,
                                                 const NDArrayHandle* outputs,
                                                 int num_tensors, const char* name,
                                                 int process_set, int op, double prescale,
                                                 double postscale, int root_rank,
                                                 const int32_t* splits, int num_splits,
                                                 int priority);

/* Message of the last failed call made on this thread (never NULL). */
TUTTI_MXNET_EXPORT const char* tutti_mxnet_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_MXNET_OPS_H_ */
