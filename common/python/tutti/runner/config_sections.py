"""horovodrun's sectioned config file, and `cluster:` host groups, as flat settings.

tuttirun's own config file is flat (`fusion-threshold-mb: 32`). horovodrun's groups the
same settings in sections:

    controller: gloo
    params: {fusion_threshold_mb: 32, cycle_time_ms: 2, cache_capacity: 1024,
             hierarchical_allreduce: false, hierarchical_allgather: false}
    autotune: {enabled: true, log_file: ..., warmup_samples: 3, steps_per_sample: 10,
               bayes_opt_max_samples: 20, gaussian_process_noise: 0.8}
    timeline: {filename: ..., mark_cycles: false}
    stall_check: {enabled: true, warning_time_seconds: 60, shutdown_time_seconds: 0}
    library_options: {mpi_threads_disable: false, num_nccl_streams: 1, thread_affinity: 0,
                      gloo_timeout_seconds: 30}
    logging: {level: WARNING, with_timestamp: false}

and `cluster:` lists groups of hosts, each a master and its workers, where an address
range such as 10.0.0.2-10.0.0.10 stands for every address in it:

    cluster:
      - master: 10.0.0.1
        workers: 10.0.0.2-10.0.0.10

flatten() turns both into the flat keys; unknown section keys are errors (horovodrun
ignores them silently, which hides typos).
"""

from . import hosts
from .errors import UsageError

CLUSTER_MASTER = "cluster_master"

# section -> {key in the section: (flat setting, True when the value is inverted)}
_SECTIONS = {
    "params": {
        "fusion_threshold_mb": ("fusion_threshold_mb", False),
        "cycle_time_ms": ("cycle_time_ms", False),
        "cache_capacity": ("cache_capacity", False),
        "hierarchical_allreduce": ("hierarchical_allreduce", False),
        "hierarchical_allgather": ("hierarchical_allgather", False),
    },
    "autotune": {
        "enabled": ("autotune", False),
        "log_file": ("autotune_log_file", False),
        "warmup_samples": ("autotune_warmup_samples", False),
        "steps_per_sample": ("autotune_steps_per_sample", False),
        "bayes_opt_max_samples": ("autotune_bayes_opt_max_samples", False),
        "gaussian_process_noise": ("autotune_gaussian_process_noise", False),
    },
    "timeline": {
        "filename": ("timeline_filename", False),
        "mark_cycles": ("timeline_mark_cycles", False),
    },
    "stall_check": {
        "enabled": ("no_stall_check", True),
        "warning_time_seconds": ("stall_check_warning_time_seconds", False),
        "shutdown_time_seconds": ("stall_check_shutdown_time_seconds", False),
    },
    "library_options": {
        "mpi_threads_disable": ("mpi_threads_disable", False),
        "num_nccl_streams": ("num_nccl_streams", False),
        "thread_affinity": ("thread_affinity", False),
        "gloo_timeout_seconds": ("gloo_timeout_seconds", False),
    },
    "logging": {
        "level": ("log_level", False),
        "with_timestamp": ("log_hide_timestamp", True),
    },
}


def _section(name, body, path):
    if not isinstance(body, dict):
        raise UsageError("config file %s: section %r must be a mapping, not %r"
                         % (path, name, body))
    flat = {}
    for key, value in body.items():
        entry = _SECTIONS[name].get(str(key).replace("-", "_"))
        if entry is None:
            raise UsageError("config file %s: unknown setting %r in section %r (known: %s)"
                             % (path, key, name, ", ".join(sorted(_SECTIONS[name]))))
        setting, inverted = entry
        if inverted:
            if not isinstance(value, bool):
                raise UsageError("config file %s: %s.%s must be true or false, not %r"
                                 % (path, name, key, value))
            value = not value
        flat[setting] = value
    return flat


def _controller(value, path):
    name = str(value).lower()
    if name not in ("gloo", "mpi"):
        raise UsageError("config file %s: controller %r is not gloo or mpi" % (path, value))
    return {name: True}


def _group_hosts(group, number, path):
    where = "config file %s: cluster group %d" % (path, number)
    if not isinstance(group, dict) or set(group) - {"master", "workers"} or "master" not in group:
        raise UsageError("%s must be a mapping with `master` and optionally `workers`, not %r"
                         % (where, group))
    names = []
    for field in ("master", "workers"):
        value = group.get(field)
        items = value if isinstance(value, list) else [] if value is None else [value]
        if field == "master" and len(items) != 1:
            raise UsageError("%s: master must be one host, not %r" % (where, value))
        for item in items:
            if isinstance(item, (dict, list, bool)) or item is None:
                raise UsageError("%s: %r is not a host" % (where, item))
            names.extend(hosts.expand_host_entry(str(item), where))
    return names


def _cluster(groups, path):
    """{"hosts": "h1,h2,...", "master_host": first master} from the cluster groups."""
    if not isinstance(groups, list) or not groups:
        raise UsageError("config file %s: cluster must be a list of groups "
                         "(- master: HOST, workers: HOSTS)" % path)
    names = []
    for number, group in enumerate(groups, 1):
        names.extend(_group_hosts(group, number, path))
    return {"hosts": ",".join(names), "master_host": names[0].split(":")[0]}


def flatten(data, path):
    """The config file's settings with Horovod's sections and `cluster` made flat.

    Keys come back with underscores. The cluster's first master comes back as
    CLUSTER_MASTER: the master host of a Gloo job unless a master host is named.
    """
    flat = {}
    cluster = None
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name == "controller":
            part = _controller(value, path)
        elif name == "cluster":
            cluster = _cluster(value, path)
            part = {"hosts": cluster["hosts"]}
        elif name in _SECTIONS and (name != "autotune" or isinstance(value, dict)):
            part = _section(name, value, path)
        else:
            part = {name: value}
        for setting in part:
            if setting in flat:
                raise UsageError("config file %s: %s is set twice" % (path, setting))
        flat.update(part)
    if cluster is not None:
        flat[CLUSTER_MASTER] = cluster["master_host"]
    return flat
