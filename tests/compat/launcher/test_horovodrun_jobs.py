"""Real jobs started with horovodrun's command lines: 2 and 3 ranks, Gloo and MPI.

The worker is a Horovod-style script (init, an allreduce through the core); the tests
check what horovodrun's flags must do to the job.
"""

import re
import socket
import sys
import textwrap

import pytest

from job_reports import free_port, reports
from launch import describe, worker
from runner_helpers import tuttirun

try:
    import tutti.numpy  # noqa: F401
except ImportError as exc:  # the core library is not built
    pytest.skip("the tutti core cannot be loaded: %s" % exc, allow_module_level=True)

def job(np_):
    return [sys.executable, worker("workers/horovod_job.py")]


@pytest.mark.parametrize("np_", [2, 3])
def test_master_host_and_port_place_the_rendezvous(np_):
    port = free_port()
    result = tuttirun(["-np", str(np_), "-hm", "127.0.0.1", "-p", str(port)] + job(np_),
                      timeout=120)
    assert result.returncode == 0, describe(result)
    lines = reports(result.stdout)
    assert sorted(lines) == list(range(np_)), describe(result)
    for fields in lines.values():
        assert fields[5] == "127.0.0.1:%d" % port
        assert float(fields[4]) == np_ * (np_ + 1) / 2


def test_master_host_that_is_not_this_machine_is_refused():
    result = tuttirun(["-np", "2", "-hm", "192.0.2.77", "-p", "29500", "python", "x.py"])
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "tuttirun: error: -hm 192.0.2.77 is not this machine: tuttirun hosts the rendezvous "
        "store on the master host, so run tuttirun there")


def test_master_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = tuttirun(["-np", "2", "-hm", "127.0.0.1", "-p", str(port)] + job(2))
    assert result.returncode == 2, describe(result)
    assert ("tuttirun: error: the rendezvous store cannot listen on 127.0.0.1:%d: Address "
            "already in use" % port) in result.stderr


@pytest.mark.parametrize("np_", [2, 3])
def test_cluster_groups_on_loopback_addresses(tmp_path, np_):
    # 127.0.0.1-127.0.0.3 are all this machine: three "hosts" of one rank each, every rank
    # started directly, the rendezvous on the first group's master.
    config = tmp_path / "horovod.yaml"
    config.write_text(textwrap.dedent("""
        cluster:
          - master: 127.0.0.1
            workers: 127.0.0.2-127.0.0.%d
        params:
          cycle_time_ms: 3
    """ % np_))
    port = free_port()
    result = tuttirun(["-np", str(np_), "-p", str(port), "--config-file", str(config)]
                      + job(np_), timeout=120)
    assert result.returncode == 0, describe(result)
    lines = reports(result.stdout)
    assert sorted(lines) == list(range(np_)), describe(result)
    for rank, fields in lines.items():
        assert fields[2:4] == (str(rank), str(np_))  # one host per rank
        assert fields[5] == "127.0.0.1:%d" % port and fields[6] == "3.0"


@pytest.mark.parametrize("np_", [2, 3])
def test_sectioned_config_file_under_mpi(tmp_path, np_):
    config = tmp_path / "horovod.yaml"
    config.write_text(textwrap.dedent("""
        controller: mpi
        params: {cycle_time_ms: 2}
        autotune: {enabled: false}
    """))
    result = tuttirun(["-np", str(np_), "--config-file", str(config), "--tcp"] + job(np_),
                      timeout=120)
    assert result.returncode == 0, describe(result)
    lines = reports(result.stdout)
    assert sorted(lines) == list(range(np_)), describe(result)
    for fields in lines.values():
        assert fields[5] == "-:-"  # no rendezvous store: mpirun started the ranks
        assert fields[6:] == ("2.0", "0", "1")


@pytest.mark.parametrize("mode", ["--gloo", "--mpi"])
def test_prefix_output_with_timestamp(mode):
    result = tuttirun(["-np", "2", mode, "--prefix-output-with-timestamp"] + job(2),
                      timeout=120)
    assert result.returncode == 0, describe(result)
    stamped = [line for line in result.stdout.splitlines() if "<stdout>: rank " in line]
    assert len(stamped) == 2, describe(result)
    for line in stamped:
        assert re.match(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} \[\d\]<stdout>: rank ",
                        line), line


@pytest.mark.parametrize("level, shown", [(None, True), ("WARNING", True), ("ERROR", False),
                                          ("fatal", False)])
def test_log_level_decides_whether_core_warnings_show(tmp_path, level, shown):
    unwritable = str(tmp_path / "no-such-dir" / "autotune.csv")
    args = ["-np", "2", "--autotune", "--autotune-log-file", unwritable]
    if level:
        args += ["--log-level", level]
    result = tuttirun(args + [sys.executable, worker("workers/autotune_warning.py")],
                      timeout=120)
    assert result.returncode == 0, describe(result)
    warned = "tutti: warning: cannot write TUTTI_AUTOTUNE_LOG file" in result.stderr
    assert warned == shown, describe(result)


def test_check_build_and_version_short_flags():
    built = tuttirun(["-cb"], timeout=300)
    assert built.returncode == 0 and "Available frameworks:" in built.stdout, describe(built)
    version = tuttirun(["-v"])
    assert version.returncode == 0 and re.match(r"^tutti v\S+$", version.stdout.strip())


def test_refused_flag_names_itself_on_the_command_line():
    result = tuttirun(["-np", "2", "--hierarchical-allgather", "python", "x.py"])
    assert result.returncode == 2
    assert result.stderr.startswith("tuttirun: error: --hierarchical-allgather is not "
                                    "supported: tutti has no hierarchical allgather")


@pytest.mark.parametrize("mode", ["--gloo", "--mpi"])
def test_thread_affinity_pins_each_local_ranks_core_thread(mode):
    # One CPU id per local rank, as Horovod reads HOROVOD_THREAD_AFFINITY.
    result = tuttirun(["-np", "2", mode, "--thread-affinity", "1,0", sys.executable,
                       worker("workers/thread_affinity.py")], timeout=120)
    assert result.returncode == 0, describe(result)
    assert "rank 0 local 0 core thread cpus=1" in result.stdout, describe(result)
    assert "rank 1 local 1 core thread cpus=0" in result.stdout, describe(result)


def test_thread_affinity_with_too_few_cpu_ids_fails_init():
    result = tuttirun(["-np", "2", "--thread-affinity", "0", sys.executable,
                       worker("workers/thread_affinity.py")], timeout=120)
    assert result.returncode != 0, describe(result)
    assert ("environment variable TUTTI_THREAD_AFFINITY='0' lists 1 CPU id(s) but this host "
            "runs 2 ranks: give one per local rank") in result.stderr, describe(result)
