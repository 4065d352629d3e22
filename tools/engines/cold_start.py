"""Cold start to the first collective under tuttirun, Ray (tutti.ray) and Spark (tutti.spark).

    bazel run //tools/engines:cold_start -- --repeat 3

Each measurement starts a fresh Python process (nothing imported or running before), then
times, from the moment that process is spawned: the engine coming up (ray.init with a
local cluster / a local[2] SparkSession; tuttirun has none), and the end of the first
2-rank allreduce on every rank (the later rank counts). Prints a Markdown table of the
medians; --json FILE keeps every run. Ray and Spark listen on 127.0.0.1 only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ENGINES = ("tuttirun", "ray", "spark")
_MARK = "COLD-START "


def first_allreduce(_=None):
    """Every rank: init, one allreduce; returns time.time() after it."""
    import numpy

    import tutti.numpy as hvd

    hvd.init()
    hvd.allreduce(numpy.ones(1), name="first")
    done = time.time()
    hvd.shutdown()
    return done


def _report(**phases):
    print(_MARK + json.dumps(phases), flush=True)


def _one_ray():
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled",
                      RAY_USAGE_STATS_ENABLED="0", RAY_worker_niceness="0")
    import ray

    from tutti.ray import RayExecutor

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 1024 * 1024, _node_ip_address="127.0.0.1")
    engine_up = time.time()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=120), num_workers=2)
    executor.start()
    done = executor.run(first_allreduce)
    executor.shutdown()
    ray.shutdown()
    _report(engine_up=engine_up, first_collective=max(done))


def _one_spark():
    os.environ.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    from pyspark.sql import SparkSession

    import tutti.spark

    session = (SparkSession.builder.master("local[2]")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").getOrCreate())
    engine_up = time.time()
    done = tutti.spark.run(first_allreduce, num_proc=2)
    session.stop()
    _report(engine_up=engine_up, first_collective=max(done))


def _one_rank():
    _report(first_collective=first_allreduce())


def measure(engine, env):
    """{phase: seconds since the spawn} for one cold start of `engine`."""
    here = os.path.abspath(__file__)
    if engine == "tuttirun":
        argv = [sys.executable, "-m", "tutti.runner", "-np", "2", sys.executable, here,
                "--rank"]
    else:
        argv = [sys.executable, here, "--one", engine]
    spawned = time.time()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s" % (engine, result.returncode,
                                                         result.stderr[-3000:]))
    phases = {}
    for line in result.stdout.splitlines():
        if _MARK in line:  # tuttirun prefixes each rank's lines with its rank
            for name, value in json.loads(line.split(_MARK, 1)[1]).items():
                phases[name] = max(phases.get(name, 0.0), value - spawned)
    return phases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="cold starts per engine")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    parser.add_argument("--json", help="write every run here")
    parser.add_argument("--one", choices=("ray", "spark"), help=argparse.SUPPRESS)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        return _one_rank()
    if args.one:
        return {"ray": _one_ray, "spark": _one_spark}[args.one]()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    runs = {}
    engines = [name for name in args.engines.split(",") if name]
    for _ in range(args.repeat):  # interleaved, so that a noisy minute hits every engine
        for engine in engines:
            runs.setdefault(engine, []).append(measure(engine, env))
    print("| engine | engine up (s) | first collective done (s) | runs |")
    print("|---|---|---|---|")
    for engine in engines:
        ups = [run["engine_up"] for run in runs[engine] if "engine_up" in run]
        firsts = [run["first_collective"] for run in runs[engine]]
        print("| %s | %s | %.1f (%s) | %d |" % (
            engine, "%.1f" % statistics.median(ups) if ups else "-",
            statistics.median(firsts), ", ".join("%.1f" % value for value in firsts),
            len(firsts)))
    print("load average at the end: %.1f %.1f %.1f (%d cores)"
          % (os.getloadavg() + (os.cpu_count(),)))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(runs, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
