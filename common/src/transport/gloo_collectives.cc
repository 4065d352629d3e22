#include "transport/gloo_collectives.h"

#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/dtype.h"
#include "kernels/reduce_kernels.h"

namespace tutti {
namespace {

template <tutti_dtype D, tutti_reduce_op OP>
const gloo::ReductionFunction<typename DtypeInfo<D>::Storage>* GlooReduction() {
  static const gloo::ReductionFunction<typename DtypeInfo<D>::Storage> fn(gloo::CUSTOM,
                                                                         &ReduceTyped<D, OP>);
  return &fn;
}

// Gloo counts bytes in an int in places (AllreduceRingChunked's bytes_ = count * sizeof(T)),
// so no single Gloo operation may move 2^31 bytes or more: every transfer is cut into pieces
// of at most this many bytes. 256 MiB also bounds AllreduceRingChunked's two scratch inboxes
// (it mallocs two buffers the size of what it reduces).
const int64_t kMaxPieceBytes = int64_t(256) << 20;

// Queues `bytes` at `offset` of `buffer` for rank `peer` as pieces of at most kMaxPieceBytes,
// all on one slot (a pair delivers one slot's messages in order); returns how many.
// Calls queue(offset, length) for each piece of `bytes` at `offset`; returns how many.
template <typename Queue>
int InPieces(int64_t offset, int64_t bytes, Queue queue) {
  int pieces = 0;
  for (int64_t done = 0; done < bytes; done += kMaxPieceBytes, ++pieces) {
    queue(offset + done, std::min(kMaxPieceBytes, bytes - done));
  }
  return pieces;
}

int SendPieces(gloo::transport::UnboundBuffer* buffer, int peer, uint64_t slot, int64_t offset,
               int64_t bytes) {
  return InPieces(offset, bytes, [&](int64_t at, int64_t length) {
    buffer->send(peer, slot, at, length);
  });
}

int RecvPieces(gloo::transport::UnboundBuffer* buffer, int peer, uint64_t slot, int64_t offset,
               int64_t bytes) {
  return InPieces(offset, bytes, [&](int64_t at, int64_t length) {
    buffer->recv(peer, slot, at, length);
  });
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> offsets(sizes.size());
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    offsets[i] = total;
    total += sizes[i];
  }
  return offsets;
}

// Sends send_bytes[p] bytes at send_offsets[p] of `input` to every other rank p and receives
// recv_bytes[p] bytes from p at recv_offsets[p] of `output`, all on one slot. Empty messages
// are skipped (both sides know every size).
void Exchange(const GlooContext& context, const void* input, int64_t input_bytes,
              const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& send_bytes,
              void* output, int64_t output_bytes, const std::vector<int64_t>& recv_offsets,
              const std::vector<int64_t>& recv_bytes) {
  const int me = context->rank;
  const uint64_t slot = context->nextSlot();
  char dummy = 0;  // unbound buffers need a valid address even when nothing moves
  auto in = context->createUnboundBuffer(input_bytes > 0 ? const_cast<void*>(input) : &dummy,
                                         static_cast<size_t>(std::max<int64_t>(input_bytes, 1)));
  auto out = context->createUnboundBuffer(output_bytes > 0 ? output : &dummy,
                                          static_cast<size_t>(std::max<int64_t>(output_bytes, 1)));
  int sends = 0, recvs = 0;
  for (int p = 0; p < context->size; ++p) {
    if (p == me) continue;
    recvs += RecvPieces(out.get(), p, slot, recv_offsets[p], recv_bytes[p]);
    sends += SendPieces(in.get(), p, slot, send_offsets[p], send_bytes[p]);
  }
  const auto timeout = context->getTimeout();
  for (int i = 0; i < recvs; ++i) {
    if (!out->waitRecv(timeout)) throw std::runtime_error("receive was aborted");
  }
  for (int i = 0; i < sends; ++i) {
    if (!in->waitSend(timeout)) throw std::runtime_error("send was aborted");
  }
}

}  // namespace

void GlooAllreduce(const GlooContext& context, void* buffer, int64_t count, tutti_dtype dtype,
                   tutti_reduce_op op) {
  DispatchDtype(dtype, [&](auto d) {
    constexpr tutti_dtype D = decltype(d)::value;
    using Storage = typename DtypeInfo<D>::Storage;
    DispatchReduceOp(op, [&](auto o) {
      const auto* fn = GlooReduction<D, decltype(o)::value>();
      Storage* data = static_cast<Storage*>(buffer);
      const int64_t max_chunk = kMaxPieceBytes / static_cast<int64_t>(sizeof(Storage));
      for (int64_t done = 0; done < count; done += max_chunk) {
        int chunk = static_cast<int>(std::min(max_chunk, count - done));
        // Reduce-scatter then allgather: each element is reduced once, by one rank, so every
        // rank ends with the same bits (the plain ring reduces in a different order on each).
        gloo::AllreduceRingChunked<Storage>(context, {data + done}, chunk, fn).run();
      }
    });
  });
}

void GlooBroadcast(const GlooContext& context, void* buffer, int64_t bytes, int root) {
  char* data = static_cast<char*>(buffer);
  for (int64_t done = 0; done < bytes; done += kMaxPieceBytes) {
    int chunk = static_cast<int>(std::min(kMaxPieceBytes, bytes - done));
    gloo::BroadcastOneToAll<char>(context, {data + done}, chunk, root).run();
  }
}

