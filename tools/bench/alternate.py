"""An A/B of one environment setting across launches of the collectives benchmark, with the
state of the CPUs during each launch.

The VMs measured switch, for seconds at a time, between running their two vCPUs on cores
that share a cache and on cores that do not (docs/benchmarks.md, runs AB and AC); a launch
can fall into either state, so one launch per setting says little. This runs the benchmark
again and again, the setting's values taking turns, while vcpu_probe (vcpu_probe.cc) samples
the round trip between two processes alongside. Each launch is reported with its share of
"apart" samples (a round trip above --apart-us) and tutti's ratios to mpi4py; the summary
gives, per value and size, the median and the worst ratio over all launches and over the
launches that were mostly apart. For example:

    python3 tools/bench/alternate.py --env TUTTI_SHM_STREAMING_STORES --values off,auto \\
        --launches 24 -- tools/bench/run --no-build --np 2 --sizes 1M,4M,16M \\
        --collectives allreduce --no-latency --no-fused --impls tutti-mpi-np,tutti-gloo-np

Everything after "--" is the benchmark's command; each launch appends --json FILE to it.
The launches' JSON files (launch_1.json, ...) and the probe's trace stay in --keep DIR.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_state  # noqa: E402
from report import format_size  # noqa: E402

PROBE_INTERVAL_MS = 100


def read_trace(path):
    """(seconds since the probe started, round trip us) of every complete trace line."""
    samples = []
    with open(path) as trace:
        for line in trace:
            fields = line.split()
            if line.startswith("#") or len(fields) < 4:
                continue
            try:
                samples.append((float(fields[0]), float(fields[1])))
            except ValueError:
                continue
    return samples


def tutti_ratios(doc, collective):
    """{bytes: [vs_mpi4py of every tutti row]} of the launch's first run."""
    ratios = {}
    for row in doc["runs"][0].get("sweep", []):
        if (row["collective"] == collective and row["impl"].startswith("tutti-")
                and row.get("vs_mpi4py") is not None):
            ratios.setdefault(row["bytes"], []).append(row["vs_mpi4py"])
    return ratios


def summarize(launches, values, mostly):
    """The summary lines: per value and size, median and worst ratio over all launches and
    over those with at least `mostly` of their samples apart."""
    lines = []
    sizes = sorted({size for launch in launches for size in launch["ratios"]})
    for value in values:
        mine = [launch for launch in launches if launch["value"] == value]
        groups = (("all", mine), ("apart", [l for l in mine if l["apart_share"] >= mostly]))
        for size in sizes:
            line = "%-6s %7s" % (value, format_size(size))
            for label, group in groups:
                ratios = [r for launch in group for r in launch["ratios"].get(size, [])]
                if ratios:
                    line += "  %s launches (%d): median %.2fx, worst %.2fx" % (
                        label, len(group), statistics.median(ratios), min(ratios))
                else:
                    line += "  %s launches: none" % label
            lines.append(line)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="the environment variable to alternate")
    parser.add_argument("--values", required=True,
                        help="its values, comma-separated; launch i takes value i mod count")
    parser.add_argument("--launches", type=int, default=12)
    parser.add_argument("--collective", default="allreduce",
                        help="whose ratios to report (default allreduce)")
    parser.add_argument("--apart-us", type=float, default=0.2,
                        help="round trips above this count as apart (default 0.2 us; the VMs "
                             "measured show 0.06-0.10 us sharing a cache, 0.3 us apart)")
    parser.add_argument("--mostly", type=float, default=0.2,
                        help="a launch with at least this share of apart samples counts as "
                             "apart in the summary (default 0.2)")
    parser.add_argument("--keep", default=None,
                        help="where the launches' JSON files and the probe's trace go "
                             "(default: a new temporary directory)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the benchmark's command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    values = [v for v in args.values.split(",") if v]
    if not command or not values or args.launches < 1:
        parser.error("need --values, --launches >= 1 and a benchmark command after --")
    probe = cpu_state.probe_path()
    if probe is None:
        parser.error("vcpu_probe is not built (bazel build //tools/bench:vcpu_probe)")

    workdir = args.keep or tempfile.mkdtemp(prefix="tutti-alternate-")
    os.makedirs(workdir, exist_ok=True)
    trace_path = os.path.join(workdir, "probe.trace")
    budget_s = 3600 * 24
    with open(trace_path, "w") as trace:
        prober = subprocess.Popen([probe, "--seconds", str(budget_s), "--interval-ms",
                                   str(PROBE_INTERVAL_MS), "--trace"], stdout=trace)
    started = time.monotonic()
    launches = []
    try:
        for index in range(args.launches):
            value = values[index % len(values)]
            out = os.path.join(workdir, "launch_%d.json" % (index + 1))
            env = dict(os.environ, **{args.env: value})
            begin = time.monotonic() - started
            done = subprocess.run(command + ["--json", out], env=env, capture_output=True,
                                  text=True)
            end = time.monotonic() - started
            if done.returncode != 0:
                sys.stderr.write(done.stdout + done.stderr)
                raise SystemExit("alternate: launch %d (%s=%s) failed with exit code %d"
                                 % (index + 1, args.env, value, done.returncode))
            with open(out) as f:
                doc = json.load(f)
            launches.append({"value": value, "begin": begin, "end": end,
                             "ratios": tutti_ratios(doc, args.collective),
                             "commit": (doc.get("git", {}).get("commit") or "unknown")[:12]})
    finally:
        prober.terminate()
        prober.wait()

    samples = read_trace(trace_path)
    for launch in launches:
        window = [rt for t, rt in samples if launch["begin"] <= t <= launch["end"]]
        launch["samples"] = len(window)
        launch["apart"] = sum(1 for rt in window if rt > args.apart_us)
        launch["apart_share"] = launch["apart"] / len(window) if window else 0.0

    print("%s alternated over %d launches of: %s" % (args.env, len(launches), " ".join(command)))
    print("commit %s; apart: probe round trip above %.2f us (vcpu_probe every %d ms); "
          "outputs in %s" % (launches[0]["commit"], args.apart_us, PROBE_INTERVAL_MS, workdir))
    print("tutti's %s vs mpi4py per launch (every tutti row, by size)" % args.collective)
    for number, launch in enumerate(launches, 1):
        cells = "  ".join("%s %s" % (format_size(size), " ".join("%.2fx" % r for r in ratios))
                          for size, ratios in sorted(launch["ratios"].items()))
        print("%3d %-6s apart %3d/%-3d  %s" % (number, launch["value"], launch["apart"],
                                                launch["samples"], cells))
    print("summary (launches counted as apart: at least %.0f%% of their samples)"
          % (100 * args.mostly))
    for line in summarize(launches, values, args.mostly):
        print(line)


if __name__ == "__main__":
    main()
