// A Transport is what the core's cycle runs on: the process topology, the three exchanges
// negotiation needs, and the data-plane collectives. Implementations: local (one process,
// nothing to exchange), MPI and Gloo, with shared memory layered over either;
// CreateTransport picks one from the configuration. (Horovod's "controller" is the
// negotiation role: here that is negotiation/'s Coordinator. The TUTTI_CONTROLLER setting and
// tutti_controller() keep Horovod's name for the choice of transport.)
//
// Every method except the topology getters is called only from the core's background thread.
#ifndef TUTTI_SRC_TRANSPORT_TRANSPORT_H_
#define TUTTI_SRC_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "tutti/c_api.h"

namespace tutti {

// One tensor of Transport::AllreduceSpans.
struct AllreduceSpan {
  const void* in;
  void* out;  // the same memory as `in`, or memory that overlaps no other span's
  int64_t count;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  virtual const Topology& topology() const = 0;

  // Negotiation: each rank contributes `mine`; rank 0 receives every rank's bytes in rank
  // order in *all (other ranks get an empty vector).
  virtual Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) = 0;
  // Negotiation: rank 0's *bytes replaces *bytes on every other rank.
  virtual Status BroadcastFromRoot(std::string* bytes) = 0;
  // Negotiation: replaces *words with the bitwise AND of every rank's words (all ranks pass
  // the same length). Opens every cycle, so it must be the cheapest exchange there is.
  virtual Status AgreeFlags(std::vector<uint64_t>* words) = 0;
  // Whether AgreeFlagsPatiently waits for late peers asleep (not polling): the cycle loop
  // may then open a cycle early and let the exchange itself do the waiting.
  virtual bool WaitsCheaplyForFlags() { return false; }
  // AgreeFlags for a cycle opened early, which expects to wait for the other ranks.
  virtual Status AgreeFlagsPatiently(std::vector<uint64_t>* words) { return AgreeFlags(words); }

  // Process sets, applied by every rank in the negotiated order. `ranks` are the sorted
  // global ranks of set `id`; non-members take part too (MPI's communicator split needs all).
  virtual Status AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) = 0;
  virtual void RemoveProcessSet(int32_t id) = 0;

  // ---- data plane: collectives over the members of process set `set`, called only on its
  // members. Roots and positions in counts are ranks within the set.

  // In-place elementwise reduction of `count` elements. `op` is SUM, MIN, MAX or PRODUCT
  // (AVERAGE and scaling are done by the caller).
  virtual Status Allreduce(int32_t set, void* buffer, int64_t count, tutti_dtype dtype,
                           tutti_reduce_op op) = 0;
  // Whether AllreduceSpans runs on set `set` without packing the spans into one buffer.
  virtual bool ReducesSpans(int32_t set) {
    (void)set;
    return false;
  }
  // Allreduces the concatenation of the spans (inputs to outputs) and scales the results as
  // ScaleInPlace(dtype, out, count, factor, divisor); called only where ReducesSpans(set).
  virtual Status AllreduceSpans(int32_t set, const std::vector<AllreduceSpan>& spans,
                                tutti_dtype dtype, tutti_reduce_op op, double factor,
                                int divisor) {
    (void)set, (void)spans, (void)dtype, (void)op, (void)factor, (void)divisor;
    return Status::Internal("this transport cannot allreduce spans");
  }
  // `bytes` bytes of `buffer` on `root` replace `buffer` on the others.
  virtual Status Broadcast(int32_t set, void* buffer, int64_t bytes, int root) = 0;
  // Concatenates every rank's input (counts[r] elements of `element_size` bytes) into output.
  virtual Status Allgatherv(int32_t set, const void* input, void* output,
                            const std::vector<int64_t>& counts, size_t element_size) = 0;
  // Sends send_counts[j] elements (consecutive parts of input) to rank j and receives
  // recv_counts[i] elements from rank i into consecutive parts of output.
  virtual Status Alltoallv(int32_t set, const void* input, const std::vector<int64_t>& send_counts,
                           void* output, const std::vector<int64_t>& recv_counts,
                           size_t element_size) = 0;
  // Reduces `buffer` (sum of counts elements; clobbered) and writes this rank's part
  // (counts[set_rank] elements at the matching offset) to output. Default: Allreduce + copy.
  virtual Status ReduceScatter(int32_t set, int set_rank, void* buffer,
                               const std::vector<int64_t>& counts, void* output,
                               tutti_dtype dtype, tutti_reduce_op op);
  virtual Status Barrier(int32_t set) = 0;
  // Swaps data with rank `peer` of the set (of `set_size` ranks): sends send_bytes at `send`,
  // receives recv_bytes into `recv`. Every member calls it at the same step, each with its
  // own peer (Adasum's pairwise steps). Default: an Alltoallv with only the peer's counts.
  virtual Status SendRecv(int32_t set, int set_size, int peer, const void* send,
                          int64_t send_bytes, void* recv, int64_t recv_bytes);

  // Memory the transport prefers as the fusion buffer of set `set` (an allreduce on it may
  // skip a copy), or null: use your own. Same answer on every member for the same bytes.
  virtual void* FusionBuffer(int32_t set, size_t bytes) {
    (void)set;
    (void)bytes;
    return nullptr;
  }

  // Collectives so far that moved their data straight between the ranks' buffers with one
  // kernel copy (shared memory's single copy) instead of through a segment or the network.
  virtual int64_t SingleCopyCalls() const { return 0; }
  // Allreduces so far that wrote their shared-memory slots with streaming stores.
  virtual int64_t StreamingCalls() const { return 0; }
  // Times this rank moved a waiting thread off a CPU it shared with a same-host peer
  // (shm::Group::Options::move_off_shared_cpu).
  virtual int64_t CpuMoves() const { return 0; }

  // Called once, on the background thread, when a transport failure ended the loop: drops
  // every connection and raises every abort flag at once, so that peers blocked on this rank
  // fail now instead of at their timeout and the failure reaches every survivor. Nothing is
  // called on the transport afterwards but its destructor.
  virtual void Abort() {}
};

// Connects the transport chosen by config.controller. Blocks until every rank has joined or
// the configured timeout passes.
Status CreateTransport(const Config& config, std::unique_ptr<Transport>* transport);

// Implementations (each in its own file).
std::unique_ptr<Transport> CreateLocalTransport();
Status CreateMpiTransport(const Config& config, std::unique_ptr<Transport>* transport);
Status CreateGlooTransport(const Config& config, std::unique_ptr<Transport>* transport);
// Wraps a connected transport so that ranks of one host use shared memory (shm_transport.cc);
// blocks until every rank has set up its host's segment.
Status AddSharedMemory(const Config& config, std::unique_ptr<Transport>* transport);

}  // namespace tutti

#endif  // TUTTI_SRC_TRANSPORT_TRANSPORT_H_
