"""Horovod 0.28.1 as a peer in the same launch (`--peers horovod`, docs/benchmarks.md).

Horovod lives in a benchmark environment of its own (tools/bench/horovod-env), so its ranks
are separate processes under that environment's Python: one job over MPI (mpirun) and one
over Gloo (horovodrun --gloo). All jobs of a launch start together and take turns, so that
a noisy spell of the shared machine is shared out instead of spoiling one of them:

- every job's ranks call `Baton.turn()` around each unit of work (one size and round of the
  sweep, one round of the other tests, one iteration of a training benchmark) and wait,
  sleeping, until the coordinator hands them the turn;
- the `Coordinator` (in the launching process) hands out turns round-robin, the starting
  job rotating from turn to turn, and freezes each Horovod job with SIGSTOP while it is not
  its turn: Horovod's background thread negotiates every cycle even when idle, and would
  otherwise take CPU from the job being measured. tutti's jobs are not frozen (its core
  watches its peers' liveness); they shut tutti down, or leave it idle, between turns.

The training benchmarks add a compute-only job: plain processes with no communication
library at all (FileBarrier between them), frozen between turns like Horovod's.

The protocol is a few small files in a shared directory: `ready-JOB-RANK` (the rank's pid),
`turn` and `done` ("JOB SEQ", replaced atomically).
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PEERS = ("horovod",)
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "tutti", "horovod-venv")
# How often a waiting rank or the coordinator looks at the turn files: a handover costs
# about this much, and waiting costs a wake-up per interval.
_POLL_S = 0.001
ABORT = "abort"


class PeerSetupError(Exception):
    """The peer cannot run here (its environment is missing); the message says how to fix it."""


def horovod_venv():
    return os.environ.get("TUTTI_HOROVOD_VENV") or DEFAULT_VENV


def horovod_python():
    """The benchmark environment's Python, checked to import horovod.torch."""
    venv = horovod_venv()
    python = os.path.join(venv, "bin", "python")
    fix = ("build it with tools/bench/horovod-env (about 15 minutes on 2 cores), or point "
           "TUTTI_HOROVOD_VENV at an environment that has it")
    if not os.access(python, os.X_OK):
        raise PeerSetupError("--peers horovod: no Horovod benchmark environment at %s; %s"
                             % (venv, fix))
    probe = subprocess.run(
        [python, "-c", "import horovod, horovod.torch; print(horovod.__version__)"],
        capture_output=True, text=True, timeout=120, cwd="/")
    if probe.returncode != 0:
        tail = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise PeerSetupError("--peers horovod: %s cannot import horovod.torch (%s); %s"
                             % (python, tail, fix))
    return python


def _write(path, text):
    partial = path + ".partial"
    with open(partial, "w") as stream:
        stream.write(text)
    os.replace(partial, path)


