"""Environment variables that tuttirun hands to its workers."""

import re

# Variables that carry a job's secrets: never shown by --verbose and never put on a
# command line (remote workers receive them on stdin, see remote_guard).
SECRET_VARIABLES = ("TUTTI_GLOO_SECRET", "TUTTI_RUN_SECRET")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Variables that describe this shell or this host rather than the job; the remote side
# sets its own.
_NOT_FORWARDED = {
    "_", "HOME", "HOSTNAME", "LOGNAME", "MAIL", "OLDPWD", "PS1", "PS2", "PWD", "SHELL",
    "SHLVL", "TERM", "USER", "DISPLAY", "XAUTHORITY", "LS_COLORS", "SSH_AUTH_SOCK",
    "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TMUX", "TMUX_PANE", "STY", "WINDOW",
}
_TOPOLOGY = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")
# Variables that tuttirun itself sets per job; a stale copy from an enclosing job must not
# leak into this one.
_JOB_VARIABLES = frozenset(
    [prefix + name for prefix in ("TUTTI_", "HOROVOD_") for name in _TOPOLOGY]
    + ["HOROVOD_HOSTNAME", "TUTTI_CONTROLLER", "TUTTI_GLOO_RENDEZVOUS_ADDR",
       "TUTTI_GLOO_RENDEZVOUS_PORT", "TUTTI_RUN_STORE_ADDR", "TUTTI_RUN_STORE_PORT"]
    + list(SECRET_VARIABLES))


def forwardable(environ):
    """The part of `environ` worth sending to another host or through mpirun."""
    return {
        name: value for name, value in environ.items()
        if _NAME.match(name) and name not in _NOT_FORWARDED
        and not name.startswith("BASH_FUNC_") and name not in _JOB_VARIABLES
    }


def without_job_variables(environ):
    """`environ` minus any job variables inherited from an enclosing job."""
    return {name: value for name, value in environ.items() if name not in _JOB_VARIABLES}


def topology(placement):
    """TUTTI_* topology variables of one rank plus their HOROVOD_* equivalents."""
    values = (placement.rank, placement.size, placement.local_rank, placement.local_size,
              placement.cross_rank, placement.cross_size)
    env = {}
    for prefix in ("TUTTI_", "HOROVOD_"):
        for name, value in zip(_TOPOLOGY, values):
            env[prefix + name] = str(value)
    env["HOROVOD_HOSTNAME"] = placement.host
    return env


def gloo(placement, store_address, store_port, secret, interface):
    """Everything a Gloo worker needs to find the others."""
    env = topology(placement)
    env["TUTTI_CONTROLLER"] = "gloo"
    env["TUTTI_GLOO_RENDEZVOUS_ADDR"] = store_address
    env["TUTTI_GLOO_RENDEZVOUS_PORT"] = str(store_port)
    env["TUTTI_GLOO_SECRET"] = secret
    if interface:
        env["TUTTI_GLOO_IFACE"] = interface
    return env


def masked(env):
    """A copy of `env` fit for printing: secrets replaced by asterisks."""
    return {name: ("******" if name in SECRET_VARIABLES else value) for name, value in env.items()}


def split_secrets(env):
    """(env without secrets, the secrets alone)."""
    public = {n: v for n, v in env.items() if n not in SECRET_VARIABLES}
    secret = {n: v for n, v in env.items() if n in SECRET_VARIABLES}
    return public, secret
