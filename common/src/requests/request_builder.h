// Enqueue-time validation: turns a tutti_request into a PendingOp, or explains (as
// INVALID_ARGUMENT or UNSUPPORTED) what is wrong with it. Nothing here talks to other ranks.
#ifndef TUTTI_SRC_REQUEST_BUILDER_H_
#define TUTTI_SRC_REQUEST_BUILDER_H_

#include "requests/process_sets.h"
#include "requests/request_queue.h"
#include "base/status.h"
#include "tutti/c_api.h"

namespace tutti {

// Checks one tensor view; the message names it by role and, for a tensor of a grouped
// request (index >= 0), its index: "input", "input 0".
Status CheckTensor(const char* role, int index, const tutti_tensor* t);

// `rank` is this process's global rank; `sets` resolves the request's process set.
Status BuildRequest(const tutti_request& request, int rank, const ProcessSetRegistry& sets,
                    PendingOp* op);

}  // namespace tutti

#endif  // TUTTI_SRC_REQUEST_BUILDER_H_
