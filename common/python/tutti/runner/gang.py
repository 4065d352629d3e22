"""What an engine that owns the machines (Ray, Spark) needs to run a Gloo job as tuttirun does.

The engine gang-starts N processes and tells us where each runs; this module does the rest
with tuttirun's own parts: the driver hosts the authenticated rendezvous store (store.py),
ranks are placed host by host (hosts.Placement), and every worker gets the environment of
a tuttirun Gloo rank (environment.gloo) plus the tutti.runner.run variables that point
task_worker at the same store. So `hvd.init()` in a worker runs exactly as under tuttirun.
"""

import collections
import socket
import time

from . import environment, network, serialization
from .api import WorkerError
from .gloo_job import new_secret
from .hosts import Placement, _is_own_address
from .store import StoreServer
from .task_worker import FUNCTION_KEY, RESULT_KEY

# Where a failing rank records what happened, with the time it noticed; the earliest such
# record names the rank that failed the job (its peers fail after it, on a dead connection).
FAILURE_KEY = "run/failure/%d"

Failure = collections.namedtuple("Failure", ["time", "summary", "traceback"])

# How long the driver waits for the failing rank's own report once only its peers' reports
# of the loss (AbortedError) have arrived.
CONSEQUENCE_GRACE_S = 5.0


def place(hosts_in_rank_order):
    """Placements (rank, size, host, local and cross ranks) for ranks on the given hosts.

    `hosts_in_rank_order[r]` names the host of rank r. A host's cross rank is its position
    in first-appearance order; local ranks count the ranks on one host.
    """
    size = len(hosts_in_rank_order)
    host_order = list(dict.fromkeys(hosts_in_rank_order))
    per_host = collections.Counter(hosts_in_rank_order)
    seen = collections.Counter()
    placements = []
    for rank, host in enumerate(hosts_in_rank_order):
        placements.append(Placement(rank, size, host, seen[host], per_host[host],
                                    host_order.index(host), len(host_order), True))
        seen[host] += 1
    return placements


def rank_order(hosts_by_worker):
    """Worker indices reordered so that the workers of one host get consecutive ranks.

    Hosts keep their first-appearance order and the workers of a host their given order;
    `result[r]` is the index of the worker that becomes rank r.
    """
    host_order = list(dict.fromkeys(hosts_by_worker))
    return sorted(range(len(hosts_by_worker)),
                  key=lambda index: (host_order.index(hosts_by_worker[index]), index))


def store_address(driver_address, worker_addresses):
    """The address the driver's store listens on: loopback when every worker is on the
    driver's host (nothing then listens on the network), else `driver_address`."""
    if all(address in (driver_address, network.LOOPBACK_ADDRESS) or _is_own_address(address)
           for address in worker_addresses):
        return network.LOOPBACK_ADDRESS
    return driver_address


def interface_towards(address):
    """The name of this host's interface that reaches `address` (for TUTTI_GLOO_IFACE)."""
    if address == network.LOOPBACK_ADDRESS:
        return network.interface_of(address) or "lo"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((address, 9))  # no packet is sent; the kernel only picks a route
        return network.interface_of(probe.getsockname()[0])


class StoreEndpoint(collections.namedtuple("StoreEndpoint", ["address", "port", "secret"])):
    """Where the job's store listens and its secret: what a worker needs (picklable)."""

    def worker_environment(self, placement, interface=None, extra=None):
        """Everything rank `placement.rank` needs: tuttirun's Gloo variables, the variables
        task_worker reads, and `extra` (the user's) underneath."""
        env = {name: str(value) for name, value in (extra or {}).items()}
        env.update(environment.gloo(placement, self.address, self.port, self.secret,
                                    interface))
        env.update({"TUTTI_RUN_STORE_ADDR": self.address,
                    "TUTTI_RUN_STORE_PORT": str(self.port),
                    "TUTTI_RUN_SECRET": self.secret})
        return env


