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

The protocol is a few small files in a shared directory: `ready-JOB-RANK` (the rank's pid),
`turn` and `done` ("JOB SEQ", replaced atomically).
"""

import contextlib
import os
import signal
import time

PEERS = ("horovod",)
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "tutti", "horovod-venv")
_POLL_S = 0.0005


class PeerSetupError(Exception):
    """The peer cannot run here (its environment is missing); the message says how to fix it."""


def horovod_venv():
    return os.environ.get("TUTTI_HOROVOD_VENV") or DEFAULT_VENV


def horovod_python():
    """The benchmark environment's Python, checked to import Horovod with both frameworks."""
    import subprocess

    venv = horovod_venv()
    python = os.path.join(venv, "bin", "python")
    fix = ("build it with tools/bench/horovod-env (about 30 minutes on 2 cores), or point "
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
        while _read(path) != mine:
            time.sleep(_POLL_S)
        self._barrier()
        yield
        self._barrier()
        if self.rank == 0:
            _write(os.path.join(self.directory, "done"), mine)


class Job:
    """A group of ranks started by one command. `frozen_between_turns`: SIGSTOP it while
    another job has the turn."""

    def __init__(self, name, ranks, proc, frozen_between_turns):
        self.name, self.ranks, self.proc = name, ranks, proc
        self.frozen = frozen_between_turns
        self.pids = []


class JobFailed(Exception):
    pass


class Coordinator:
    """Hands `turns` turns to every job, round-robin, the first job rotating each turn."""

    def __init__(self, directory, jobs, turns, deadline):
        self.directory, self.jobs, self.turns, self.deadline = directory, jobs, turns, deadline
        self.waited_s = {job.name: 0.0 for job in jobs}

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

    def _check(self, what):
        for job in self.jobs:
            code = job.proc.poll()
            if code is not None:
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
        began = time.monotonic()
        done = os.path.join(self.directory, "done")
        while _read(done) != mine:
            self._check("%s had turn %d" % (job.name, seq))
            time.sleep(_POLL_S)
        self.waited_s[job.name] += time.monotonic() - began
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
