"""The state of the machine's CPUs around a launch, measured by vcpu_probe (vcpu_probe.cc):
the round trip of a value between two processes, and how long a 4 MiB memcpy and a 4 MiB
kernel copy between processes take. Small calls and tutti's shared-memory pipeline depend
on the first, any library's large collectives on the copies' speed (docs/benchmarks.md,
"The CPUs' state" and runs AB), so every launch records the state before and after it."""

import json
import os
import subprocess

PROBE_SECONDS = 2.0


def probe_path():
    """The built probe: next to this file (Bazel runfiles, or a test's data), else in the
    checkout's bazel-bin; None when neither exists."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "vcpu_probe"),
                  os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
                      os.path.realpath(__file__)))), "bazel-bin", "tools", "bench", "vcpu_probe")]
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    return None


def measure(seconds=PROBE_SECONDS):
    """The probe's figures as a dict, or None (with the reason on stdout) when it cannot run."""
    path = probe_path()
    if path is None:
        print("bench: CPU state not measured (build //tools/bench:vcpu_probe)")
        return None
    try:
        done = subprocess.run([path, "--seconds", str(seconds), "--json"], capture_output=True,
                              text=True, timeout=seconds + 30)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip() or "exit code %d" % done.returncode)
        return json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError) as exc:
        print("bench: CPU state not measured (%s: %s)" % (type(exc).__name__, exc))
        return None


def describe(state):
    """One line for the report."""
    if not state:
        return "not measured"
    text = "round trip %.2f us, 4 MiB memcpy %d us" % (state["round_trip_us"]["p50"],
                                                         state["memcpy_4mib_us"]["p50"])
    kernel = state.get("kernel_copy_4mib_us")
    if kernel:
        text += ", 4 MiB kernel copy %d us (%d of %d over twice that)" % (
            kernel["p50"], state["kernel_copy_outliers"], state["samples"])
    return text + " (medians of %d samples)" % state["samples"]
