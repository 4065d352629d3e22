#include "controller.h"

namespace tutti {

Status CreateController(const Config& config, std::unique_ptr<Controller>* controller) {
  switch (config.controller) {
    case ControllerKind::kLocal:
      *controller = CreateLocalController();
      return Status::OK();
    case ControllerKind::kMpi:
      return CreateMpiController(config, controller);
    case ControllerKind::kGloo:
      return CreateGlooController(config, controller);
  }
  return Status::Internal("unknown controller kind");
}

}  // namespace tutti
