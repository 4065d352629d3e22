"""Switching tutti between its modes inside one mpirun launch.

tutti reads its environment at init(), and init -> shutdown -> init is supported, so one
process can run the MPI controller, shut down, and come back with the Gloo controller. The
Gloo controller needs a rendezvous store; rank 0 hosts one (tutti.runner's StoreServer, the
store tuttirun hosts) on loopback and tells the other ranks its port and secret over MPI.
Every rank goes through the same sequence of init() calls, so the core's per-init key
namespace in the store agrees across ranks.
"""

import os
import secrets


class Mode:
    """A tutti configuration: the controller plus extra environment (e.g. TUTTI_SHM=off)."""

    def __init__(self, name, controller, extra_env=None):
        self.name = name
        self.controller = controller
        self.extra_env = dict(extra_env or {})

    def __repr__(self):
        return "Mode(%s)" % self.name


# --shm choices: mode-name suffix and the TUTTI_SHM value the session is started with.
# "default" leaves TUTTI_SHM as the environment has it (unset: the core's default, auto).
SHM_CHOICES = {"default": ("", None), "on": ("-shm", "on"), "off": ("-noshm", "off")}


def modes(shm_choices=("default",)):
    """The tutti modes to benchmark: each controller (MPI, Gloo) with each shared-memory
    setting asked for."""
    result = []
    for choice in shm_choices:
        suffix, value = SHM_CHOICES[choice]
        extra = {} if value is None else {"TUTTI_SHM": value}
        for controller in ("mpi", "gloo"):
            result.append(Mode(controller + suffix, controller, extra))
    return result


class Sessions:
    """Keeps at most one tutti session running, in the mode the next measurement needs."""

    def __init__(self, comm):
        import tutti.numpy as hvd

        self._hvd = hvd
        self._comm = comm
        self._store = None
        self._current = None
        self.inits = 0
        if comm.rank == 0:
            from tutti.runner.store import StoreServer

            secret = secrets.token_hex(16)
            self._store = StoreServer("127.0.0.1", secret).start()
            endpoint = (self._store.port, secret)
        else:
            endpoint = None
        port, secret = comm.bcast(endpoint, root=0)
        self._gloo_env = {
            "TUTTI_RANK": str(comm.rank),
            "TUTTI_SIZE": str(comm.size),
            # One host: the benchmark measures same-host collectives.
            "TUTTI_LOCAL_RANK": str(comm.rank),
            "TUTTI_LOCAL_SIZE": str(comm.size),
            "TUTTI_CROSS_RANK": "0",
            "TUTTI_CROSS_SIZE": "1",
            "TUTTI_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "TUTTI_GLOO_RENDEZVOUS_PORT": str(port),
            "TUTTI_GLOO_SECRET": secret,
            "TUTTI_GLOO_IFACE": "lo",
        }
        self._saved_env = {}

    def activate(self, mode):
        """Makes `mode` the running session (None: no session)."""
        if mode is self._current:
            return
        if self._current is not None:
            self._hvd.shutdown()
            self._current = None
        if mode is None:
            return
        self._apply_env(mode)
        self._hvd.init()
        self.inits += 1
        running = self._hvd.controller()
        if running != mode.controller:
            raise RuntimeError("tutti started the %r controller, expected %r for mode %s"
                               % (running, mode.controller, mode.name))
        if self._hvd.size() != self._comm.size or self._hvd.rank() != self._comm.rank:
            raise RuntimeError("tutti's rank/size (%d/%d) differ from MPI's (%d/%d)"
                               % (self._hvd.rank(), self._hvd.size(), self._comm.rank,
                                  self._comm.size))
        self._current = mode

    def close(self):
        self.activate(None)
        self._comm.Barrier()  # nobody may still be talking to the store
        if self._store is not None:
            self._store.close()

    def _apply_env(self, mode):
        # Undo the previous mode's variables, then set this mode's (the core reads them at
        # init). Variables the user set for every mode (TUTTI_CYCLE_TIME, ...) stay.
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        wanted = {"TUTTI_CONTROLLER": mode.controller}
        if mode.controller == "gloo":
            wanted.update(self._gloo_env)
        wanted.update(mode.extra_env)
        self._saved_env = {name: os.environ.get(name) for name in wanted}
        os.environ.update(wanted)
