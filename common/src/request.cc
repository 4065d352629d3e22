#include "request.h"

namespace tutti {

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "allreduce";
  }
  return "unknown collective";
}

}  // namespace tutti
