"""Per-rank output for MPI jobs: `mpirun ... PYTHON -m tutti.runner.rank_output CMD`.

mpirun mixes the output of all ranks. This wrapper runs CMD, prefixes each of its lines
with the MPI rank exactly as tuttirun does in Gloo mode (`[1]<stdout>: text`), writes
OUTPUT_DIR/rank.<r>/{stdout,stderr} when --output-filename is given, passes SIGTERM,
SIGINT and SIGHUP on to CMD and exits with CMD's exit code.

The wrapper leads its own process group and CMD stays in it, so that mpirun's daemon,
which signals a rank's whole group when it aborts a job, reaches CMD and its children even
if the wrapper itself is killed first. When CMD exits, whatever it left behind in the
group is stopped too (its children would otherwise hold the output pipes open).
"""

import argparse
import os
import signal
import subprocess
import sys

from . import sessions
from .output import OutputSink

_GRACE_SECONDS = 3.0

# Rank variables of Open MPI, MPICH/Hydra (and Intel MPI), and PMIx launchers.
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def mpi_rank(environ):
    for name in _RANK_VARIABLES:
        value = environ.get(name)
        if value is not None and value.isdigit():
            return int(value)
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tutti.runner.rank_output")
    parser.add_argument("--output-filename", metavar="DIR")
    parser.add_argument("--prefix-output-with-timestamp", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    rank = mpi_rank(os.environ)
    if rank is None:
        sys.stderr.write("tutti rank_output: no MPI rank in the environment (%s); run me "
                         "under mpirun\n" % ", ".join(_RANK_VARIABLES))
        return 2
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        sys.stderr.write("[%d]<stderr>: cannot start %s: %s\n"
                         % (rank, command[0], exc.strerror or exc))
        return 127

    def forward(signum, frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    sink = OutputSink({"stdout": sys.stdout, "stderr": sys.stderr}, args.output_filename,
                      timestamps=args.prefix_output_with_timestamp)
    sink.attach(rank, "stdout", child.stdout)
    sink.attach(rank, "stderr", child.stderr)
    returncode = child.wait()
    sessions.stop_own_group(_GRACE_SECONDS)
    sink.join(timeout=5)
    return sessions.describe_exit(returncode)[0]


if __name__ == "__main__":
    sys.exit(main())
