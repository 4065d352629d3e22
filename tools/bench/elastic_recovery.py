"""How long an elastic torch job takes to recover, measured on this machine.

Runs tests/elastic/workers/torch_train.py under tuttirun's elastic mode on simulated hosts
(loopback addresses) and reports, per run, from the worker's own timestamps:
  kill:  a worker SIGKILLs itself mid-epoch -> survivors re-formed (reset callback) ->
         first step of the new generation;
  grow:  a host appears in the discovery output -> every worker re-formed at the next
         commit -> first step at the new size.
Usage: python tools/bench/elastic_recovery.py [--runs N]   (needs tutti and tutti.torch
importable, e.g. PYTHONPATH set to a Bazel runfiles tree of //tests/elastic:torch_elastic_test)
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "..", "tests", "elastic", "workers", "torch_train.py")
EVENT = re.compile(r"^\[(\d+)\]<stdout>: (\{.*\})$")


def discovery(directory, hosts):
    path = os.path.join(directory, "hosts.txt")
    with open(path + ".new", "w") as handle:
        handle.write("\n".join(hosts) + "\n")
    os.replace(path + ".new", path)
    script = os.path.join(directory, "discover.sh")
    with open(script, "w") as handle:
        handle.write("#!/bin/sh\ncat %s\n" % path)
    os.chmod(script, 0o755)
    return script


def events(lines):
    found = []
    for line in lines:
        match = EVENT.match(line)
        if match:
            found.append(json.loads(match.group(2)))
    return found


def tuttirun(script, extra):
    return subprocess.Popen([sys.executable, "-m", "tutti.runner", "--host-discovery-script",
                             script, "--min-np", "2", sys.executable, WORKER] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def measure_kill(directory):
    script = discovery(directory, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    proc = tuttirun(script, ["--crash-host", "127.0.0.4", "--epochs", "2"])
    out, err = proc.communicate(timeout=300)
    found = events(out.splitlines())
    crash = [e["t"] for e in found if e["event"] == "crash"][0]
    reset = max(e["t"] for e in found if e["event"] == "reset")
    step = min(e["t"] for e in found if e["event"] == "step" and e["gen"] == 1)
    return reset - crash, step - crash


def measure_grow(directory):
    script = discovery(directory, ["127.0.0.2:1", "127.0.0.3:1"])
    proc = tuttirun(script, ["--step-seconds", "0.05", "--epochs", "2"])
    lines = []
    added = None
    for line in proc.stdout:
        lines.append(line)
        if added is None and '"event": "step"' in line:
            discovery(directory, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.5:1"])
            added = time.time()
    proc.communicate(timeout=300)
    found = events(lines)
    reset = max(e["t"] for e in found if e["event"] == "reset" and e["size"] == 3)
    step = min(e["t"] for e in found if e["event"] == "step" and e["size"] == 3)
    return reset - added, step - added


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name, measure in (("kill", measure_kill), ("grow", measure_grow)):
        resets, steps = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as directory:
                reset, step = measure(directory)
            resets.append(reset)
            steps.append(step)
            print("%s: re-formed after %.2f s, training after %.2f s" % (name, reset, step),
                  flush=True)
        print("%s median: re-formed %.2f s, training %.2f s (%d runs)" % (
            name, statistics.median(resets), statistics.median(steps), args.runs), flush=True)


if __name__ == "__main__":
    main()
