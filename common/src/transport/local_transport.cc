// The transport of a single process: there is nobody to talk to, so every collective is the
// identity (or a copy from input to output) and negotiation is a loopback.
#include <cstring>

#include "transport/transport.h"

namespace tutti {
namespace {

class LocalTransport : public Transport {
 public:
  const char* name() const override { return "local"; }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    all->assign(1, mine);
    return Status::OK();
  }
  Status BroadcastFromRoot(std::string*) override { return Status::OK(); }
  Status AgreeFlags(std::vector<uint64_t>*) override { return Status::OK(); }
  Status AddProcessSet(int32_t, const std::vector<int32_t>&) override { return Status::OK(); }
  void RemoveProcessSet(int32_t) override {}
  Status Allreduce(int32_t, void*, int64_t, tutti_dtype, tutti_reduce_op) override {
    return Status::OK();
  }

  Status Broadcast(int32_t, void*, int64_t, int) override { return Status::OK(); }
  Status Allgatherv(int32_t, const void* input, void* output, const std::vector<int64_t>& counts,
                    size_t element_size) override {
    Copy(output, input, counts[0] * element_size);
    return Status::OK();
  }
  Status Alltoallv(int32_t, const void* input, const std::vector<int64_t>& send_counts,
                   void* output, const std::vector<int64_t>&, size_t element_size) override {
    Copy(output, input, send_counts[0] * element_size);
    return Status::OK();
  }
  Status Barrier(int32_t) override { return Status::OK(); }

 private:
  static void Copy(void* to, const void* from, size_t bytes) {
    if (bytes > 0 && to != from) std::memmove(to, from, bytes);
  }
  Topology topology_;
};

}  // namespace

std::unique_ptr<Transport> CreateLocalTransport() {
  return std::unique_ptr<Transport>(new LocalTransport());
}

}  // namespace tutti
