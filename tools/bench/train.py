"""Runs the synthetic training benchmark of tutti.torch or tutti.mxnet on N ranks with tutti
as built here (docs/benchmarks.md):

    tools/bench/train torch [--np 2] [--gloo] -- --model cnn --num-iters 20 --peers horovod
    tools/bench/train mxnet -- --model cnn --peers horovod

Starts `mpirun -np N --bind-to none python EXAMPLE ARGS` (--gloo: `tuttirun -np N`) with
the ranks importing tutti from this build. The example is run from the source tree, so that
--peers horovod finds tools/bench/peers.py.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys

EXAMPLES = {"torch": "frameworks/torch/examples/pytorch_synthetic_benchmark.py",
            "mxnet": "frameworks/mxnet/examples/mxnet_synthetic_benchmark.py"}


def main():
    parser = argparse.ArgumentParser(prog="tools/bench/train",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(EXAMPLES))
    parser.add_argument("--np", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--gloo", action="store_true",
                        help="launch with tuttirun (tutti's Gloo controller) instead of mpirun")
    parser.add_argument("--mpirun-args", default="",
                        help="extra mpirun arguments, e.g. \"--mca mpi_yield_when_idle 1\" "
                             "(Horovod's MPI job gets the same MCA settings)")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the benchmark's own arguments, after --")
    args = parser.parse_args()
    extra = args.args[1:] if args.args[:1] == ["--"] else args.args
    root = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.getcwd()
    example = os.path.join(root, EXAMPLES[args.framework])
    if not os.path.exists(example):
        raise SystemExit("train: %s not found; run from tutti's source tree" % example)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if args.gloo:
        command = [sys.executable, "-m", "tutti.runner", "-np", str(args.np)]
    else:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            raise SystemExit("train: mpirun not found on PATH (apt-get install openmpi-bin)")
        command = [mpirun, "-np", str(args.np), "--bind-to", "none", "--oversubscribe"]
        command += shlex.split(args.mpirun_args)
    command += [sys.executable, example] + extra
    print("train: %s" % " ".join(command), file=sys.stderr, flush=True)
    return subprocess.call(command, env=env, stdin=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main())
