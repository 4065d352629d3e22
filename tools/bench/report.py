"""Figures from the samples: medians, bandwidths, ratios, the issue's targets, the text table.

Bandwidths follow nccl-tests (doc/PERFORMANCE.md). For a message of S bytes per rank on n
ranks taking t seconds:
  allreduce  algbw = S / t        busbw = algbw * 2(n-1)/n
  allgather  algbw = n*S / t      busbw = algbw * (n-1)/n   (n*S: the gathered output)
  broadcast  algbw = S / t        busbw = algbw
"""

import os
import platform
import statistics
import subprocess
import time

import cpu_state

REFERENCE = "mpi4py"
TORCH = "torch-gloo"
FUSED_REFERENCE = "mpi4py-1-buffer"


def horovod_peer(impl):
    """Horovod's implementation in the same mode as a tutti one (`--peers horovod`):
    tutti-mpi-* against horovod-mpi-torch, tutti-gloo-* against horovod-gloo-torch; a
    grouped call's row against Horovod's grouped call."""
    if not impl.startswith("tutti-"):
        return None
    grouped = "-grouped" if impl.endswith("-grouped") else ""
    return "horovod-%s-torch%s" % (impl.split("-")[1], grouped)


def moved_bytes(collective, size, n):
    return size * n if collective == "allgather" else size


def bus_factor(collective, n):
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective == "allgather":
        return (n - 1) / n
    return 1.0


def _ratio(reference, value):
    return reference / value if reference and value else None


def summarize(result):
    """Adds median_s, algbw_GBps, busbw_GBps and the ratios to every measurement."""
    n = result["np"]
    for row in result.get("sweep", []):
        row["median_s"] = statistics.median(row["samples_s"])
        algbw = moved_bytes(row["collective"], row["bytes"], n) / row["median_s"] / 1e9
        row["algbw_GBps"] = algbw
        row["busbw_GBps"] = algbw * bus_factor(row["collective"], n)
    medians = {(r["collective"], r["bytes"], r["impl"]): r["median_s"]
               for r in result.get("sweep", [])}
    for row in result.get("sweep", []):
        key = (row["collective"], row["bytes"])
        row["vs_mpi4py"] = _ratio(medians.get(key + (REFERENCE,)), row["median_s"])
        row["vs_torch_gloo"] = _ratio(medians.get(key + (TORCH,)), row["median_s"])
        peer = horovod_peer(row["impl"])
        row["vs_horovod"] = _ratio(medians.get(key + (peer,)), row["median_s"]) if peer else None
    fused = result.get("fused", [])
    for row in fused:
        row["median_s"] = statistics.median(row["samples_s"])
        row["algbw_GBps"] = row["bytes"] / row["median_s"] / 1e9
        row["busbw_GBps"] = row["algbw_GBps"] * bus_factor("allreduce", n)
    fused_medians = {r["impl"]: r["median_s"] for r in fused}
    reference = fused_medians.get(FUSED_REFERENCE)
    for row in fused:
        row["vs_mpi4py_1_buffer"] = _ratio(reference, row["median_s"])
        row["vs_horovod"] = _ratio(fused_medians.get(horovod_peer(row["impl"])),
                                   row["median_s"])
        submits = row.get("submit_samples_s")
        row["submit_median_s"] = statistics.median(submits) if submits else None
    latency = result.get("latency", [])
    for row in latency:
        row["median_s"] = statistics.median(row["samples_s"])
    latency_medians = {r["impl"]: r["median_s"] for r in latency}
    for row in latency:
        row["vs_mpi4py"] = _ratio(latency_medians.get(REFERENCE), row["median_s"])
        row["vs_horovod"] = _ratio(latency_medians.get(horovod_peer(row["impl"])),
                                   row["median_s"])
    result["targets"] = targets(result)
    return result


def _tutti(impls, mode_prefix):
    return [i for i in impls if i.startswith("tutti-%s-" % mode_prefix)]


