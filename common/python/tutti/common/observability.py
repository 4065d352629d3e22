"""What the core is doing: the timeline (a Chrome trace) and the core's counters."""

import ctypes
import os

from . import core
from .exceptions import NotInitializedError


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome trace of the core's activity (negotiation, queueing, fusion
    copies and each collective, one row per tensor) to `file_path`; open it in Perfetto or
    chrome://tracing. Only rank 0 writes. Replaces a trace in progress. The environment
    variable TUTTI_TIMELINE does the same from init() on. `mark_cycles` is accepted for
    Horovod compatibility and ignored."""
    del mark_cycles
    core.check(core.lib.tutti_start_timeline(os.fsencode(os.fspath(file_path))))


def stop_timeline():
    """Finishes the trace started by start_timeline() or TUTTI_TIMELINE."""
    core.check(core.lib.tutti_stop_timeline())


def counters():
    """The core's counters since init(), as a dict: cycles, negotiations, cache_hits,
    cache_misses, cache_invalidations, requests_done, allreduce_collectives, fused_tensors,
    fused_bytes, allreduce_bytes, stall_warnings, caller_cycles (cycles run by a blocking
    call on its own thread), follow_up_cycles (cycles opened at once for requests in flight
    here, instead of after the cycle time), shm_single_copy_calls (shared-memory
    collectives that moved their data between the ranks' buffers with one kernel copy
    instead of through the segment; docs/architecture.md), shm_streaming_calls
    (shared-memory allreduces that wrote the segment with streaming stores, bypassing
    the cache; docs/architecture.md), shm_cpu_moves (times this rank
    moved off a CPU that it found itself sharing with a same-host peer, taking turns with
    it; docs/architecture.md), and the settings in force
    (cycle_time_us, fusion_threshold_bytes, cache_enabled, autotune_samples,
    autotune_converged)."""
    count = core.lib.tutti_counter_count()
    values = (ctypes.c_int64 * count)()
    if core.lib.tutti_counters(values, count) < 0:
        raise NotInitializedError(core.last_error() or "tutti is not initialized; call init() first")
    return {core.lib.tutti_counter_name(i).decode(): int(values[i]) for i in range(count)}
