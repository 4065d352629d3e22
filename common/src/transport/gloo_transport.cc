// Gloo transport: a full mesh of TCP pairs set up through tuttirun's rendezvous store.
// Negotiation uses persistent AllgatherRing/BroadcastOneToAll instances; the data plane is in
// gloo_collectives.cc. A process set gets its own context, a full mesh among its members set
// up through the same store under "<init>/ps<id>/".
#include <gloo/allgather_ring.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "transport/transport.h"
#include "base/dtype.h"
#include "transport/gloo_collectives.h"
#include "transport/gloo_store.h"
#include "transport/store_client.h"

namespace tutti {
namespace {

// The "[host]:port" part of a Gloo TCP address's text (which may carry a "$seq" suffix).
std::string HostPort(const std::string& address) {
  size_t close = address.find("]:");
  if (address.empty() || address[0] != '[' || close == std::string::npos) return address;
  size_t end = close + 2;
  while (end < address.size() && address[end] >= '0' && address[end] <= '9') ++end;
  return address.substr(0, end);
}

// "[host]:port" of every TCP socket of this process, printed as Gloo prints addresses. This
// Gloo mostly shows the port's network-order bytes as a host-order number (53258 as 2768),
// but not on every path, so both spellings are listed. A peer that accepted a connection
// from this process names it by such an address.
std::vector<std::string> LocalTcpAddresses() {
  std::vector<std::string> found;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    int type = 0;
    socklen_t type_length = sizeof(type);
    sockaddr_storage address;
    socklen_t length = sizeof(address);
    if (fd == dirfd(dir) ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      continue;
    }
    char host[INET6_ADDRSTRLEN] = {0};
    int port = 0;
    if (address.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&address);
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      port = in->sin_port;
    } else if (address.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      port = in6->sin6_port;
    } else {
      continue;
    }
    found.push_back("[" + std::string(host) + "]:" + std::to_string(port));
    found.push_back("[" + std::string(host) + "]:" + std::to_string(ntohs(port)));
  }
  closedir(dir);
  return found;
}

std::string RankList(const std::vector<std::string>& keys) {
  std::string ranks;
  for (const std::string& key : keys) {
    ranks += (ranks.empty() ? "" : ", ") + key.substr(key.rfind('/') + 1);
  }
  return ranks;
}

// torch exports its own, incompatible copy of many gloo:: symbols. When torch's libraries
// are loaded with RTLD_GLOBAL (TORCH_USE_RTLD_GLOBAL=1) before the core, the core's (and
// libgloo's) references to those names bind to torch and the first collective crashes.
// Detect that and fail init with an explanation instead.
Status CheckGlooBinding() {
  Dl_info info;
  void* create_device = reinterpret_cast<void*>(&gloo::transport::tcp::CreateDevice);
  if (dladdr(create_device, &info) == 0 || info.dli_fname == nullptr) return Status::OK();
  std::string path = info.dli_fname;
  std::string file = path.substr(path.rfind('/') + 1);
  if (file.compare(0, 7, "libgloo") == 0) return Status::OK();
  return Status::Unsupported(
      "Gloo functions in this process resolve to " + path + " instead of the system libgloo: "
      "a library with its own Gloo (torch with TORCH_USE_RTLD_GLOBAL=1) was loaded with "
      "RTLD_GLOBAL before tutti's core. Load the core with RTLD_DEEPBIND, unset "
      "TORCH_USE_RTLD_GLOBAL, or use the MPI controller");
}

class GlooTransport : public Transport {
 public:
  explicit GlooTransport(const Config& config) : config_(config) {
    topology_ = config.gloo;  // the launcher's topology, without the store settings
  }