def targets(result):
    """The issue's targets (docs/benchmarks.md), judged on this run's medians (those
    measured in this run; the Horovod ones only with --peers horovod)."""
    impls = result.get("impls", [])
    tutti = [i for i in impls if i.startswith("tutti-")]
    sweep = {(r["collective"], r["bytes"], r["impl"]): r for r in result.get("sweep", [])}
    found = []

    for impl in tutti:
        row = sweep.get(("allreduce", 16 << 20, impl))
        ratio = row and row["vs_mpi4py"]
        if ratio is None:
            continue  # not measured (e.g. 16 MiB not among --sizes)
        found.append({"target": "16 MiB allreduce >= 1.5x mpi4py", "impl": impl,
                      "value": ratio, "met": ratio >= 1.5, "shown": "%.2fx" % ratio})

    fused = {r["impl"]: r for r in result.get("fused", [])}
    # Judged both ways of submitting together: one call per tensor, and one grouped call.
    for impl in [i + way for i in tutti for way in ("", "-grouped")]:
        ratio = fused.get(impl, {}).get("vs_mpi4py_1_buffer")
        if ratio is None:
            continue
        found.append({"target": "100 x 40 KiB >= 0.9x mpi4py 1 x 4000 KiB", "impl": impl,
                      "value": ratio, "met": ratio >= 0.9, "shown": "%.2fx" % ratio})

    for impl in [i for i in tutti if i.endswith("-torch")]:
        row = sweep.get(("allreduce", 4, impl))
        if row is None:
            continue
        median = row["median_s"]
        found.append({"target": "back-to-back 4 B allreduce (tutti.torch) <= 10 us",
                      "impl": impl, "value": median, "met": median <= 10e-6,
                      "shown": format_time(median)})

    latency = {r["impl"]: r for r in result.get("latency", [])}
    for impl in tutti:
        ratio = latency.get(impl, {}).get("vs_mpi4py")
        if ratio is None:
            continue
        slower = 1.0 / ratio  # this latency / mpi4py's
        found.append({"target": "isolated 4 B allreduce <= 1.5x mpi4py's", "impl": impl,
                      "value": slower, "met": slower <= 1.5,
                      "shown": "%s = %.2fx mpi4py's %s" % (
                          format_time(latency[impl]["median_s"]), slower,
                          format_time(latency[REFERENCE]["median_s"]))})

    for reference, column, name in ((TORCH, "vs_torch_gloo", "torch-gloo"),
                                    (None, "vs_horovod", "Horovod (same mode)")):
        for impl in tutti:
            if reference is not None and not impl.startswith("tutti-gloo"):
                continue
            for collective in ("allreduce", "allgather", "broadcast"):
                rows = [r for (c, _, i), r in sorted(sweep.items())
                        if c == collective and i == impl and r.get(column) is not None]
                if not rows:
                    continue
                slower = [r for r in rows if r[column] < 1.0]
                worst = min(rows, key=lambda r: r[column])
                shown = "worst %.2fx at %s" % (worst[column], format_size(worst["bytes"]))
                if slower:
                    shown += "; slower at %d of %d sizes" % (len(slower), len(rows))
                found.append({"target": "%s >= %s at every size" % (collective, name),
                              "impl": impl, "value": worst[column], "met": not slower,
                              "shown": shown})
    return found


