#include "base/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tutti {

Status ThreadAffinityCpu(int local_rank, int local_size, int* cpu) {
  *cpu = -1;
  std::string var;
  const char* value = nullptr;
  for (const char* name : {"TUTTI_THREAD_AFFINITY", "HOROVOD_THREAD_AFFINITY"}) {
    value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      var = name;
      break;
    }
    value = nullptr;
  }
  if (value == nullptr) return Status::OK();
  std::vector<long> cpus;
  const char* p = value;
  while (true) {
    char* end = nullptr;
    errno = 0;
    long id = std::strtol(p, &end, 10);
    if (end == p || errno == ERANGE || id < 0 || id >= CPU_SETSIZE ||
        (*end != ',' && *end != '\0')) {
      return Status::InvalidArgument("environment variable " + var + "='" + value +
                                     "' is not a comma-separated list of CPU ids");
    }
    cpus.push_back(id);
    if (*end == '\0') break;
    p = end + 1;
  }
  if (static_cast<int>(cpus.size()) < local_size) {
    return Status::InvalidArgument(
        "environment variable " + var + "='" + value + "' lists " +
        std::to_string(cpus.size()) + " CPU id(s) but this host runs " +
        std::to_string(local_size) + " ranks: give one per local rank, e.g. " + var + "=" +
        (local_size == 2 ? "0,1" : "0,1,2"));
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 &&
      !CPU_ISSET(static_cast<int>(cpus[local_rank]), &allowed)) {
    return Status::InvalidArgument("environment variable " + var + "='" + value +
                                   "' gives local rank " + std::to_string(local_rank) +
                                   " CPU " + std::to_string(cpus[local_rank]) +
                                   ", which this process may not run on");
  }
  *cpu = static_cast<int>(cpus[local_rank]);
  return Status::OK();
}

Status PinCurrentThread(int cpu) {
  if (cpu < 0) return Status::OK();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    return Status::Internal("cannot pin the tutti core's thread to CPU " + std::to_string(cpu) +
                            ": " + std::strerror(rc));
  }
  return Status::OK();
}

}  // namespace tutti
