"""The commands and environments tuttirun generates: mpirun (Open MPI, MPICH) and ssh."""

import json
import shlex
import sys

import pytest

from tutti.runner import environment, gloo_job, hosts, mpi_job, options

COMMAND = ["python", "train.py", "--epochs", "2"]


def test_mpi_flavor_detection():
    assert mpi_job.flavor_from_version_text("mpirun (Open MPI) 4.1.4\n\nReport bugs") == "openmpi"
    assert mpi_job.flavor_from_version_text(
        "HYDRA build details:\n    Version: 4.1.2\n") == "mpich"
    assert mpi_job.flavor_from_version_text("Intel(R) MPI Library for Linux* OS") == "mpich"
    assert mpi_job.flavor_from_version_text("something else") is None


def test_installed_mpirun_is_open_mpi():
    assert mpi_job.detect_flavor() == "openmpi"


def test_open_mpi_command_as_root_oversubscribed():
    argv = mpi_job.build_command(
        "openmpi", 4, COMMAND, {"TUTTI_CONTROLLER": "mpi", "TUTTI_CYCLE_TIME": "2.0",
                                "TUTTI_RUN_SECRET": "s3cr3t"},
        ["PATH", "PYTHONPATH"], is_root=True, cpu_count=2, python="/py")
    assert argv == [
        "mpirun", "--allow-run-as-root", "-np", "4", "--oversubscribe", "--bind-to", "none",
        "--map-by", "slot", "-x", "TUTTI_CONTROLLER=mpi", "-x", "TUTTI_CYCLE_TIME=2.0",
        "-x", "TUTTI_RUN_SECRET", "-x", "PATH", "-x", "PYTHONPATH",
        "/py", "-m", "tutti.runner.rank_output", "--"] + COMMAND
    assert "s3cr3t" not in " ".join(argv)


def test_open_mpi_command_multi_host_as_user():
    placements = hosts.place(3, [hosts.Host("n1", 2), hosts.Host("n2", 2)],
                             {"n1": ["192.0.2.101"], "n2": ["192.0.2.102"]})
    argv = mpi_job.build_command(
        "openmpi", 3, COMMAND, {}, [], placements=placements, network_interface="eth1",
        output_dir="/logs", ssh_port=2222, ssh_identity_file="/k", mpi_args=["-mca", "x", "y"],
        is_root=False, cpu_count=8, python="/py")
    assert argv == [
        "mpirun", "-np", "3", "-H", "n1:2,n2:1", "--bind-to", "none", "--map-by", "slot",
        "-mca", "btl_tcp_if_include", "eth1", "-mca", "oob_tcp_if_include", "eth1",
        "-mca", "plm_rsh_args", "-p 2222 -i /k", "-mca", "x", "y",
        "/py", "-m", "tutti.runner.rank_output", "--output-filename", "/logs", "--"] + COMMAND


def test_mpich_command():
    placements = hosts.place(3, [hosts.Host("n1", 2), hosts.Host("n2", 2)],
                             {"n1": ["192.0.2.101"], "n2": ["192.0.2.102"]})
    argv = mpi_job.build_command(
        "mpich", 3, COMMAND, {"TUTTI_CONTROLLER": "mpi", "TUTTI_GLOO_SECRET": "zz"},
        ["LD_LIBRARY_PATH", "PATH"], placements=placements, network_interface="eth1",
        is_root=True, cpu_count=1, python="/py")
    assert argv == [
        "mpirun", "-np", "3", "-hosts", "n1:2,n2:1", "-iface", "eth1",
        "-genvlist", "TUTTI_GLOO_SECRET,LD_LIBRARY_PATH,PATH", "-env", "TUTTI_CONTROLLER", "mpi",
        "/py", "-m", "tutti.runner.rank_output", "--"] + COMMAND
    assert "--allow-run-as-root" not in argv and "--oversubscribe" not in argv


def test_mpich_refuses_ssh_options():
    from tutti.runner.errors import UsageError

    with pytest.raises(UsageError, match="not supported with MPICH"):
        mpi_job.build_command("mpich", 2, COMMAND, {}, [], ssh_port=22)


