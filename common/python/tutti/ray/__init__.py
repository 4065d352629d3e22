"""tutti.ray: tutti jobs whose ranks are Ray actors (Horovod's horovod.ray API).

    import ray
    from tutti.ray import RayExecutor

    ray.init()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2)
    executor.start()
    results = executor.run(train)       # train() calls hvd.init(); one result per rank
    executor.shutdown()

run(train, callbacks=[print]) calls print on the driver with every value that rank 0
passes to tutti.ray.ray_logger.log.

Elastic training: ElasticRayExecutor (or RayExecutor(min_workers=..., max_workers=...))
runs hvd.elastic.run functions on one actor per slot of Ray's nodes, found by
RayHostDiscovery, and re-forms the job when workers fail or nodes come and go. Needs Ray (`pip install "ray[default]"`); see
docs/engines.md.
"""

from ._imports import ray_module

ray_module()  # fail at import time, with the package to install, when Ray is missing

from tutti.runner.api import WorkerError  # noqa: E402

from .discovery import RayHostDiscovery, hosts_and_slots  # noqa: E402
from .elastic import ElasticRayExecutor, ElasticRaySettings  # noqa: E402
from .executor import RayExecutor, RaySettings  # noqa: E402

__all__ = ["RayExecutor", "RaySettings", "ElasticRayExecutor", "ElasticRaySettings",
           "RayHostDiscovery", "hosts_and_slots", "WorkerError"]
