// Gloo controller: a full mesh of TCP pairs set up through tuttirun's rendezvous store.
// Uses Gloo's legacy algorithm classes (AllreduceRing, AllgatherRing, BroadcastOneToAll); the
// newer options API is far slower on this Gloo (it sizes socket buffers per message).
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "controller.h"
#include "dtype.h"
#include "gloo_store.h"
#include "reduce_kernels.h"
#include "store_client.h"

namespace tutti {
namespace {

template <tutti_dtype D, tutti_reduce_op OP>
const gloo::ReductionFunction<typename DtypeInfo<D>::Storage>* GlooReduction() {
  static const gloo::ReductionFunction<typename DtypeInfo<D>::Storage> fn(gloo::CUSTOM,
                                                                         &ReduceTyped<D, OP>);
  return &fn;
}

std::string RankList(const std::vector<std::string>& keys) {
  std::string ranks;
  for (const std::string& key : keys) {
    ranks += (ranks.empty() ? "" : ", ") + key.substr(key.rfind('/') + 1);
  }
  return ranks;
}

class GlooController : public Controller {
 public:
  explicit GlooController(const Config& config) : config_(config) {
    const GlooConfig& g = config.gloo;
    topology_ = {g.rank, g.size, g.local_rank, g.local_size, g.cross_rank, g.cross_size};
  }

  Status Connect() {
    const GlooConfig& g = config_.gloo;
    const auto timeout = std::chrono::milliseconds(
        static_cast<int64_t>(config_.timeout_seconds * 1000));
    client_.reset(new StoreClient(g.rendezvous_addr, g.rendezvous_port, g.secret, timeout));
    // Every init of a process gets fresh keys, so init -> shutdown -> init never reads the
    // addresses of the previous mesh.
    const std::string prefix = "tutti/" + std::to_string(config_.generation);

    // Join first, so a missing process is reported by rank instead of as a Gloo error.
    Status s = client_->Set(prefix + "/joined/" + std::to_string(g.rank), "1");
    if (!s.ok()) return s;
    std::vector<std::string> keys, missing;
    for (int r = 0; r < g.size; ++r) keys.push_back(prefix + "/joined/" + std::to_string(r));
    s = client_->WaitAll(keys, &missing);
    if (!s.ok()) {
      if (missing.empty()) return s;
      return Status::Aborted("rank(s) " + RankList(missing) + " of " + std::to_string(g.size) +
                             " did not join within " +
                             std::to_string(static_cast<int>(config_.timeout_seconds)) +
                             " s (TUTTI_GLOO_TIMEOUT_SECONDS); did every process start and "
                             "call init()?");
    }

    try {
      gloo::transport::tcp::attr attr;
      if (g.iface.empty()) {
        attr.hostname = "127.0.0.1";
      } else {
        attr.iface = g.iface;
      }
      auto device = gloo::transport::tcp::CreateDevice(attr);
      context_ = std::make_shared<gloo::rendezvous::Context>(g.rank, g.size);
      context_->setTimeout(timeout);
      GlooStore store(client_.get());
      gloo::rendezvous::PrefixStore mesh_store(prefix + "/mesh", store);
      context_->connectFullMesh(mesh_store, device);
    } catch (const std::exception& e) {
      return Status::Aborted(std::string("Gloo could not connect the ranks: ") + e.what());
    }
    return Status::OK();
  }

  const char* name() const override { return "gloo"; }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    // Legacy Gloo has no gather: allgather the lengths, then payloads padded to the longest.
    return Guard("negotiation", [&] {
      const int size = topology_.size;
      int64_t length = static_cast<int64_t>(mine.size());
      std::vector<int64_t> lengths(size);
      gloo::AllgatherRing<int64_t>(context_, {&length}, lengths.data(), 1).run();
      const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
      std::vector<char> padded(longest, 0), gathered(longest * size);
      std::memcpy(padded.data(), mine.data(), mine.size());
      if (longest > 0) {
        gloo::AllgatherRing<char>(context_, {padded.data()}, gathered.data(),
                                  static_cast<int>(longest)).run();
      }
      all->clear();
      if (topology_.rank != 0) return;
      for (int r = 0; r < size; ++r) all->emplace_back(&gathered[r * longest], lengths[r]);
    });
  }

  Status BroadcastFromRoot(std::string* bytes) override {
    return Guard("negotiation", [&] {
      uint64_t length = bytes->size();
      gloo::BroadcastOneToAll<uint64_t>(context_, {&length}, 1, 0).run();
      bytes->resize(length);
      if (length > 0) {
        gloo::BroadcastOneToAll<char>(context_, {&(*bytes)[0]}, length, 0).run();
      }
    });
  }

  Status Allreduce(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op) override {
    return Guard("allreduce", [&] {
      DispatchDtype(dtype, [&](auto d) {
        constexpr tutti_dtype D = decltype(d)::value;
        using Storage = typename DtypeInfo<D>::Storage;
        DispatchReduceOp(op, [&](auto o) {
          const auto* fn = GlooReduction<D, decltype(o)::value>();
          // Gloo counts are int: reduce very large buffers in chunks.
          const int64_t kMaxChunk = int64_t(1) << 30;
          Storage* data = static_cast<Storage*>(buffer);
          for (int64_t done = 0; done < count; done += kMaxChunk) {
            int chunk = static_cast<int>(std::min(kMaxChunk, count - done));
            gloo::AllreduceRing<Storage>(context_, {data + done}, chunk, fn).run();
          }
        });
      });
    });
  }

 private:
  // Gloo reports failures (peer gone, timeout) by throwing; turn them into statuses.
  template <typename F>
  Status Guard(const char* what, F&& body) {
    try {
      body();
      return Status::OK();
    } catch (const std::exception& e) {
      return Status::Aborted(std::string("Gloo ") + what + " failed (a peer process may have "
                             "exited or stopped responding): " + e.what());
    }
  }

  const Config config_;
  Topology topology_;
  std::unique_ptr<StoreClient> client_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
};

}  // namespace

Status CreateGlooController(const Config& config, std::unique_ptr<Controller>* controller) {
  std::unique_ptr<GlooController> gloo(new GlooController(config));
  Status s = gloo->Connect();
  if (!s.ok()) return s;
  *controller = std::move(gloo);
  return Status::OK();
}

}  // namespace tutti
