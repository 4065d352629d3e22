"""Reports the CPUs the core's background thread may run on."""

import numpy

import tutti.numpy as hvd

hvd.init()
hvd.allreduce(numpy.ones(4, dtype=numpy.float32), op=hvd.Sum)
with open("/proc/self/task/%d/status" % hvd.background_thread_id()) as status:
    allowed = [line.split(":", 1)[1].strip() for line in status
               if line.startswith("Cpus_allowed_list:")][0]
print("rank %d local %d core thread cpus=%s" % (hvd.rank(), hvd.local_rank(), allowed),
      flush=True)
hvd.shutdown()
