"""Tuning flags of tuttirun and the core environment variables they set.

One table serves the command line, the config file, `tutti.runner.run(**settings)`,
--verbose and the documentation, so a flag and its variable cannot drift apart.
"""

import collections
import math

from . import ranges
from .errors import UsageError

_MIB = 1024 * 1024

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


def non_negative_float(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError("%r is not a number" % (text,)) from None
    if not value >= 0 or not math.isfinite(value):
        raise UsageError("%r is negative, infinite or not a number" % (text,))
    return value


def positive_float(text):
    value = non_negative_float(text)
    if value == 0:
        raise UsageError("%r must be greater than 0" % (text,))
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError("%r is not an integer" % (text,)) from None
    if value < 0:
        raise UsageError("%r is negative" % (text,))
    return value


def log_level(text):
    value = str(text).upper()
    if value not in LOG_LEVELS:
        raise UsageError("%r is not a log level (choose from %s)" % (text, ", ".join(LOG_LEVELS)))
    return value


# flag: the long option; variable: what it sets; kind: a converter, or None for an on/off
# switch; to_env: the variable's text for a value (default: str; for a switch "1" when on
# and "0" when explicitly off, see SWITCH_SPELLINGS; None sets nothing).
# metavar: how --help names the value.
Tuning = collections.namedtuple("Tuning",
                                ["flag", "variable", "kind", "help", "to_env", "metavar"])

_METAVARS = {non_negative_int: "N", non_negative_float: "X", positive_float: "X",
             log_level: "LEVEL", str: "VALUE"}


def _tuning(flag, variable, kind, help, to_env=None, metavar=None):
    if to_env is None:
        to_env = str if kind else (lambda on: "1" if on else "0")
    return Tuning(flag, variable, kind, help, to_env, metavar or _METAVARS.get(kind))


def _ranged(flag, variable, help, to_env=None, scale=1.0, unit=None):
    """A flag whose value the core's range table checks (settings.def)."""
    name = variable[len("TUTTI_"):]
    kind = ranges.converter(name, scale, unit)
    return _tuning(flag, variable, kind, help, to_env,
                   "N" if ranges.table()[name].integer else "X")


TUNINGS = [
    _ranged("--fusion-threshold-mb", "TUTTI_FUSION_THRESHOLD",
            "fusion buffer size in MiB (the variable holds bytes); 0 disables fusion",
            lambda mb: str(int(mb * _MIB)), scale=_MIB, unit="MiB"),
    _ranged("--cycle-time-ms", "TUTTI_CYCLE_TIME", "negotiation cycle period in milliseconds"),
    _ranged("--cache-capacity", "TUTTI_CACHE_CAPACITY",
            "number of responses kept in the response cache"),
    _tuning("--disable-response-cache", "TUTTI_CACHE_CAPACITY", None,
            "disable the response cache (capacity 0)", lambda on: "0" if on else None),
    _tuning("--hierarchical-allreduce", "TUTTI_HIERARCHICAL_ALLREDUCE", None,
            "reduce within each host first, then across hosts"),
    _tuning("--hierarchical-allgather", "TUTTI_HIERARCHICAL_ALLGATHER", None,
            "gather within each host first, then across hosts"),
    _tuning("--timeline-filename", "TUTTI_TIMELINE", str,
            "write a Chrome-trace timeline of the collectives to this file", metavar="FILE"),
    _tuning("--timeline-mark-cycles", "TUTTI_TIMELINE_MARK_CYCLES", None,
            "mark negotiation cycles in the timeline"),
    _tuning("--autotune", "TUTTI_AUTOTUNE", None,
            "tune fusion threshold and cycle time while training"),
    _tuning("--autotune-log-file", "TUTTI_AUTOTUNE_LOG", str,
            "CSV file that records every autotuning sample", metavar="FILE"),
    _ranged("--autotune-warmup-samples", "TUTTI_AUTOTUNE_WARMUP_SAMPLES",
            "samples discarded before autotuning starts"),
    _ranged("--autotune-steps-per-sample", "TUTTI_AUTOTUNE_STEPS_PER_SAMPLE",
            "cycles per autotuning sample"),
    _ranged("--autotune-bayes-opt-max-samples", "TUTTI_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
            "maximum samples of the Bayesian optimisation"),
    _ranged("--autotune-gaussian-process-noise", "TUTTI_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
            "noise regularisation of the Gaussian process"),
    _tuning("--no-stall-check", "TUTTI_STALL_CHECK_DISABLE", None,
            "do not warn about ranks that stop submitting a tensor"),
    _ranged("--stall-check-warning-time-seconds", "TUTTI_STALL_CHECK_TIME_SECONDS",
            "warn when some ranks wait this long for the others"),
    _ranged("--stall-check-shutdown-time-seconds", "TUTTI_STALL_SHUTDOWN_TIME_SECONDS",
            "abort the job when a stall lasts this long (0: never)"),
    _tuning("--log-level", "TUTTI_LOG_LEVEL", log_level,
            "core log level: " + ", ".join(LOG_LEVELS)),
    _tuning("--log-hide-timestamp", "TUTTI_LOG_HIDE_TIME", None,
            "omit timestamps from core log lines"),
    _ranged("--gloo-timeout-seconds", "TUTTI_GLOO_TIMEOUT_SECONDS",
            "bound on Gloo rendezvous and collective waits"),
    _tuning("--mpi-threads-disable", "TUTTI_MPI_THREADS_DISABLE", None,
            "initialise MPI without MPI_THREAD_MULTIPLE"),
    _tuning("--thread-affinity", "TUTTI_THREAD_AFFINITY", str,
            "CPU ids for the core's background thread, one per local rank (e.g. 0,1)",
            metavar="CPUS"),
    _ranged("--num-nccl-streams", "TUTTI_NUM_NCCL_STREAMS",
            "CUDA streams used by NCCL operations"),
]


# Horovod's other spellings of the switches above: flag -> (the switch's settings
# attribute, the value it sets). False switches a setting explicitly off (its variable is
# set to 0).
SWITCH_SPELLINGS = {
    "--no-hierarchical-allreduce": ("hierarchical_allreduce", False),
    "--no-hierarchical-allgather": ("hierarchical_allgather", False),
    "--no-autotune": ("autotune", False),
    "--no-timeline-mark-cycles": ("timeline_mark_cycles", False),
    "--stall-check": ("no_stall_check", False),
    "--no-mpi-threads-disable": ("mpi_threads_disable", False),
    "--log-without-timestamp": ("log_hide_timestamp", True),
    "--log-with-timestamp": ("log_hide_timestamp", False),
    "--no-log-hide-timestamp": ("log_hide_timestamp", False),
}

# Settings the core cannot honour. tuttirun refuses them instead of passing on a variable
# that nothing reads: settings attribute -> (refused value; how the refusal names it; why).
UNSUPPORTED = {
    "hierarchical_allgather": (
        True, "--hierarchical-allgather",
        "tutti has no hierarchical allgather (the ranks of one host already gather through "
        "shared memory); leave it off"),
    "mpi_threads_disable": (
        True, "--mpi-threads-disable",
        "the tutti core needs MPI_THREAD_MULTIPLE, since framework threads and the core's "
        "thread both call MPI"),
    "log_hide_timestamp": (
        False, "--log-with-timestamp",
        "the core's log lines carry no timestamps (as with --log-without-timestamp)"),
}


def check_supported(settings):
    """Raises UsageError for the first setting that the core cannot honour."""
    for name, (refused, shown, why) in UNSUPPORTED.items():
        value = getattr(settings, name, None)
        if value is not None and value == refused:
            raise UsageError("%s is not supported: %s" % (shown, why))


def dest(flag):
    """The settings attribute of a long flag: --cycle-time-ms -> cycle_time_ms."""
    return flag.lstrip("-").replace("-", "_")


def environment(settings):
    """The core variables that `settings` asks for, in table order."""
    env = {}
    for tuning in TUNINGS:
        value = getattr(settings, dest(tuning.flag), None)
        if value is None:
            continue
        text = tuning.to_env(value)
        if text is not None:
            env[tuning.variable] = text
    return env
