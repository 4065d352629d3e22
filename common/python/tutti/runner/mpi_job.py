"""MPI mode: build the mpirun command for Open MPI or MPICH and run it.

Each rank runs under rank_output, so that output looks the same as in Gloo mode.
Settings reach the ranks as environment variables: tutti's own with their values on the
command line (secrets excepted), the rest of the caller's environment by name.
"""

import os
import shutil
import subprocess
import sys

from . import environment
from .errors import UsageError

OPEN_MPI = "openmpi"
MPICH = "mpich"


def flavor_from_version_text(text):
    """OPEN_MPI or MPICH from the output of `mpirun --version`, else None."""
    if "Open MPI" in text or "OpenRTE" in text:
        return OPEN_MPI
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return MPICH
    return None


def detect_flavor(mpirun="mpirun", timeout=20):
    path = shutil.which(mpirun)
    if path is None:
        raise UsageError("--mpi needs %s, which is not on PATH; install MPI (e.g. Open MPI) "
                         "or use Gloo mode (--gloo)" % mpirun)
    try:
        probe = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError("cannot run `%s --version`: %s" % (path, exc)) from None
    flavor = flavor_from_version_text(probe.stdout)
    if flavor is None:
        first = probe.stdout.strip().splitlines()[:1]
        raise UsageError("cannot tell which MPI %s belongs to (`--version` says %r); "
                         "Open MPI and MPICH are supported" % (path, first[0] if first else ""))
    return flavor


def _host_list(placements):
    """host:count for each host that received ranks, in rank order."""
    counts = {}
    for placement in placements:
        counts[placement.host] = counts.get(placement.host, 0) + 1
    return ",".join("%s:%d" % item for item in counts.items())


def build_command(flavor, np, command, job_env, forwarded_names, placements=None,
                  network_interface=None, output_dir=None, ssh_port=None,
                  ssh_identity_file=None, mpi_args=(), is_root=None, cpu_count=None,
                  python=None, timestamps=False):
    """The mpirun argv.

    job_env: tutti's variables for every rank; forwarded_names: inherited variables that
    mpirun passes on by name. placements: only for jobs given -H/--hostfile.
    """
    is_root = os.geteuid() == 0 if is_root is None else is_root
    cpu_count = (os.cpu_count() or 1) if cpu_count is None else cpu_count
    public, secret = environment.split_secrets(job_env)
    argv = ["mpirun"]
    if flavor == OPEN_MPI:
        if is_root:
            argv.append("--allow-run-as-root")
        argv += ["-np", str(np)]
        if placements:
            argv += ["-H", _host_list(placements)]
        if np > cpu_count:
            argv.append("--oversubscribe")
        argv += ["--bind-to", "none", "--map-by", "slot"]
        if network_interface:
            argv += ["-mca", "btl_tcp_if_include", network_interface,
                     "-mca", "oob_tcp_if_include", network_interface]
        rsh_args = []
        if ssh_port:
            rsh_args += ["-p", str(ssh_port)]
        if ssh_identity_file:
            rsh_args += ["-i", ssh_identity_file]
        if rsh_args:
            argv += ["-mca", "plm_rsh_args", " ".join(rsh_args)]
        for name, value in public.items():
            argv += ["-x", "%s=%s" % (name, value)]
        for name in list(secret) + sorted(forwarded_names):
            argv += ["-x", name]
    elif flavor == MPICH:
        if ssh_port or ssh_identity_file:
            raise UsageError("--ssh-port and --ssh-identity-file are not supported with MPICH; "
                             "set them in ~/.ssh/config instead")
        argv += ["-np", str(np)]
        if placements:
            argv += ["-hosts", _host_list(placements)]
        if network_interface:  # Hydra takes one interface
            argv += ["-iface", network_interface.split(",")[0]]
        names = list(secret) + sorted(forwarded_names)
        if names:
            argv += ["-genvlist", ",".join(names)]
        for name, value in public.items():
            argv += ["-env", name, value]
    else:
        raise ValueError("unknown MPI flavor %r" % (flavor,))
    argv += list(mpi_args or ())
    argv += [python or sys.executable, "-m", "tutti.runner.rank_output"]
    if output_dir:
        argv += ["--output-filename", os.path.abspath(output_dir)]
    if timestamps:
        argv.append("--prefix-output-with-timestamp")
    return argv + ["--"] + list(command)
