"""How long an elastic job takes to recover, measured on this machine, per framework.

Runs the training script of tests/elastic/workers (torch_train.py, keras_train.py,
tf_train.py or mxnet_train.py) under tuttirun's elastic mode on simulated hosts (loopback addresses) and
reports, per run, from the workers' own timestamps:
  kill:  a worker SIGKILLs itself mid-epoch (3 -> 2 workers) -> survivors re-formed (reset
         callback) -> first step of the new generation;
  grow:  a host appears in the discovery output (2 -> 3 workers) -> every worker re-formed
         at the next commit -> first step at the new size.
It prints the machine's load average before and after, since on a shared machine the
numbers follow the load.
Usage: bazel run //tools/bench:elastic_recovery -- --framework keras [--runs N]
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
WORKERS = os.path.join(HERE, "..", "..", "tests", "elastic", "workers")
# The script of each framework, and how long it pauses after each step while a host is
# added: long enough that the job is still training when the new worker, which first
# imports its framework, is ready.
FRAMEWORKS = {
    "torch": ("torch_train.py", 0.05),
    "keras": ("keras_train.py", 1.0),
    "tensorflow": ("tf_train.py", 1.0),
    "mxnet": ("mxnet_train.py", 0.5),
}
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


def tuttirun(script, worker, extra):
    return subprocess.Popen([sys.executable, "-m", "tutti.runner", "--host-discovery-script",
                             script, "--min-np", "2", sys.executable, worker] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def measure_kill(directory, framework):
    script = discovery(directory, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    worker = os.path.join(WORKERS, FRAMEWORKS[framework][0])
    proc = tuttirun(script, worker, ["--crash-host", "127.0.0.4", "--epochs", "2"])
    out, _ = proc.communicate(timeout=600)
    found = events(out.splitlines())
    crash = [e["t"] for e in found if e["event"] == "crash"][0]
    reset = max(e["t"] for e in found if e["event"] == "reset")
    step = min(e["t"] for e in found if e["event"] == "step" and e["gen"] == 1)
    return reset - crash, step - crash


def measure_grow(directory, framework):
    script = discovery(directory, ["127.0.0.2:1", "127.0.0.3:1"])
    name, step_seconds = FRAMEWORKS[framework]
    proc = tuttirun(script, os.path.join(WORKERS, name),
                    ["--step-seconds", str(step_seconds), "--epochs", "2"])
    lines = []
    added = None
    for line in proc.stdout:
        lines.append(line)
        if added is None and '"event": "step"' in line:
            discovery(directory, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.5:1"])
            added = time.time()
    proc.communicate(timeout=600)
    found = events(lines)
    reset = max(e["t"] for e in found if e["event"] == "reset" and e["size"] == 3)
    step = min(e["t"] for e in found if e["event"] == "step" and e["size"] == 3)
    return reset - added, step - added


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS), default="torch")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("%s, load average %.2f %.2f %.2f" % ((args.framework,) + os.getloadavg()), flush=True)
    for name, measure in (("kill", measure_kill), ("grow", measure_grow)):
        resets, steps = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as directory:
                reset, step = measure(directory, args.framework)
            resets.append(reset)
            steps.append(step)
            print("%s: re-formed after %.2f s, training after %.2f s" % (name, reset, step),
                  flush=True)
        print("%s median: re-formed %.2f s, training %.2f s (%d runs)" % (
            name, statistics.median(resets), statistics.median(steps), args.runs), flush=True)
    print("load average %.2f %.2f %.2f" % os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