class DriverStore:
    """The job's rendezvous store, hosted by the driver for the life of a job.

    Holds the function to run (FUNCTION_KEY), collects each rank's result (RESULT_KEY)
    and failure record (FAILURE_KEY).
    """

    def __init__(self, address):
        self.secret = new_secret()
        self.address = address
        self._server = StoreServer(address, self.secret).start()
        self.port = self._server.port
        self.endpoint = StoreEndpoint(address, self.port, self.secret)

    def close(self):
        self._server.close()

    def put_function(self, fn, args, kwargs, dumps=serialization.dumps):
        self._server.set(FUNCTION_KEY, dumps((fn, tuple(args), dict(kwargs or {}))))

    def results(self, size):
        """Every rank's result in rank order; WorkerError for a rank that stored none."""
        values = []
        for rank in range(size):
            data = self._server.get(RESULT_KEY % rank)
            if data is None:
                raise WorkerError(rank, "finished without reporting a result")
            record = serialization.loads(data)
            if record[0] != "ok":
                raise _error_from_record(rank, record)
            values.append(record[1])
        return values

    def first_failure(self, size, grace_s=CONSEQUENCE_GRACE_S):
        """The WorkerError of the rank that failed the job, or None when none recorded one.

        A rank's own failure (it raised, exited or was killed) wins over tutti's
        AbortedError on its peers, which only report the loss; up to `grace_s` seconds are
        given for such a failure record to arrive. Among several, the earliest noticed.
        """
        deadline = time.monotonic() + grace_s
        while True:
            failures = self._failures(size)
            causes = {rank: f for rank, f in failures.items() if not is_consequence(f.summary)}
            if causes or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        chosen = causes or failures
        if not chosen:
            return None
        rank = min(chosen, key=lambda r: (chosen[r].time, r))
        error = WorkerError(rank, chosen[rank].summary, chosen[rank].traceback)
        data = self._server.get(RESULT_KEY % rank)
        if data is not None:
            record = serialization.loads(data)
            if record[0] == "error" and record[3] is not None:
                error.__cause__ = serialization.loads(record[3])
        return error

    def _failures(self, size):
        """{rank: Failure} from failure records and from error results (a rank whose task
        was stopped before it could record its failure still left its error result)."""
        failures = {}
        for rank in range(size):
            data = self._server.get(FAILURE_KEY % rank)
            if data is not None:
                failures[rank] = Failure(*serialization.loads(data))
                continue
            data = self._server.get(RESULT_KEY % rank)
            if data is not None:
                record = serialization.loads(data)
                if record[0] == "error":
                    failures[rank] = Failure(float("inf"), record[1], record[2])
        return failures


def is_consequence(summary):
    """Whether a rank's error only reports another rank's failure: tutti raises
    AbortedError on the survivors when a peer fails or shuts down."""
    return summary.split(":", 1)[0].strip().endswith("AbortedError")


def _error_from_record(rank, record):
    _, summary, text, pickled = record
    error = WorkerError(rank, summary, text)
    if pickled is not None:
        error.__cause__ = serialization.loads(pickled)
    return error


def run_rank_process(rank, env, executable, timeout=None):
    """Runs tutti.runner.task_worker's main() as rank `rank` and waits for it.

    The process dies with its parent (PR_SET_PDEATHSIG), so an engine that kills the task
    leaves nothing running. On failure the rank's failure record goes into the store, and
    RuntimeError naming the rank is raised.
    """
    import signal
    import subprocess
    import time

    from .store_client import StoreClient

    # `-c` rather than `-m`: runpy warns when the package has imported the module already.
    entry = "import sys; from tutti.runner.task_worker import main; sys.exit(main())"
    process = subprocess.Popen([executable, "-c", entry], env=env,
                               preexec_fn=_die_with_parent)
    try:
        code = process.wait(timeout=timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    if code == 0:
        return
    noticed = time.time()
    client = StoreClient(env["TUTTI_RUN_STORE_ADDR"], env["TUTTI_RUN_STORE_PORT"],
                         env["TUTTI_RUN_SECRET"])
    with client:
        data = client.get(RESULT_KEY % rank)
        record = serialization.loads(data) if data is not None else None
        if record is not None and record[0] == "error":
            summary, text = record[1], record[2]
        elif code < 0:
            summary, text = ("the worker process was killed by %s"
                             % signal.Signals(-code).name), ""
        else:
            summary, text = ("the worker process exited with code %d before reporting a "
                             "result" % code), ""
        client.set(FAILURE_KEY % rank, serialization.dumps((noticed, summary, text)))
    raise RuntimeError("tutti rank %d: %s" % (rank, summary))


def _die_with_parent():
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
