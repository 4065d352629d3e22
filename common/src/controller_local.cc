// The controller of a single process: there is nobody to talk to, so every collective is the
// identity and negotiation is a loopback.
#include "controller.h"

namespace tutti {
namespace {

class LocalController : public Controller {
 public:
  const char* name() const override { return "local"; }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    all->assign(1, mine);
    return Status::OK();
  }
  Status BroadcastFromRoot(std::string*) override { return Status::OK(); }
  Status Allreduce(void*, int64_t, tutti_dtype, tutti_reduce_op) override { return Status::OK(); }

 private:
  Topology topology_;
};

}  // namespace

std::unique_ptr<Controller> CreateLocalController() {
  return std::unique_ptr<Controller>(new LocalController());
}

}  // namespace tutti