def _read(path):
    try:
        with open(path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


class Baton:
    """A rank's side of the turn-taking. Inert when `directory` is None (no peers)."""

    def __init__(self, directory, job, rank, barrier):
        self.directory, self.job, self.rank, self._barrier = directory, job, rank, barrier
        self.turns = 0

    def ready(self):
        """Tells the coordinator this rank is set up (and its pid, to freeze it)."""
        if self.directory:
            _write(os.path.join(self.directory, "ready-%s-%d" % (self.job, self.rank)),
                   str(os.getpid()))

    @contextlib.contextmanager
    def turn(self):
        if not self.directory:
            yield
            return
        self.turns += 1
        mine = "%s %d" % (self.job, self.turns)
        path = os.path.join(self.directory, "turn")
        while True:
            current = _read(path)
            if current == mine:
                break
            if current == ABORT:
                raise RuntimeError("the benchmark's coordinator gave up (another job failed "
                                   "or timed out; see its output)")
            time.sleep(_POLL_S)
        self._barrier()
        yield
        self._barrier()
        if self.rank == 0:
            _write(os.path.join(self.directory, "done"), mine)


class FileBarrier:
    """A barrier among the ranks of a job that has no communication library at all (the
    compute-only job): files in the shared directory."""

    def __init__(self, directory, job, rank, size):
        self.directory, self.job, self.rank, self.size = directory, job, rank, size
        self.count = 0

    def __call__(self):
        self.count += 1
        path = os.path.join(self.directory, "barrier-%s-%d-%%d" % (self.job, self.count))
        _write(path % self.rank, "")
        while not all(os.path.exists(path % rank) for rank in range(self.size)):
            time.sleep(_POLL_S)


class Job:
    """A group of ranks started by one command (`proc`), or by one command per rank (a
    list). `frozen_between_turns`: SIGSTOP it while another job has the turn."""

    def __init__(self, name, ranks, proc, frozen_between_turns):
        self.name, self.ranks = name, ranks
        self.procs = [] if proc is None else proc if isinstance(proc, list) else [proc]
        self.frozen = frozen_between_turns
        self.pids = []
        self.turns_done = 0


class JobFailed(Exception):
    pass


class Coordinator:
    """Hands `turns` turns to every job, round-robin, the first job rotating each turn."""

    def __init__(self, directory, jobs, turns, deadline):
        self.directory, self.jobs, self.turns, self.deadline = directory, jobs, turns, deadline

    def run(self):
        for job in self.jobs:
            self._wait_ready(job)
        for job in self.jobs:
            self._signal(job, signal.SIGSTOP)
        try:
            for index in range(self.turns):
                start = index % len(self.jobs)
                for job in self.jobs[start:] + self.jobs[:start]:
                    self._give_turn(job, index + 1)
        finally:
            for job in self.jobs:
                self._signal(job, signal.SIGCONT)

    def abort(self):
        """Tells every waiting rank to give up."""
        _write(os.path.join(self.directory, "turn"), ABORT)
        for job in self.jobs:
            self._signal(job, signal.SIGCONT)

    def _check(self, what):
        for job in self.jobs:
            for proc in job.procs:
                code = proc.poll()
                # A job may end once it has had all its turns (tutti's is never frozen).
                if code is not None and (code != 0 or job.turns_done < self.turns):
                    raise JobFailed("%s exited (code %d) while %s" % (job.name, code, what))
        if time.monotonic() > self.deadline:
            raise JobFailed("timed out while %s" % what)

    def _wait_ready(self, job):
        paths = [os.path.join(self.directory, "ready-%s-%d" % (job.name, rank))
                 for rank in range(job.ranks)]
        while not all(os.path.exists(p) for p in paths):
            self._check("waiting for %s to start" % job.name)
            time.sleep(0.01)
        job.pids = [int(_read(p)) for p in paths]

    def _give_turn(self, job, seq):
        mine = "%s %d" % (job.name, seq)
        self._signal(job, signal.SIGCONT)
        _write(os.path.join(self.directory, "turn"), mine)
        done = os.path.join(self.directory, "done")
        while _read(done) != mine:
            self._check("%s had turn %d" % (job.name, seq))
            time.sleep(_POLL_S)
        job.turns_done += 1
        self._signal(job, signal.SIGSTOP)

    def _signal(self, job, signum):
        if not job.frozen:
            return
        for pid in job.pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass


def stop_all(procs):
    """Kills every job (frozen ones are woken first so that nothing is left stopped)."""
    for proc in procs:
        if proc.poll() is None:
            for signum in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, signum)
                except ProcessLookupError:
                    pass
    for proc in procs:
        proc.wait()


def clean_env(base):
    """`base` without the variables of an enclosing MPI job or of the project's Python, for
    starting another Python's job from inside one."""
    prefixes = ("OMPI_", "PMIX_", "OPAL_", "PRTE_", "HYDRA_", "PMI_")
    env = {k: v for k, v in base.items() if not k.startswith(prefixes)}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def horovodrun_command(np, python, argv):
    """Horovod's own launcher in Gloo mode on this host, over loopback. Its jobs are frozen
    between turns, so Gloo's timeout must outlast the other jobs' turns."""
    horovodrun = os.path.join(os.path.dirname(python), "horovodrun")
    return [horovodrun, "--gloo", "-np", str(np), "-H", "localhost:%d" % np,
            "--network-interface", "lo", "--gloo-timeout-seconds", "3600", python] + list(argv)


# Open MPI settings of the enclosing job that Horovod's MPI job gets as well.
_FORWARDED_MCA = ("mpi_yield_when_idle", "btl_vader_single_copy_mechanism", "btl")


