"""The introduction's command line across two real hosts: -hm and -p with a `cluster:`
config file, the second host a network namespace reached over ssh (tests/runner's
netns_host; skips without root or iproute2)."""

import sys
import textwrap

import pytest

import netns_host
from job_reports import free_port, reports
from launch import describe, worker
from runner_helpers import tuttirun


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    try:
        remote = netns_host.start(tmp_path_factory.mktemp("netns_host"))
    except netns_host.Unavailable as exc:
        pytest.skip(str(exc))
    try:
        yield remote
    finally:
        remote.close()


@pytest.mark.parametrize("np_", [2, 3])
def test_cluster_master_and_port_across_two_hosts(host, tmp_path, np_):
    config = tmp_path / "horovod.yaml"
    config.write_text(textwrap.dedent("""
        cluster:
          - master: %s
            workers: %s:2
    """ % (host.local, host.remote)))
    port = free_port()
    # -i and --ssh-port reach the namespace's sshd; -p is the master port here.
    result = tuttirun(["-np", str(np_), "-hm", host.local, "-p", str(port), "--config-file",
                       str(config), "--ssh-port", str(host.ssh_port), "-i", host.identity_file,
                       sys.executable, worker("workers/horovod_job.py")], timeout=120)
    assert result.returncode == 0, describe(result) + host.log()
    lines = reports(result.stdout)
    assert sorted(lines) == list(range(np_)), describe(result)
    for rank, fields in lines.items():
        assert fields[5] == "%s:%d" % (host.local, port)
        assert fields[2:4] == ("0" if rank == 0 else "1", "2")  # cross rank / cross size
        assert float(fields[4]) == np_ * (np_ + 1) / 2
