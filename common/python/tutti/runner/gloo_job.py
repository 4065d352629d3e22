"""Gloo mode: tuttirun hosts the rendezvous store and starts every rank itself.

Ranks on this host are started directly; ranks on other hosts through ssh, wrapped in
remote_guard (which receives the secrets on stdin and dies with the connection).
"""

import json
import os
import secrets
import shlex
import sys

from . import environment
from .store import StoreServer
from .supervisor import ProcessSpec

# Never ask (no terminal to answer), accept any host key and record none: the launcher
# leaves the user's known_hosts alone, and ssh's per-connection "Permanently added" notice
# stays out of the ranks' output (errors still show).
SSH_BASE = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def new_secret():
    """A fresh random secret for one job's store."""
    return secrets.token_hex(16)


def ssh_command(host, remote_command, ssh_port=None, ssh_identity_file=None,
                connect_timeout=None):
    argv = list(SSH_BASE)
    if connect_timeout:
        argv += ["-o", "ConnectTimeout=%d" % connect_timeout]
    if ssh_port:
        argv += ["-p", str(ssh_port)]
    if ssh_identity_file:
        argv += ["-i", ssh_identity_file]
    return argv + [host, remote_command]


def remote_shell_command(workdir, env, command, python=None):
    """`cd DIR && env VAR=... PYTHON -m tutti.runner.remote_guard COMMAND` for ssh."""
    assignments = ["%s=%s" % (name, shlex.quote(value)) for name, value in env.items()]
    guard = [python or sys.executable, "-m", "tutti.runner.remote_guard"]
    return "cd %s && env %s %s" % (shlex.quote(workdir), " ".join(assignments),
                                   shlex.join(guard + list(command)))


class RankLaunch:
    """How one rank is started, and how --verbose shows it."""

    def __init__(self, placement, spec, shown):
        self.placement = placement
        self.spec = spec
        self.shown = shown


def plan_ranks(placements, command, job_env, settings, parent_env=None, workdir=None):
    """One RankLaunch per placement.

    `job_env` holds per-rank variables (a callable placement -> dict) merged over the
    inherited environment; secrets among them reach remote ranks through stdin only.
    """
    parent_env = dict(os.environ if parent_env is None else parent_env)
    workdir = workdir or os.getcwd()
    launches = []
    for placement in placements:
        variables = job_env(placement)
        if placement.is_local:
            env = environment.without_job_variables(parent_env)
            env.update(variables)
            shown = "rank %d on %s: env %s %s" % (
                placement.rank, placement.host,
                " ".join("%s=%s" % (n, shlex.quote(v))
                         for n, v in environment.masked(variables).items()),
                shlex.join(command))
            spec = ProcessSpec(placement.rank, list(command), env, None)
        else:
            public, secret = environment.split_secrets(variables)
            remote_env = environment.forwardable(parent_env)
            remote_env.update(public)
            argv = ssh_command(placement.host,
                               remote_shell_command(workdir, remote_env, command),
                               settings.ssh_port, settings.ssh_identity_file,
                               getattr(settings, "start_timeout", None))
            stdin_line = (json.dumps(secret) + "\n").encode()
            shown = "rank %d on %s: %s  (stdin: %s)" % (
                placement.rank, placement.host, shlex.join(argv),
                json.dumps(environment.masked(secret)))
            spec = ProcessSpec(placement.rank, argv, parent_env, stdin_line)
        launches.append(RankLaunch(placement, spec, shown))
    return launches


def start_store(address, secret, port=0):
    return StoreServer(address, secret, port).start()