def test_forwarded_environment_skips_host_and_job_variables():
    parent = {"PATH": "/bin", "PYTHONPATH": "/src", "HOSTNAME": "a", "PWD": "/x", "SHLVL": "1",
              "BASH_FUNC_f%%": "() {}", "bad-name": "1", "TUTTI_RANK": "5",
              "TUTTI_GLOO_SECRET": "old", "TUTTI_FUSION_THRESHOLD": "99", "OMP_NUM_THREADS": "2"}
    assert environment.forwardable(parent) == {
        "PATH": "/bin", "PYTHONPATH": "/src", "TUTTI_FUSION_THRESHOLD": "99",
        "OMP_NUM_THREADS": "2"}


def test_gloo_rank_environment():
    placement = hosts.Placement(3, 4, "n2", 1, 2, 1, 2, False)
    env = environment.gloo(placement, "10.0.0.1", 4242, "abc", "eth1")
    assert env == {
        "TUTTI_RANK": "3", "TUTTI_SIZE": "4", "TUTTI_LOCAL_RANK": "1", "TUTTI_LOCAL_SIZE": "2",
        "TUTTI_CROSS_RANK": "1", "TUTTI_CROSS_SIZE": "2",
        "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_HOSTNAME": "n2", "TUTTI_CONTROLLER": "gloo",
        "TUTTI_GLOO_RENDEZVOUS_ADDR": "10.0.0.1", "TUTTI_GLOO_RENDEZVOUS_PORT": "4242",
        "TUTTI_GLOO_SECRET": "abc", "TUTTI_GLOO_IFACE": "eth1"}
    assert environment.masked(env)["TUTTI_GLOO_SECRET"] == "******"


def test_multi_host_ssh_commands():
    settings = options.parse(["-np", "4", "-H", "localhost:2,node-b:2", "--ssh-port", "2222",
                              "python", "train.py"])
    placements = hosts.place(4, [hosts.Host("localhost", 2), hosts.Host("node-b", 2)],
                             {"localhost": ["127.0.0.1"], "node-b": ["192.0.2.200"]})

    def job_env(placement):
        return environment.gloo(placement, "192.0.2.2", 5000, "topsecret", "eth0")

    parent = {"PATH": "/usr/bin", "PYTHONPATH": "/src dir", "HOSTNAME": "here"}
    launches = gloo_job.plan_ranks(placements, ["python", "train.py"], job_env, settings,
                                   parent_env=parent, workdir="/work dir")
    local, remote = launches[1], launches[2]
    # Local ranks are started directly, with the secret in their environment only.
    assert local.spec.argv == ["python", "train.py"]
    assert local.spec.env["TUTTI_RANK"] == "1" and local.spec.env["TUTTI_GLOO_SECRET"] == "topsecret"
    assert local.spec.stdin_data is None
    # Remote ranks go through ssh and remote_guard; the secret travels on stdin.
    argv = remote.spec.argv
    # --start-timeout (default 30 s) bounds each ssh connection.
    assert argv[:14] == ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                         "-o", "ConnectTimeout=30", "-p", "2222", "node-b"]
    assert len(argv) == 15
    remote_command = argv[14]
    assert remote_command.startswith("cd '/work dir' && env ")
    words = shlex.split(remote_command)
    assert words[:4] == ["cd", "/work dir", "&&", "env"]
    assignments = dict(w.split("=", 1) for w in words[4:] if "=" in w and not w.startswith("/"))
    assert assignments["TUTTI_RANK"] == "2" and assignments["TUTTI_LOCAL_RANK"] == "0"
    assert assignments["TUTTI_CROSS_RANK"] == "1" and assignments["TUTTI_CROSS_SIZE"] == "2"
    assert assignments["PYTHONPATH"] == "/src dir" and "HOSTNAME" not in assignments
    assert words[-5:] == [sys.executable, "-m", "tutti.runner.remote_guard", "python", "train.py"]
    assert "topsecret" not in remote_command
    assert json.loads(remote.spec.stdin_data) == {"TUTTI_GLOO_SECRET": "topsecret"}
    assert "topsecret" not in remote.shown and "topsecret" not in local.shown
    assert "TUTTI_GLOO_SECRET='******'" in local.shown
