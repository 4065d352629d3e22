// Process-wide MPI lifetime. MPI can be initialized only once per process, so the first
// tutti init initializes it (unless the application already did) and it stays initialized
// across shutdown/init; an atexit hook finalizes it when the process exits. MPI that the
// application initialized is never finalized by tutti.
#ifndef TUTTI_SRC_MPI_RUNTIME_H_
#define TUTTI_SRC_MPI_RUNTIME_H_

#include <string>

#include "base/status.h"

namespace tutti {

// Initializes MPI with MPI_THREAD_MULTIPLE if needed. Returns a warning in *warning (empty
// when none) when the application initialized MPI with a lower thread level.
Status EnsureMpiInitialized(std::string* warning);

// True when MPI is initialized (and not finalized) with MPI_THREAD_MULTIPLE.
bool MpiThreadMultiple();

// Text of an MPI error code ("MPI_ERR_TRUNCATE: message truncated").
std::string MpiErrorString(int code);

}  // namespace tutti

#endif  // TUTTI_SRC_MPI_RUNTIME_H_