def mpirun_command(np, python, argv):
    """Horovod's MPI job, started from inside a running job (a training benchmark's rank 0):
    the enclosing job's Open MPI settings (mpirun --mca) are passed on."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise PeerSetupError("--peers horovod: mpirun not found on PATH")
    command = [mpirun, "-np", str(np), "--oversubscribe", "--allow-run-as-root",
               "--bind-to", "none"]
    for name in _FORWARDED_MCA:
        value = os.environ.get("OMPI_MCA_" + name)
        if value is not None:
            command += ["--mca", name, value]
    return command + [python] + list(argv)


COMPUTE_ONLY = "compute-only-job"


class HorovodPeers:
    """Horovod's two jobs (MPI, Gloo) of a training benchmark, and a compute-only job, started
    and coordinated by the tutti job's rank 0. `argv(controller, directory)` is the peer
    job's command line after the Python; `compute_argv(rank, directory)`, if given, that of
    one rank of the compute-only job: the same training without any communication library
    (this Python, one process per rank, a FileBarrier between them). `turns`: how many turns
    every job takes (the tutti job's ranks take theirs with a Baton named "tutti")."""

    def __init__(self, np, argv, turns, timeout_s=3600, compute_argv=None):
        python = horovod_python()
        self.directory = tempfile.mkdtemp(prefix="tutti-peers-")
        env = clean_env(os.environ)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        self.commands = {
            "horovod-mpi": mpirun_command(np, python, argv("mpi", self.directory)),
            "horovod-gloo": horovodrun_command(np, python, argv("gloo", self.directory)),
        }
        jobs = [Job("tutti", np, None, False)]
        for name, command in self.commands.items():
            print("peers: %s: %s" % (name, " ".join(command)), file=sys.stderr, flush=True)
            proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            jobs.append(Job(name, np, proc, True))
        if compute_argv is not None:
            plain = [subprocess.Popen([sys.executable] + compute_argv(rank, self.directory),
                                      env=env, stdin=subprocess.DEVNULL,
                                      start_new_session=True) for rank in range(np)]
            print("peers: %s: %s (one process per rank)" % (
                COMPUTE_ONLY, " ".join([sys.executable] + compute_argv("RANK", "DIR"))),
                file=sys.stderr, flush=True)
            jobs.append(Job(COMPUTE_ONLY, np, plain, True))
        self._np = np
        self._names = [job.name for job in jobs[1:]]
        self._procs = [proc for job in jobs[1:] for proc in job.procs]
        self._coordinator = Coordinator(self.directory, jobs, turns,
                                        time.monotonic() + timeout_s)
        self._error = None
        self._thread = threading.Thread(target=self._coordinate, daemon=True)
        self._thread.start()

    def _coordinate(self):
        try:
            self._coordinator.run()
        except Exception as exc:  # reported by finish(); the ranks see the abort
            self._error = exc
            self._coordinator.abort()

    def finish(self, timeout_s=600):
        """Waits for the peer jobs; returns {job name: the result its rank 0 wrote}."""
        self._thread.join()
        try:
            if self._error is not None:
                raise RuntimeError("--peers horovod: %s" % self._error)
            for proc in self._procs:
                code = proc.wait(timeout=timeout_s)
                if code != 0:
                    raise RuntimeError("--peers horovod: a peer job (%s) exited with code %d"
                                       % (" ".join(proc.args[:3]), code))
            results = {}
            for name in self._names:
                if name == COMPUTE_ONLY:  # one file per rank: the job has no gather
                    results[name] = [_load(self.directory, "%s-%d" % (name, rank))
                                     for rank in range(self._np)]
                else:
                    results[name] = _load(self.directory, name)
            return results
        finally:
            stop_all(self._procs)
            shutil.rmtree(self.directory, ignore_errors=True)

    def abort(self):
        self._coordinator.abort()
        stop_all(self._procs)


def _load(directory, job):
    with open(os.path.join(directory, "result-%s.json" % job)) as stream:
        return json.load(stream)


def write_result(directory, job, result):
    """A peer job's rank 0 hands its figures to the coordinating rank."""
    _write(os.path.join(directory, "result-%s.json" % job), json.dumps(result))