def _git(*args):
    """git's output in the source tree of this file; None outside a checkout."""
    source = os.path.dirname(os.path.realpath(__file__))
    try:
        done = subprocess.run(["git", "-C", source] + list(args), capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def document(runs, argv, started, load_before, cpu_states=(None, None)):
    status = _git("status", "--porcelain", "--", ":/common", ":/frameworks/torch")
    return {
        "benchmark": "tutti collectives side by side",
        "command": " ".join(argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(),
                 "python": platform.python_version(),
                 # The machine may be shared: its load says how quiet the run was.
                 "loadavg_1m_before": load_before, "loadavg_1m_after": os.getloadavg()[0],
                 # Its CPUs' state (cpu_state.py): large collectives depend on it.
                 "cpu_state_before": cpu_states[0], "cpu_state_after": cpu_states[1]},
        "git": {"commit": _git("rev-parse", "HEAD"),
                # Uncommitted changes to the core or the torch plugin make the figures
                # belong to no commit.
                "core_or_plugin_modified": None if status is None else bool(status)},
        "definitions": __doc__.strip(),
        "runs": runs,
    }


# ---- text ----

def format_size(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def format_time(seconds):
    if seconds >= 1.0:
        return "%.2f s" % seconds
    if seconds >= 1e-3:
        return "%.2f ms" % (seconds * 1e3)
    return "%.1f us" % (seconds * 1e6)


def _x(ratio):
    return "-" if ratio is None else "%.2fx" % ratio


def _share(row, key):
    """"k/n": k of the row's n timed collectives counted under `key` ("single_copy_calls":
    took the single copy; "streaming_calls": streamed into the segment); "" for other
    libraries and for runs before the count."""
    if key not in row:
        return ""
    n = row.get("collectives", len(row["samples_s"]) * row.get("calls_per_sample", 1))
    return "%d/%d" % (row[key], n)


def _table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                       for i, (c, w) in enumerate(zip(r, widths))) for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render(doc):
    host, git = doc["host"], doc["git"]
    out = ["%s; commit %s%s; %d CPUs, 1-minute load %.1f before, %.1f after"
           % (doc["command"], (git["commit"] or "unknown")[:12],
              " with uncommitted core/plugin changes" if git["core_or_plugin_modified"] else "",
              host["cpus"], host["loadavg_1m_before"], host["loadavg_1m_after"])]
    if "cpu_state_before" in host:
        out.append("CPU state (tools/bench/vcpu_probe) before: %s"
                   % cpu_state.describe(host["cpu_state_before"]))
        out.append("CPU state after: %s" % cpu_state.describe(host["cpu_state_after"]))
    out.append("")
    for run in doc["runs"]:
        n = run["np"]
        out.append("== %d ranks (one launch, %.0f s, %d tutti init() calls) =="
                   % (n, run["elapsed_s"], run["tutti_inits"]))
        versions = run.get("versions", {})
        if versions:
            out.append(", ".join("%s %s" % kv for kv in sorted(versions.items())))
        out.append("float32; allreduce is a sum. Ratios compare speed: the reference's "
                   "median time / this median time (above 1: faster than the reference).")
        if "mpi_single_copy" in run:
            out.append("Open MPI's single-copy transfer between local ranks (CMA): %s"
                       % ("on" if run["mpi_single_copy"] else
                          "off, this kernel forbids it (its large messages take two copies)"))
        sweep = run.get("sweep", [])
        # With --peers horovod every tutti row also shows its ratio to Horovod's row.
        peers = any(i.startswith("horovod-") for i in run["impls"])
        if peers:
            out.append("Horovod 0.28.1 ran in its own jobs (MPI: mpirun; Gloo: horovodrun "
                       "--gloo), taking turns with tutti's: %s"
                       % "; ".join(" ".join(c) for c in run.get("peer_commands", {}).values()))
        for collective in ("allreduce", "allgather", "broadcast"):
            rows = [r for r in sweep if r["collective"] == collective]
            if not rows:
                continue
            rows.sort(key=lambda r: (r["bytes"], run["impls"].index(r["impl"])))
            out.append("")
            out.append("%s, %d ranks" % (collective, n))
            # tutti's timed calls that took shared memory's single copy or streamed into
            # the segment (runs since they have counters): which algorithm the figure is of.
            counted = any("single_copy_calls" in r for r in rows)
            streamed = any("streaming_calls" in r for r in rows)
            table, last = [], None
            for r in rows:
                table.append([format_size(r["bytes"]) if r["bytes"] != last else "", r["impl"],
                              format_time(r["median_s"]), "%.3f" % r["algbw_GBps"],
                              "%.3f" % r["busbw_GBps"], _x(r["vs_mpi4py"]),
                              _x(r["vs_torch_gloo"])] + ([_x(r.get("vs_horovod"))]
                                                         if peers else [])
                             + ([_share(r, "single_copy_calls")] if counted else [])
                             + ([_share(r, "streaming_calls")] if streamed else []))
                last = r["bytes"]
            out.append(_table(["size", "impl", "median", "algbw GB/s", "busbw GB/s",
                               "vs mpi4py", "vs torch-gloo"]
                              + (["vs horovod"] if peers else [])
                              + (["single copy"] if counted else [])
                              + (["streamed"] if streamed else []), table))
        fused = run.get("fused", [])
        if fused:
            out.append("")
            out.append("100 x 40 KiB allreduce submitted at once, then all awaited, %d ranks "
                       "(reference: mpi4py, one %s buffer)" % (n, format_size(fused[0]["bytes"])))
            # tutti's allreduces in the timed calls (a call of 100 separate requests may
            # take several) and how many of them took the single copy.
            counted = any("single_copy_calls" in r for r in fused)
            streamed = any("streaming_calls" in r for r in fused)
            out.append(_table(["what", "median", "of which submitting", "algbw GB/s",
                               "busbw GB/s", "vs reference"] + (["vs horovod"] if peers else [])
                              + (["single copy"] if counted else [])
                              + (["streamed"] if streamed else []),
                              [[r["label"], format_time(r["median_s"]),
                                format_time(r["submit_median_s"])
                                if r.get("submit_median_s") is not None else "",
                                "%.3f" % r["algbw_GBps"], "%.3f" % r["busbw_GBps"],
                                _x(r["vs_mpi4py_1_buffer"])]
                               + ([_x(r.get("vs_horovod"))] if peers else [])
                               + ([_share(r, "single_copy_calls")] if counted else [])
                               + ([_share(r, "streaming_calls")] if streamed
                                  else [])
                               for r in fused]))
        latency = run.get("latency", [])
        if latency:
            out.append("")
            out.append("isolated 4 B allreduce, %d ranks (%.0f ms idle before each call; "
                       "%d calls)" % (n, latency[0]["idle_s"] * 1e3,
                                      len(latency[0]["samples_s"])))
            out.append(_table(["impl", "median", "min", "p90", "vs mpi4py"]
                              + (["vs horovod"] if peers else []),
                              [[r["impl"], format_time(r["median_s"]),
                                format_time(min(r["samples_s"])),
                                format_time(_percentile(r["samples_s"], 0.9)),
                                _x(r.get("vs_mpi4py"))]
                               + ([_x(r.get("vs_horovod"))] if peers else [])
                               for r in latency]))
        if run["targets"]:
            out.append("")
            out.append("targets, %d ranks (from the medians above)" % n)
            out.append(_table(["target", "impl", "measured", "met"],
                              [[t["target"], t["impl"], t["shown"],
                                "yes" if t["met"] else "NO"]
                               for t in run["targets"]]))
        out.append("")
    if doc.get("failed"):
        out.append(doc["failed"])
    return "\n".join(out)


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