  Status Connect() {
    Status s = CheckGlooBinding();
    if (!s.ok()) return s;
    const GlooConfig& g = config_.gloo;
    const auto timeout = std::chrono::milliseconds(
        static_cast<int64_t>(config_.timeout_seconds * 1000));
    client_.reset(new StoreClient(g.rendezvous_addr, g.rendezvous_port, g.secret, timeout));
    // Every init of a process gets fresh keys, so init -> shutdown -> init never reads the
    // addresses of the previous mesh (elastic jobs: every membership generation).
    const std::string& prefix = prefix_ = "tutti/" + RendezvousScope(config_);

    // Join first, so a missing process is reported by rank instead of as a Gloo error.
    s = client_->Set(prefix + "/joined/" + std::to_string(g.rank), "1");
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
      device_ = gloo::transport::tcp::CreateDevice(attr);
      context_ = std::make_shared<gloo::rendezvous::Context>(g.rank, g.size);
      context_->setTimeout(timeout);
      GlooStore store(client_.get());
      gloo::rendezvous::PrefixStore mesh_store(prefix + "/mesh", store);
      context_->connectFullMesh(mesh_store, device_);
      GlooWarmUp(context_);
      // A rank's connectFullMesh can return while a peer is still finishing its side; without
      // this barrier a rank that exits right after init could break the peer's init.
      GlooBarrier(context_);
      // Persistent negotiation channels: set up once, run every cycle.
      gather_in_.assign(kSlotBytes, 0);
      gather_out_.assign(kSlotBytes * g.size, 0);
      gather_.reset(new gloo::AllgatherRing<char>(context_, {gather_in_.data()},
                                                  gather_out_.data(), kSlotBytes));
      broadcast_slot_.assign(kSlotBytes, 0);
      broadcast_.reset(new gloo::BroadcastOneToAll<char>(context_, {broadcast_slot_.data()},
                                                         kSlotBytes, 0));
    } catch (const std::exception& e) {
      return Status::Aborted(std::string("Gloo could not connect the ranks: ") + e.what());
    }
    LearnMeshAddresses(prefix + "/mesh/");
    return LearnPeerAddresses();
  }

  // The addresses each rank advertised for its pairs in the mesh rendezvous: Gloo names a
  // peer by these in its errors even after the connection came from another port. Read
  // back from the store (non-blocking: every rank has written its entry by now); an entry
  // in a layout this code does not know is skipped, it only costs a name in a message.
  void LearnMeshAddresses(const std::string& mesh_prefix) {
    const GlooConfig& g = config_.gloo;
    const size_t entry = gloo::transport::tcp::Address().bytes().size();
    if (entry < sizeof(sockaddr_storage)) return;
    for (int r = 0; r < g.size; ++r) {
      if (r == g.rank) continue;
      std::string blob;
      bool found = false;
      if (!client_->Get(mesh_prefix + std::to_string(r), &blob, &found).ok() || !found) continue;
      for (size_t at = 0; at + entry <= blob.size(); at += entry) {
        sockaddr_storage address;
        std::memcpy(&address, blob.data() + at, sizeof(address));
        if (address.ss_family != AF_INET && address.ss_family != AF_INET6) continue;
        const std::vector<char> bytes(blob.begin() + at, blob.begin() + at + entry);
        try {
          peer_addresses_.emplace_back(HostPort(gloo::transport::tcp::Address(bytes).str()), r);
        } catch (const std::exception&) {
          // not an address after all: no name for it
        }
      }
    }
  }

  // Gloo's TCP errors name a peer by an address; every rank publishes its pairs' addresses
  // so that errors can name the rank too ("Read error [10.0.0.2]:41235 (rank 3): ...").
  Status LearnPeerAddresses() {
    const GlooConfig& g = config_.gloo;
    if (g.size < 2) return Status::OK();
    // A peer's errors print either the address its pair with us advertised in the store or,
    // when we connected to it, the address our connection came from.
    std::string mine;
    for (int p = 0; p < g.size; ++p) {
      if (p != g.rank) mine += HostPort(context_->getPair(p)->address().str()) + "\n";
    }
    for (const std::string& address : LocalTcpAddresses()) mine += address + "\n";
    Status s = client_->Set(prefix_ + "/address/" + std::to_string(g.rank), mine);
    if (!s.ok()) return s;
    for (int r = 0; r < g.size; ++r) {
      std::string addresses;
      s = client_->WaitGet(prefix_ + "/address/" + std::to_string(r), &addresses);
      if (!s.ok()) return s;
      size_t start = 0;
      while (start < addresses.size()) {
        size_t end = addresses.find('\n', start);
        if (end == std::string::npos) end = addresses.size();
        if (end > start) peer_addresses_.emplace_back(addresses.substr(start, end - start), r);
        start = end + 1;
      }
    }
    return Status::OK();
  }

  // `message` with " (rank R)" after every rank's address it mentions (some of Gloo's
  // messages name this process's own address: that is marked too).
  std::string NameRanks(std::string message) const {
    for (const auto& peer : peer_addresses_) {
      const std::string tag = " (rank " + std::to_string(peer.second) +
                              (peer.second == config_.gloo.rank ? ", this process)" : ")");
      for (size_t at = message.find(peer.first); at != std::string::npos;
           at = message.find(peer.first, at + peer.first.size() + tag.size())) {
        const size_t end = at + peer.first.size();
        // "[h]:4242" must not match inside "[h]:42421", nor be tagged twice
        if (end < message.size() && message[end] >= '0' && message[end] <= '9') continue;
        if (message.compare(end, 7, " (rank ") == 0) continue;
        message.insert(end, tag);
      }
    }
    return message;
  }

  const char* name() const override { return "gloo"; }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    // Legacy Gloo has no gather: allgather fixed-size slots (length + inline payload) with a
    // persistent algorithm; if any message is too long for its slot, every rank sees that
    // length and all run a second allgather padded to the longest message.
    return Guard("negotiation", [&] {
      const int size = topology_.size;
      WriteSlot(mine, gather_in_.data());
      gather_->run();
      std::vector<uint64_t> lengths(size);
      uint64_t longest = 0;
      for (int r = 0; r < size; ++r) {
        std::memcpy(&lengths[r], &gather_out_[r * kSlotBytes], sizeof(uint64_t));
        longest = std::max(longest, lengths[r]);
      }
      all->clear();
      if (longest <= kInlineBytes) {
        if (topology_.rank != 0) return;
        for (int r = 0; r < size; ++r) {
          all->emplace_back(&gather_out_[r * kSlotBytes + sizeof(uint64_t)], lengths[r]);
        }
        return;
      }
      std::vector<char> padded(longest, 0), gathered(longest * size);
      std::memcpy(padded.data(), mine.data(), mine.size());
      gloo::AllgatherRing<char>(context_, {padded.data()}, gathered.data(),
                                static_cast<int>(longest)).run();
      if (topology_.rank != 0) return;
      for (int r = 0; r < size; ++r) all->emplace_back(&gathered[r * longest], lengths[r]);
    });
  }

  Status BroadcastFromRoot(std::string* bytes) override {
    return Guard("negotiation", [&] {
      if (topology_.rank == 0) WriteSlot(*bytes, broadcast_slot_.data());
      broadcast_->run();
      uint64_t length;
      std::memcpy(&length, broadcast_slot_.data(), sizeof(length));
      if (length <= kInlineBytes) {
        bytes->assign(broadcast_slot_.data() + sizeof(uint64_t), length);
        return;
      }
      bytes->resize(length);
      gloo::BroadcastOneToAll<char>(context_, {&(*bytes)[0]}, length, 0).run();
    });
  }

  Status AgreeFlags(std::vector<uint64_t>* words) override {
    // Allgather (n - 1 hops, fewer than a ring allreduce) and AND locally. Two persistent
    // channels take turns: a peer that finished this exchange may start the next one at once,
    // and it must not write into the buffer this rank is still reading.
    return Guard("negotiation", [&] {
      const int size = topology_.size;
      const size_t bytes = words->size() * sizeof(uint64_t);
      if (flag_channels_[0].in.size() != bytes) {
        // Every rank passes the same length, and it only changes with the configuration.
        for (FlagChannel& channel : flag_channels_) {
          channel.in.assign(bytes, 0);
          channel.out.assign(bytes * size, 0);
          channel.gather.reset(new gloo::AllgatherRing<char>(
              context_, {channel.in.data()}, channel.out.data(), static_cast<int>(bytes)));
        }
      }
      FlagChannel& channel = flag_channels_[flag_turn_];
      flag_turn_ ^= 1;
      std::memcpy(channel.in.data(), words->data(), bytes);
      channel.gather->run();
      for (int r = 0; r < size; ++r) {
        for (size_t w = 0; w < words->size(); ++w) {
          uint64_t theirs;
          std::memcpy(&theirs, channel.out.data() + r * bytes + w * sizeof(uint64_t),
                      sizeof(theirs));
          (*words)[w] &= theirs;
        }
      }
    });
  }

  Status AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) override {
    auto me = std::find(ranks.begin(), ranks.end(), topology_.rank);
    if (me == ranks.end() || ranks.size() == 1) return Status::OK();  // one rank: no mesh
    return Guard("process set setup", [&] {
      const int set_rank = static_cast<int>(me - ranks.begin());
      auto context = std::make_shared<gloo::rendezvous::Context>(set_rank,
                                                                 static_cast<int>(ranks.size()));
      context->setTimeout(context_->getTimeout());
      GlooStore store(client_.get());
      gloo::rendezvous::PrefixStore set_store(prefix_ + "/ps" + std::to_string(id), store);
      context->connectFullMesh(set_store, device_);
      GlooWarmUp(context);
      sets_[id] = context;
    });
  }

  void RemoveProcessSet(int32_t id) override { sets_.erase(id); }

  Status Allreduce(int32_t set, void* buffer, int64_t count, tutti_dtype dtype,
                   tutti_reduce_op op) override {
    return Guard("allreduce", [&] {
      if (auto context = SetContext(set)) GlooAllreduce(context, buffer, count, dtype, op);
    });
  }

  Status Broadcast(int32_t set, void* buffer, int64_t bytes, int root) override {
    return Guard("broadcast", [&] {
      if (auto context = SetContext(set)) GlooBroadcast(context, buffer, bytes, root);
    });
  }

  Status Allgatherv(int32_t set, const void* input, void* output,
                    const std::vector<int64_t>& counts, size_t element_size) override {
    return Guard("allgather", [&] {
      auto context = SetContext(set);
      if (!context) {
        if (counts[0] > 0) std::memmove(output, input, counts[0] * element_size);
        return;
      }
      GlooAllgatherv(context, input, output, Bytes(counts, element_size));
    });
  }

  Status Alltoallv(int32_t set, const void* input, const std::vector<int64_t>& send_counts,
                   void* output, const std::vector<int64_t>& recv_counts,
                   size_t element_size) override {
    return Guard("alltoall", [&] {
      auto context = SetContext(set);
      if (!context) {
        if (send_counts[0] > 0) std::memmove(output, input, send_counts[0] * element_size);
        return;
      }
      GlooAlltoallv(context, input, Bytes(send_counts, element_size), output,
                    Bytes(recv_counts, element_size));
    });
  }

  Status ReduceScatter(int32_t set, int set_rank, void* buffer,
                       const std::vector<int64_t>& counts, void* output, tutti_dtype dtype,
                       tutti_reduce_op op) override {
    auto context = SetContext(set);
    if (!context) return Transport::ReduceScatter(set, set_rank, buffer, counts, output, dtype, op);
    return Guard("reducescatter", [&] {
      GlooReduceScatter(context, buffer, counts, output, dtype, op, &reduce_scratch_);
    });
  }

  Status SendRecv(int32_t set, int, int peer, const void* send, int64_t send_bytes, void* recv,
                  int64_t recv_bytes) override {
    return Guard("send/receive", [&] {
      if (auto context = SetContext(set)) {
        GlooSendRecv(context, peer, send, send_bytes, recv, recv_bytes);
      }
    });
  }

  Status Barrier(int32_t set) override {
    return Guard("barrier", [&] {
      if (auto context = SetContext(set)) GlooBarrier(context);
    });
  }

  void Abort() override {
    // Closing the pairs is what a peer blocked in a receive from this rank notices.
    gather_.reset();
    broadcast_.reset();
    for (FlagChannel& channel : flag_channels_) channel.gather.reset();
    sets_.clear();
    context_.reset();
    device_.reset();
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
                             "exited or stopped responding): " + NameRanks(e.what()));
    }
  }

  // The context of process set `set`; null for a set of one rank (nothing to exchange).
  GlooContext SetContext(int32_t set) const {
    if (set == TUTTI_GLOBAL_PROCESS_SET) return topology_.size > 1 ? context_ : nullptr;
    auto it = sets_.find(set);
    if (it == sets_.end()) return nullptr;
    return it->second;
  }

  static std::vector<int64_t> Bytes(const std::vector<int64_t>& counts, size_t element_size) {
    std::vector<int64_t> bytes;
    for (int64_t c : counts) bytes.push_back(c * static_cast<int64_t>(element_size));
    return bytes;
  }

  // A negotiation slot: u64 length, then the message when it fits.
  static constexpr int kSlotBytes = 4096;
  static constexpr uint64_t kInlineBytes = kSlotBytes - sizeof(uint64_t);

  static void WriteSlot(const std::string& message, char* slot) {
    uint64_t length = message.size();
    std::memcpy(slot, &length, sizeof(length));
    if (length <= kInlineBytes) std::memcpy(slot + sizeof(length), message.data(), length);
  }

  const Config config_;
  Topology topology_;
  std::unique_ptr<StoreClient> client_;
  std::string prefix_;  // this init's store namespace
  std::vector<std::pair<std::string, int>> peer_addresses_;  // "[host]:port", global rank
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::map<int32_t, GlooContext> sets_;
  std::vector<char> reduce_scratch_;  // reducescatter's incoming part, reused  // process set id -> context (members only)
  std::vector<char> gather_in_, gather_out_, broadcast_slot_;
  std::unique_ptr<gloo::AllgatherRing<char>> gather_;
  std::unique_ptr<gloo::BroadcastOneToAll<char>> broadcast_;
  // The cycle-opening flag exchange (AgreeFlags), double-buffered.
  struct FlagChannel {
    std::vector<char> in, out;
    std::unique_ptr<gloo::AllgatherRing<char>> gather;
  };
  FlagChannel flag_channels_[2];
  int flag_turn_ = 0;
};

}  // namespace

Status CreateGlooTransport(const Config& config, std::unique_ptr<Transport>* transport) {
  std::unique_ptr<GlooTransport> gloo(new GlooTransport(config));
  Status s = gloo->Connect();
  if (!s.ok()) return s;
  *transport = std::move(gloo);
  return Status::OK();
}

}  // namespace tutti
