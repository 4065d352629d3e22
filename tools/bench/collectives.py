"""Side-by-side collective benchmark: tutti (MPI and Gloo modes, through tutti.numpy and
tutti.torch), raw MPI (mpi4py) and torch.distributed (Gloo), measured in one launch per rank
count on the same buffers. See docs/benchmarks.md.

    tools/bench/run [--np 2,4] [--quick] [--sizes 4,64K,16M] [--json FILE] [--plot FILE]
                    [--peers horovod]

Starts `mpirun -np N python worker.py` for each rank count, then prints the table, writes
the JSON and draws the PNG. With --peers horovod, Horovod 0.28.1's jobs (over MPI and over
Gloo, from the environment tools/bench/horovod-env builds) run beside it and take turns
with it (peers.py).
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cpu_state  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402
import sessions  # noqa: E402  (imports nothing of tutti at module level)
import single_copy  # noqa: E402

COLLECTIVES = ("allreduce", "allgather", "broadcast")
FULL_SIZES = [4 ** k for k in range(1, 14)]  # 4 B ... 64 MiB
QUICK_SIZES = [4, 4096, 262144, 16 << 20]
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError("%r is not a size (e.g. 4, 64K, 16M)" % text)
    value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value <= 0 or value % 4:
        raise argparse.ArgumentTypeError(
            "size %s must be a positive multiple of 4 bytes (float32 elements)" % text)
    return value


def comma_list(convert):
    def parse(text):
        return [convert(item) for item in text.split(",") if item.strip()]
    return parse


def collective_name(text):
    text = text.strip()
    if text not in COLLECTIVES:
        raise argparse.ArgumentTypeError("unknown collective %r; choose from %s"
                                          % (text, ", ".join(COLLECTIVES)))
    return text


def shm_choice(text):
    text = text.strip()
    if text not in sessions.SHM_CHOICES:
        raise argparse.ArgumentTypeError("unknown --shm setting %r; choose from %s"
                                          % (text, ", ".join(sessions.SHM_CHOICES)))
    return text


def rank_count(text):
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("--np needs at least 2 ranks, got %s" % text)
    return value


def implementation_names(shm):
    """The names worker.py gives its implementations."""
    names = ["mpi4py", "torch-gloo"]
    for mode in sessions.modes(shm):
        names += ["tutti-%s-np" % mode.name, "tutti-%s-torch" % mode.name]
    return names


HOROVOD_CONTROLLERS = ("mpi", "gloo")


def peer_name(text):
    text = text.strip()
    if text not in peers.PEERS:
        raise argparse.ArgumentTypeError("unknown peer %r; choose from %s"
                                          % (text, ", ".join(peers.PEERS)))
    return text


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="tools/bench/run", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--np", type=comma_list(rank_count), default=None,
                        help="rank counts, one launch each (default: 2,4; --quick: 2)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer sizes and samples: about a minute on 2 ranks")
    parser.add_argument("--sizes", type=comma_list(parse_size), default=None,
                        help="message sizes per rank, e.g. 4,64K,16M (default: 4 B to 64 MiB "
                             "in powers of 4; --quick: 4,4K,256K,16M)")
    parser.add_argument("--collectives", type=comma_list(collective_name),
                        default=list(COLLECTIVES),
                        help="default: all of %s" % ", ".join(COLLECTIVES))
    parser.add_argument("--impls", type=comma_list(str.strip), default=[],
                        help="only these implementations (names or prefixes such as "
                             "tutti-gloo); the mpi4py reference always runs")
    parser.add_argument("--shm", type=comma_list(shm_choice), default=["default"],
                        help="tutti's shared-memory settings to run, from: default (TUTTI_SHM "
                             "as in the environment; unset means the core's auto), on "
                             "(modes mpi-shm, gloo-shm), off (mpi-noshm, gloo-noshm); "
                             "e.g. --shm default,off")
    parser.add_argument("--samples", type=int, default=None,
                        help="timed samples per cell, fewer for slow cells "
                             "(default 15; --quick: 5)")
    parser.add_argument("--no-fused", action="store_true",
                        help="skip the 100 x 40 KiB submitted-at-once test")
    parser.add_argument("--no-latency", action="store_true",
                        help="skip the isolated 4-byte allreduce test")
    parser.add_argument("--no-mpi-yield", dest="mpi_yield", action="store_false",
                        help="let Open MPI poll without yielding the CPU (its default when "
                             "not oversubscribed); the benchmark sets mpi_yield_when_idle=1, "
                             "which keeps MPI figures steady on a busy machine")
    parser.add_argument("--mpirun-args", default="",
                        help="extra mpirun arguments, e.g. \"--mca btl self,vader\"")
    parser.add_argument("--peers", type=comma_list(peer_name), default=[],
                        help="also run these libraries' jobs in the same launch, taking "
                             "turns with tutti's: horovod (Horovod 0.28.1 over MPI and over "
                             "Gloo, from the environment tools/bench/horovod-env builds; "
                             "TUTTI_HOROVOD_VENV overrides its path)")
    parser.add_argument("--json", default=None,
                        help="where to write the results (default: build/bench/collectives.json)")
    parser.add_argument("--plot", default=None,
                        help="where to draw the PNG (default: the JSON path with .png)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds one launch may take before it is killed "
                             "(default 1200; --quick: 300)")
    args = parser.parse_args(argv)
    for option in ("np", "sizes", "collectives", "shm"):
        if getattr(args, option) == []:
            parser.error("--%s needs at least one value" % option)
    known = implementation_names(args.shm)
    for wanted in args.impls:
        if not any(name == wanted or name.startswith(wanted + "-") for name in known):
            parser.error("--impls: no implementation is called %r or starts with %r; known: %s"
                         % (wanted, wanted + "-", ", ".join(known)))
    if args.impls and "mpi4py" not in args.impls:
        args.impls.append("mpi4py")
    args.peers = list(dict.fromkeys(args.peers))
    if args.np is None:
        args.np = [2] if args.quick else [2, 4]
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.samples is None:
        args.samples = 5 if args.quick else 15
    args.shm = list(dict.fromkeys(args.shm))  # each setting once, in the order given
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    if args.timeout is None:
        args.timeout = 300 if args.quick else 1200
    default_dir = os.environ.get("TUTTI_BENCH_DIR", os.path.join("build", "bench"))
    if args.json is None:
        args.json = os.path.join(default_dir, "collectives.json")
    if args.plot is None:
        args.plot = os.path.splitext(args.json)[0] + ".png"
    return args


def worker_config(args, workdir):
    quick = args.quick
    return {
        "sizes": sorted(set(args.sizes)),
        "collectives": args.collectives,
        "impls": args.impls,
        "shm": args.shm,
        "samples": args.samples,
        # Back-to-back calls per sample: enough to fill this long (the timer and barrier
        # cost nothing next to it), at most max_calls.
        "target_s": 0.001 if quick else 0.004,
        "max_calls": 200,
        # Slow cells (large messages) stop after about this long, with at least
        # min_samples samples.
        "cell_budget_s": 0.3 if quick else 1.0,
        "min_samples": min(args.samples, 5),
        "fused_count": 0 if args.no_fused else 100,
        "fused_bytes": 40 * 1024,
        "fused_samples": 6 if quick else 60,
        # Every test cycles through the implementations this many times (per size in the
        # sweep), each turn taking its share of the samples.
        "rounds": 2 if quick else 3,
        # The 100-tensor and latency tests, whose turns are short (milliseconds of samples
        # against slow and fast spells of the VM lasting tenths of a second to seconds),
        # cycle more often, so that every implementation meets about the same mix.
        "test_rounds": 2 if quick else 6,
        "latency_samples": 0 if args.no_latency else (20 if quick else 90),
        "latency_idle_s": 0.01,
        "torch_store": os.path.join(workdir, "torch-store"),
        "result": os.path.join(workdir, "result.json"),
    }


def mpirun_command(np, args, worker, config_path, python=None, extra=()):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("bench: mpirun not found on PATH (install openmpi-bin, or run "
                         "tools/setup)")
    command = [mpirun, "-np", str(np), "--oversubscribe", "--allow-run-as-root",
               "--bind-to", "none"]
    if not args.single_copy:
        # This kernel forbids the cross-memory attach (CMA) Open MPI would try first
        # (single_copy.py); where it is permitted, raw MPI keeps its single-copy path.
        command += ["--mca", "btl_vader_single_copy_mechanism", "none"]
    if args.mpi_yield:
        # A polling rank that never yields loses whole scheduler slices to any other
        # process on its core; mpi4py and tutti's MPI mode get the same setting.
        command += ["--mca", "mpi_yield_when_idle", "1"]
    return (command + shlex.split(args.mpirun_args)
            + [python or sys.executable, worker, config_path] + list(extra))


class LaunchFailed(Exception):
    pass


def turn_count(config):
    """How many turns every job of a launch takes (worker.py: one per size and round of the
    sweep, one per round of each other test)."""
    return (config["rounds"] * len(config["sizes"])
            + config["test_rounds"] * (bool(config["fused_count"])
                                       + bool(config["latency_samples"])))


def launch(np, args):
    """Runs one launch on `np` ranks; returns rank 0's results (with the peers' rows)."""
    with tempfile.TemporaryDirectory(prefix="tutti-bench-") as workdir:
        config = worker_config(args, workdir)
        if args.peers:
            config["peers_dir"] = workdir
        config_path = os.path.join(workdir, "config.json")
        with open(config_path, "w") as stream:
            json.dump(config, stream)
        command = mpirun_command(np, args, os.path.join(HERE, "worker.py"), config_path)
        env = dict(os.environ)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        peer_env = peers.clean_env(env)
        # The ranks import the same tutti, torch and mpi4py as this process.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        jobs = [("tutti", command, env, False)]
        if "horovod" in args.peers:
            worker = os.path.join(HERE, "horovod_worker.py")
            jobs.append(("horovod-mpi", mpirun_command(np, args, worker, config_path,
                                                      args.horovod_python, ["mpi"]),
                         peer_env, True))
            jobs.append(("horovod-gloo", peers.horovodrun_command(
                np, args.horovod_python, [worker, config_path, "gloo"]), peer_env, True))
        procs, started = [], []
        deadline = time.monotonic() + args.timeout
        try:
            for name, job_command, job_env, frozen in jobs:
                print("bench: %s: %s" % (name, " ".join(job_command)), file=sys.stderr,
                      flush=True)
                proc = subprocess.Popen(job_command, env=job_env, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
                procs.append(proc)
                started.append(peers.Job(name, np, proc, frozen))
            if args.peers:
                peers.Coordinator(workdir, started, turn_count(config), deadline).run()
            for job in started:
                code = job.procs[0].wait(timeout=max(1.0, deadline - time.monotonic()))
                if code != 0:
                    raise LaunchFailed("bench: the %d-rank launch failed (%s exited with "
                                       "code %d); see the ranks' output above"
                                       % (np, job.name, code))
        except subprocess.TimeoutExpired:
            peers.stop_all(procs)
            raise LaunchFailed("bench: the %d-rank launch did not finish within %.0f s "
                             "(raise --timeout, or look for a hung collective above)"
                             % (np, args.timeout))
        except peers.JobFailed as exc:
            peers.stop_all(procs)
            raise LaunchFailed("bench: the %d-rank launch failed: %s; see the ranks' output "
                               "above" % (np, exc))
        except BaseException:
            peers.stop_all(procs)
            raise
        with open(config["result"]) as stream:
            result = json.load(stream)
        for name, job_command, _, _ in jobs[1:]:
            merge_peer(result, config["result"] + "." + name)
        result["config"] = {k: v for k, v in config.items()
                            if k not in ("torch_store", "result", "peers_dir")}
        result["command"] = command[:-1] + ["CONFIG.json"]
        result["mpi_single_copy"] = args.single_copy
        if args.peers:
            result["peer_commands"] = {name: [a if a != config_path else "CONFIG.json"
                                              for a in job_command]
                                       for name, job_command, _, _ in jobs[1:]}
        return result


def merge_peer(result, path):
    """Adds a peer job's rows to the tutti job's result (ratios are then taken against the
    tutti job's mpi4py and torch-gloo rows of the same launch)."""
    with open(path) as stream:
        peer = json.load(stream)
    result["impls"] += peer["impls"]
    result.setdefault("versions", {}).update(peer.get("versions", {}))
    for key in ("sweep", "fused", "latency"):
        if key in peer:
            result.setdefault(key, []).extend(peer[key])


def check_imports():
    """Fails early, with the fix, when the ranks could not import what they need."""
    import importlib.util

    missing = []
    for module in ("mpi4py", "numpy", "torch", "tutti.numpy", "tutti.torch", "tutti.runner"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(module)
    if missing:
        raise SystemExit("bench: cannot import %s; run tools/bench/run (it builds tutti with "
                         "Bazel), or install tutti-core and tutti-torch into this Python"
                         % ", ".join(missing))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    check_imports()
    args.horovod_python = None
    args.single_copy = single_copy.permitted()
    if "horovod" in args.peers:
        try:
            args.horovod_python = peers.horovod_python()
        except peers.PeerSetupError as exc:
            print("bench: %s" % exc, file=sys.stderr)
            return 2
    started, load_before = time.time(), os.getloadavg()[0]
    state_before = cpu_state.measure()
    runs, failure = [], None
    for np in args.np:
        try:
            runs.append(report.summarize(launch(np, args)))
        except LaunchFailed as exc:
            failure = str(exc)  # keep what the earlier launches measured
            break
    # tools/bench/run names itself, so the recorded command is the one a person typed.
    shown = [os.environ.get("TUTTI_BENCH_LAUNCHER", "tools/bench/collectives.py")]
    shown += sys.argv[1:] if argv is None else list(argv)
    document = report.document(runs, shown, started, load_before,
                               (state_before, cpu_state.measure()))
    if failure:
        document["failed"] = failure
    print(report.render(document))
    directory = os.path.dirname(os.path.abspath(args.json))
    os.makedirs(directory, exist_ok=True)
    with open(args.json, "w") as stream:
        json.dump(document, stream, indent=1)
    print("bench: wrote %s" % args.json)
    if failure:
        print(failure, file=sys.stderr)
        return 1
    if not runs:
        return 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench: no plot drawn: matplotlib is not installed (pip install matplotlib, "
              "or rerun tools/setup)")
        return 0
    import plot
    os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
    plot.draw(document, args.plot)
    print("bench: drew %s" % args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
