"""Values that workers send to the driver's callbacks (Horovod's horovod.ray.ray_logger).

In a function run by RayExecutor or ElasticRayExecutor with `callbacks=[...]`:

    from tutti.ray import ray_logger

    def train():
        ...
        ray_logger.log({"epoch": epoch, "loss": loss})   # rank 0's values reach the driver

The executor configures every worker with its run's queue before the function starts;
log() puts the value there and the driver calls each callback with it. Without callbacks
(or outside an executor) nothing is configured: log() warns once and drops the value.
"""

import os
import sys
import warnings

_queue = None
_warned = False


def configure(queue):
    """Sends this worker's logged values to `queue` (a ray.util.queue.Queue); None stops
    sending. Called by the executors before the user's function."""
    global _queue
    _queue = queue


def log(info_dict, chief_only=True):
    """Sends `info_dict` to the driver's callbacks. chief_only: only rank 0's values are
    sent (the other ranks' calls do nothing); False sends every rank's."""
    global _warned
    if _queue is None:
        if not _warned:
            _warned = True
            warnings.warn("tutti.ray.ray_logger.log: no callbacks are listening (the executor "
                          "was given no callbacks, or this is not an executor's worker); the "
                          "value is dropped", stacklevel=2)
        return
    if chief_only and _rank() != 0:
        return
    _queue.put(info_dict)


def _rank():
    """This worker's rank: tutti's own once initialised (it follows elastic re-formations),
    else the one the executor put in the environment; 0 when neither knows."""
    common = sys.modules.get("tutti.common")  # not imported: tutti cannot be initialised
    if common is not None and common.is_initialized():
        return common.rank()
    for name in ("TUTTI_RANK", "HOROVOD_RANK"):
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                pass
    return 0
