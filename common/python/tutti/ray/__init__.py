"""tutti.ray: tutti jobs whose ranks are Ray actors (Horovod's horovod.ray API).

    import ray
    from tutti.ray import RayExecutor

    ray.init()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2)
    executor.start()
    results = executor.run(train)       # train() calls hvd.init(); one result per rank
    executor.shutdown()

RayHostDiscovery reports Ray's live nodes and their slots: the host discovery that elastic
training will use once tutti has it. Needs Ray (`pip install "ray[default]"`); see
docs/engines.md.
"""

from ._imports import ray_module

ray_module()  # fail at import time, with the package to install, when Ray is missing

from tutti.runner.api import WorkerError  # noqa: E402

from .discovery import RayHostDiscovery, hosts_and_slots  # noqa: E402
from .executor import RayExecutor, RaySettings  # noqa: E402

__all__ = ["RayExecutor", "RaySettings", "RayHostDiscovery", "hosts_and_slots", "WorkerError"]
