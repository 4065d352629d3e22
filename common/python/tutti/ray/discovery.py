"""Ray's node list as host discovery: which hosts can take workers now, and how many.

ElasticRayExecutor and RayExecutor(min_workers=...) poll it once a second through tutti's
elastic driver (elastic_job.py), as Horovod's ElasticRayExecutor polls its RayHostDiscovery.
"""

import math

from ._imports import ray_module


def hosts_and_slots(nodes, use_gpu=False, cpus_per_slot=1, gpus_per_slot=1):
    """{node address: slots} for the live nodes in `nodes` (ray.nodes()'s format).

    A node offers floor(CPU / cpus_per_slot) slots, and with use_gpu no more than
    floor(GPU / gpus_per_slot); dead nodes and nodes with no slot are left out.
    """
    if cpus_per_slot <= 0:
        raise ValueError("cpus_per_slot must be positive, not %r" % (cpus_per_slot,))
    if use_gpu and (gpus_per_slot is None or gpus_per_slot <= 0):
        raise ValueError("gpus_per_slot must be positive with use_gpu, not %r"
                         % (gpus_per_slot,))
    found = {}
    for node in nodes:
        if not node.get("Alive"):
            continue
        resources = node.get("Resources", {})
        slots = math.floor(resources.get("CPU", 0) / cpus_per_slot + 1e-9)
        if use_gpu:
            slots = min(slots, math.floor(resources.get("GPU", 0) / gpus_per_slot + 1e-9))
        if slots > 0:
            address = node["NodeManagerAddress"]
            found[address] = found.get(address, 0) + slots
    return found


class RayHostDiscovery:
    """Finds the hosts of the connected Ray cluster and their worker slots.

        discovery = RayHostDiscovery(cpus_per_slot=1)
        discovery.find_available_hosts_and_slots()   # {"10.0.0.5": 8, "10.0.0.6": 8}
    """

    def __init__(self, use_gpu=False, cpus_per_slot=1, gpus_per_slot=1):
        hosts_and_slots([], use_gpu, cpus_per_slot, gpus_per_slot)  # validates
        self.use_gpu = use_gpu
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = gpus_per_slot

    def find_available_hosts_and_slots(self):
        """{host address: slots} as Ray's node list says now."""
        ray = ray_module()
        return hosts_and_slots(ray.nodes(), self.use_gpu, self.cpus_per_slot,
                               self.gpus_per_slot)

    def __call__(self):
        return self.find_available_hosts_and_slots()
