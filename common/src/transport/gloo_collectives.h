// Collectives on one Gloo context, built from the legacy algorithm classes (AllreduceRingChunked,
// BroadcastOneToAll, BarrierAllToAll) and, for the variable-size ones and reducescatter,
// pairwise transfers with unbound buffers. Every transfer is cut into pieces well below 2^31
// bytes, which Gloo cannot move in one operation. (Gloo's options-API functions size socket
// buffers per message, which is very slow on this Gloo, so they are not used.) Failures and
// timeouts throw, like Gloo.
#ifndef TUTTI_SRC_GLOO_COLLECTIVES_H_
#define TUTTI_SRC_GLOO_COLLECTIVES_H_

#include <gloo/context.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tutti/c_api.h"

namespace tutti {

using GlooContext = std::shared_ptr<gloo::Context>;

void GlooAllreduce(const GlooContext& context, void* buffer, int64_t count, tutti_dtype dtype,
                   tutti_reduce_op op);
void GlooBroadcast(const GlooContext& context, void* buffer, int64_t bytes, int root);
// counts and offsets in bytes.
void GlooAllgatherv(const GlooContext& context, const void* input, void* output,
                    const std::vector<int64_t>& bytes);
void GlooAlltoallv(const GlooContext& context, const void* input,
                   const std::vector<int64_t>& send_bytes, void* output,
                   const std::vector<int64_t>& recv_bytes);
// Reduces `buffer` (the sum of counts elements; clobbered) across ranks and writes this rank's
// part (counts[rank] elements) to output. `scratch` holds one incoming part (grown as needed).
void GlooReduceScatter(const GlooContext& context, void* buffer,
                       const std::vector<int64_t>& counts, void* output, tutti_dtype dtype,
                       tutti_reduce_op op, std::vector<char>* scratch);
void GlooBarrier(const GlooContext& context);
// Sends send_bytes at `send` to rank `peer` and receives recv_bytes from it into `recv`.
// Every rank of the context calls it at the same step (it takes one slot of the context).
void GlooSendRecv(const GlooContext& context, int peer, const void* send, int64_t send_bytes,
                  void* recv, int64_t recv_bytes);
// Sends one large message each way on every pair of a freshly connected context. Gloo's TCP
// pair sizes its socket's send buffer from the first message it sends and only grows it for
// messages larger than the kernel's answer; a small first message (a barrier) would leave
// every pair with a ~4.6 KB send buffer, and mid-size messages then stall on delayed ACKs
// (16 KiB allreduce: 40-90 ms instead of ~0.5 ms).
void GlooWarmUp(const GlooContext& context);

}  // namespace tutti

#endif  // TUTTI_SRC_GLOO_COLLECTIVES_H_