void GlooAllgatherv(const GlooContext& context, const void* input, void* output,
                    const std::vector<int64_t>& bytes) {
  const int me = context->rank;
  const std::vector<int64_t> offsets = Offsets(bytes);
  const int64_t total = offsets.back() + bytes.back();
  char* out = static_cast<char*>(output);
  if (bytes[me] > 0) std::memmove(out + offsets[me], input, bytes[me]);
  // Every rank sends its own part (from where it now sits in output) to every other rank.
  std::vector<int64_t> send_offsets(bytes.size(), offsets[me]);
  std::vector<int64_t> send_bytes(bytes.size(), bytes[me]);
  Exchange(context, output, total, send_offsets, send_bytes, output, total, offsets, bytes);
}

void GlooAlltoallv(const GlooContext& context, const void* input,
                   const std::vector<int64_t>& send_bytes, void* output,
                   const std::vector<int64_t>& recv_bytes) {
  const int me = context->rank;
  const std::vector<int64_t> send_offsets = Offsets(send_bytes);
  const std::vector<int64_t> recv_offsets = Offsets(recv_bytes);
  const int64_t in_total = send_offsets.back() + send_bytes.back();
  const int64_t out_total = recv_offsets.back() + recv_bytes.back();
  if (send_bytes[me] > 0) {
    std::memcpy(static_cast<char*>(output) + recv_offsets[me],
                static_cast<const char*>(input) + send_offsets[me], send_bytes[me]);
  }
  Exchange(context, input, in_total, send_offsets, send_bytes, output, out_total, recv_offsets,
           recv_bytes);
}

void GlooReduceScatter(const GlooContext& context, void* buffer,
                       const std::vector<int64_t>& counts, void* output, tutti_dtype dtype,
                       tutti_reduce_op op, std::vector<char>* scratch) {
  // Ring: at step s rank r sends its partial chunk (r - s - 1) to the right neighbour and
  // reduces the left neighbour's partial chunk (r - s - 2) into its own; after size - 1 steps
  // chunk r holds every rank's contribution. Each element moves once (allreduce moves twice).
  const int n = context->size, me = context->rank;
  const size_t element = DtypeSize(dtype);
  const std::vector<int64_t> offsets = Offsets(counts);
  const int64_t total = offsets.back() + counts.back();
  int64_t largest = 1;
  for (int64_t c : counts) largest = std::max(largest, c);
  if (scratch->size() < largest * element) scratch->resize(largest * element);
  char* data = static_cast<char*>(buffer);
  char dummy = 0;
  auto whole = context->createUnboundBuffer(total > 0 ? data : &dummy,
                                            std::max<int64_t>(total, 1) * element);
  auto incoming = context->createUnboundBuffer(scratch->data(), largest * element);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const auto timeout = context->getTimeout();
  for (int step = 0; step < n - 1; ++step) {
    const int send_chunk = ((me - step - 1) % n + n) % n;
    const int recv_chunk = ((me - step - 2) % n + n) % n;
    const uint64_t slot = context->nextSlot();
    const int sends = SendPieces(whole.get(), right, slot, offsets[send_chunk] * element,
                                 counts[send_chunk] * element);
    const int recvs = RecvPieces(incoming.get(), left, slot, 0, counts[recv_chunk] * element);
    for (int i = 0; i < recvs; ++i) {
      if (!incoming->waitRecv(timeout)) throw std::runtime_error("receive was aborted");
    }
    if (recvs > 0) {
      ReduceInto(dtype, op, data + offsets[recv_chunk] * element, scratch->data(),
                 counts[recv_chunk]);
    }
    for (int i = 0; i < sends; ++i) {
      if (!whole->waitSend(timeout)) throw std::runtime_error("send was aborted");
    }
  }
  if (counts[me] > 0) std::memcpy(output, data + offsets[me] * element, counts[me] * element);
}

void GlooBarrier(const GlooContext& context) { gloo::BarrierAllToAll(context).run(); }

void GlooSendRecv(const GlooContext& context, int peer, const void* send, int64_t send_bytes,
                  void* recv, int64_t recv_bytes) {
  const uint64_t slot = context->nextSlot();  // on every rank, so slots stay in step
  const auto timeout = context->getTimeout();
  std::unique_ptr<gloo::transport::UnboundBuffer> out, in;
  if (recv_bytes > 0) {
    in = context->createUnboundBuffer(recv, static_cast<size_t>(recv_bytes));
    in->recv(peer, slot);
  }
  if (send_bytes > 0) {
    out = context->createUnboundBuffer(const_cast<void*>(send), static_cast<size_t>(send_bytes));
    out->send(peer, slot);
  }
  if (in && !in->waitRecv(timeout)) throw std::runtime_error("receive was aborted");
  if (out && !out->waitSend(timeout)) throw std::runtime_error("send was aborted");
}

void GlooWarmUp(const GlooContext& context) {
  // The sizing happens on the legacy (bound) buffer path, so warm up through it: one send
  // buffer and one receive buffer per peer on a fresh slot.
  const size_t bytes = 256 * 1024;  // the kernel caps it at net.core.wmem_max anyway
  const int size = context->size;
  const int me = context->rank;
  const int slot = static_cast<int>(context->nextSlot());
  std::vector<char> out(bytes * size, 0), in(bytes * size, 0);
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  for (int p = 0; p < size; ++p) {
    if (p == me) continue;
    auto& pair = context->getPair(p);
    receives.push_back(pair->createRecvBuffer(slot, in.data() + p * bytes, bytes));
    sends.push_back(pair->createSendBuffer(slot, out.data() + p * bytes, bytes));
  }
  for (auto& send : sends) send->send();
  for (auto& receive : receives) receive->waitRecv();
  for (auto& send : sends) send->waitSend();
}

}  // namespace tutti
