"""tuttirun: the entry point (`tuttirun`, `python -m tutti.runner`).

main() parses and validates everything before it starts anything: bad input ends with
one line, `tuttirun: error: ...`, and exit code 2.
"""

import collections
import os
import shlex
import shutil
import sys

from . import environment, gloo_job, hosts, mpi_job, network, options, ranges, tuning
from .errors import UsageError
from .output import OutputSink, prepare_log_dir
from .supervisor import ProcessSpec, Supervisor

# What validation decided: where each rank runs and where the store listens.
Plan = collections.namedtuple("Plan", ["placements", "store_address", "store_port",
                                       "interface", "hosts_given", "mpi_flavor"])


def _say(message):
    sys.stderr.write("tuttirun: %s\n" % message)
    sys.stderr.flush()


def _check_command(command, placements):
    if not command:
        raise UsageError("no command given; usage: tuttirun -np N [options] COMMAND [ARGS...]")
    if any(p.is_local for p in placements) and shutil.which(command[0]) is None:
        if os.sep in command[0]:
            raise UsageError("command %s does not exist or is not executable" % command[0])
        raise UsageError("command %r not found on PATH" % command[0])


def make_plan(settings):
    """Validates `settings` and decides placement; UsageError on any bad input."""
    if settings.hostfile:
        host_list = hosts.parse_hostfile(settings.hostfile)
    elif settings.hosts:
        host_list = hosts.parse_hosts_argument(settings.hosts)
    else:
        host_list = None
    np = settings.np
    if np is None:
        if host_list is None:
            raise UsageError("-np is required (or give -H/--hostfile to use all their slots)")
        np = sum(host.slots for host in host_list)
    if host_list is None:
        host_list = [hosts.Host("localhost", np)]
        addresses = {"localhost": ["127.0.0.1"]}
    else:
        addresses = hosts.resolve_all([host.name for host in host_list],
                                      settings.start_timeout)
    placements = hosts.place(np, host_list, addresses)
    _check_command(settings.command, placements)
    remote = []
    for placement in placements:
        if not placement.is_local and placement.local_rank == 0:
            remote.append(addresses[placement.host][0])
    master = _master_address(settings.master_host, settings.start_timeout)
    store_address, interface = network.choose(settings.network_interface, remote, master)
    if settings.output_filename:
        prepare_log_dir(settings.output_filename)
    if settings.ssh_identity_file and not os.access(settings.ssh_identity_file, os.R_OK):
        raise UsageError("--ssh-identity-file %s is not readable" % settings.ssh_identity_file)
    flavor = mpi_job.detect_flavor() if settings.mpi else None
    return Plan(placements, store_address, settings.master_port or 0, interface,
                bool(settings.hosts or settings.hostfile), flavor)


def _master_address(master_host, timeout):
    """The IPv4 address of this machine that -hm names, or None without -hm.

    tuttirun hosts the rendezvous store itself, so the master host must be this machine.
    """
    if not master_host:
        return None
    addresses = hosts.resolve_all([master_host], timeout)[master_host]
    own = [a for a in addresses if ":" not in a and hosts.is_local(master_host, [a])]
    if not own:
        resolved = "" if addresses == [master_host] else " (%s)" % ", ".join(addresses)
        raise UsageError("-hm %s%s is not this machine: tuttirun hosts the rendezvous store "
                         "on the master host, so run tuttirun there"
                         % (master_host, resolved))
    return own[0]


def _launcher_variables(settings):
    """What the launcher itself adds to every rank's environment."""
    env = tuning.environment(settings)
    if settings.tcp:
        env["NCCL_IB_DISABLE"] = "1"  # horovodrun's --tcp
    return env


def _targets(targets):
    return targets or {"stdout": sys.stdout, "stderr": sys.stderr}


def run_gloo(settings, plan, extra_env=None, targets=None):
    """Runs a Gloo job: store, ranks, supervision. Returns a JobResult."""
    secret = gloo_job.new_secret()
    try:
        store = gloo_job.start_store(plan.store_address, secret, plan.store_port)
    except OSError as exc:
        raise UsageError("the rendezvous store cannot listen on %s:%d: %s"
                         % (plan.store_address, plan.store_port, exc.strerror or exc)) from None
    try:
        core_env = _launcher_variables(settings)

        def job_env(placement):
            env = dict(core_env)
            env.update(environment.gloo(placement, plan.store_address, store.port, secret,
                                        plan.interface))
            env.update(extra_env or {})
            return env

        launches = gloo_job.plan_ranks(plan.placements, settings.command, job_env, settings)
        if settings.verbose:
            _say("rendezvous store listening on %s:%d" % (plan.store_address, store.port))
            for launch in launches:
                _say(launch.shown)
        sink = OutputSink(_targets(targets), settings.output_filename,
                          timestamps=settings.prefix_output_with_timestamp)
        supervisor = Supervisor([launch.spec for launch in launches], sink,
                                settings.stop_grace_seconds)
        return supervisor.run()
    finally:
        store.close()


def run_mpi(settings, plan, extra_env=None, targets=None):
    """Runs an MPI job through mpirun. Returns a JobResult."""
    job_env = _launcher_variables(settings)
    job_env["TUTTI_CONTROLLER"] = "mpi"
    job_env.update(extra_env or {})
    parent = environment.without_job_variables(os.environ)
    forwarded = [name for name in environment.forwardable(parent) if name not in job_env]
    argv = mpi_job.build_command(
        plan.mpi_flavor, len(plan.placements), settings.command, job_env, forwarded,
        placements=plan.placements if plan.hosts_given else None,
        network_interface=settings.network_interface, output_dir=settings.output_filename,
        ssh_port=settings.ssh_port, ssh_identity_file=settings.ssh_identity_file,
        mpi_args=settings.mpi_args, timestamps=settings.prefix_output_with_timestamp)
    if settings.verbose:
        shown = environment.masked(job_env)
        _say("environment for every rank: %s"
             % " ".join("%s=%s" % (n, shlex.quote(v)) for n, v in shown.items()))
        _say(shlex.join(argv))
    env = dict(parent)
    env.update(job_env)
    sink = OutputSink(_targets(targets), prefix=False)
    supervisor = Supervisor([ProcessSpec(0, argv, env, None)], sink,
                            settings.stop_grace_seconds, name=lambda rank: "mpirun")
    return supervisor.run()


def execute(settings, plan, extra_env=None, targets=None):
    runner = run_mpi if settings.mpi else run_gloo
    return runner(settings, plan, extra_env, targets)


def main(argv=None):
    """Command-line entry point: returns the exit code (console scripts exit with it)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        settings = options.parse(argv)
        if settings.check_build:
            from . import check_build

            return check_build.main(verbose=settings.verbose)
        # The ranks inherit this environment: a value the core would refuse fails here, once.
        ranges.check_environment(os.environ, overridden=tuning.environment(settings))
        if settings.host_discovery_script:
            from .elastic import driver

            return driver.run(settings)
        plan = make_plan(settings)
        return execute(settings, plan).exit_code
    except UsageError as exc:
        _say("error: %s" % exc)
        return 2
