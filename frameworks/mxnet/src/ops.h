/* C functions of libtutti_mxnet_ops.so, called from tutti.mxnet through ctypes.
 *
 * The library is compiled with MXNet's flags (old libstdc++ ABI) and talks to the core
 * only through the C ABI of tutti/c_api.h, so the ABI difference never matters.
 */
#ifndef TUTTI_MXNET_OPS_H_
#define TUTTI_MXNET_OPS_H_

#include <mxnet/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUTTI_MXNET_EXPORT __attribute__((visibility("default")))

/* Pushes an allreduce of `input` into `output` onto MXNet's dependency engine.
 *
 * `output` may be the same handle as `input` (in place). The engine runs the operation
 * once `input` is readable and `output` writable; it then hands both to the core, and
 * `output` becomes readable when the core has finished. A failure reported by the core
 * is attached to `output`, so waiting on it raises MXNetError with the core's message.
 * The library holds its own references to both arrays until the operation completes.
 *
 * op: a tutti_reduce_op; priority: MXNet engine priority (higher runs earlier).
 * Returns 0 when the operation was pushed, -1 otherwise (see tutti_mxnet_last_error). */
TUTTI_MXNET_EXPORT int tutti_mxnet_allreduce_async(NDArrayHandle input, NDArrayHandle output,
                                                   const char* name, int op, double prescale,
                                                   double postscale, int priority);

/* Message of the last failed call made on this thread (never NULL). */
TUTTI_MXNET_EXPORT const char* tutti_mxnet_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_MXNET_OPS_H_ */
