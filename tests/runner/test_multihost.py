"""Multi-host Gloo jobs for real: a second host in a network namespace, reached over ssh.

The second host (netns_host.py) is a Linux network namespace joined to this one by a veth
pair, running a private OpenSSH server. tuttirun logs in to it with real ssh, so every
part of a remote rank's life is the real one: the store on the veth address, the remote
command line, secrets on stdin, sshd, remote_guard, and stopping over a closed connection.
The tests skip when namespaces cannot be created (not root, no iproute2).
"""

import re
import signal
import sys
import time
import urllib.parse

import pytest

import netns_host
import runner_helpers
from runner_helpers import LiveJob, tuttirun, worker


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


@pytest.fixture
def idle_host(host):
    """The host, checked to be left with nothing running but its sshd after the test."""
    yield host
    left = host.wait_until_idle(timeout=10)
    assert left == {}, "processes left in the namespace: %s" % left


def fields_by_rank(stdout):
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"\[(\d+)\]<stdout>: (rank=.*)$", line)
        if match:
            found[int(match.group(1))] = dict(f.split("=", 1) for f in match.group(2).split())
    return found


def test_ranks_on_two_hosts(idle_host):
    host = idle_host
    result = tuttirun(["-np", "3", "-H", "%s:1,%s:2" % (host.local, host.remote), "--verbose"]
                      + host.tuttirun_args()
                      + [sys.executable, worker("print_env.py"), "two words"], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr + host.log()
    ranks = fields_by_rank(result.stdout)
    places = {r: (f["local_rank"], f["local_size"], f["cross_rank"], f["cross_size"])
              for r, f in ranks.items()}
    assert places == {0: ("0", "1", "0", "2"), 1: ("0", "2", "1", "2"), 2: ("1", "2", "1", "2")}
    for fields in ranks.values():
        assert fields["TUTTI_GLOO_RENDEZVOUS_ADDR"] == host.local
        assert fields["TUTTI_GLOO_IFACE"] == host.iface
        assert fields["secret_set"] == "True"
        assert fields["args"] == "two%20words"
    # Ranks 1 and 2 run inside the namespace, started by its sshd; rank 0 runs here.
    remote_netns = host.netns_id()
    assert ranks[0]["netns"] != remote_netns and ranks[0]["ssh_connection"] == ""
    for rank in (1, 2):
        assert ranks[rank]["netns"] == remote_netns
        client, _, server, port = urllib.parse.unquote(ranks[rank]["ssh_connection"]).split()
        assert (client, server, port) == (host.local, host.remote, str(host.ssh_port))
    shown = [line for line in result.stderr.splitlines() if " on %s: ssh " % host.remote in line]
    assert len(shown) == 2 and all("-m tutti.runner.remote_guard" in line for line in shown)
    assert all("******" in line for line in shown)


def test_remote_ranks_reach_the_store_only_with_the_secret(idle_host):
    host = idle_host
    result = tuttirun(["-np", "2", "-H", "%s:1,%s:1" % (host.local, host.remote)]
                      + host.tuttirun_args() + [sys.executable, worker("store_probe.py")],
                      timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr + host.log()
    for rank in range(2):
        assert "rank %d wrong secret: status=2 closed=True" % rank in result.stdout
        assert "rank %d no secret: status=2 closed=True" % rank in result.stdout
        assert "rank %d right secret: status=0" % rank in result.stdout
        assert "rank %d store address: %s" % (rank, host.local) in result.stdout
    assert "rank 0 loopback: refused" in result.stdout


def test_remote_failure_stops_the_local_ranks(idle_host):
    host = idle_host
    marker = runner_helpers.new_marker()
    try:
        started = time.monotonic()
        result = tuttirun(["-np", "3", "-H", "%s:2,%s:1" % (host.local, host.remote)]
                          + host.tuttirun_args()
                          + [sys.executable, worker("stubborn.py"), marker,
                             "--fail-rank", "2", "--code", "4"], timeout=60)
        assert result.returncode == 4, result.stdout + result.stderr + host.log()
        assert time.monotonic() - started < 8
        assert "tuttirun: rank 2 exited with code 4; stopping the other ranks" in result.stderr
        assert runner_helpers.wait_until_gone(marker, timeout=3) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_local_failure_stops_the_remote_ranks(idle_host):
    host = idle_host
    marker = runner_helpers.new_marker()
    try:
        result = tuttirun(["-np", "3", "-H", "%s:1,%s:2" % (host.local, host.remote)]
                          + host.tuttirun_args()
                          + [sys.executable, worker("stubborn.py"), marker,
                             "--fail-rank", "0", "--code", "5"], timeout=60)
        assert result.returncode == 5, result.stdout + result.stderr + host.log()
        assert "tuttirun: rank 0 exited with code 5; stopping the other ranks" in result.stderr
        # The remote ranks and their children live in sessions of their own, under sshd:
        # only remote_guard, seeing its connection close, can stop them.
        assert runner_helpers.wait_until_gone(marker, timeout=8) == []
    finally:
        runner_helpers.kill_marked(marker)


@pytest.mark.parametrize("ignore_term", [False, True])
def test_stopping_the_job_stops_remote_ranks(idle_host, ignore_term):
    host = idle_host
    marker = runner_helpers.new_marker()
    job = LiveJob(["-np", "3", "-H", "%s:1,%s:2" % (host.local, host.remote),
                   "--stop-grace-seconds", "1"] + host.tuttirun_args()
                  + [sys.executable, worker("stubborn.py"), marker]
                  + (["--ignore-term"] if ignore_term else []))
    try:
        job.wait_for_output("ready", count=3)
        assert len(host.processes()) >= 4  # per rank: sshd session, remote_guard, rank, child
        job.proc.send_signal(signal.SIGTERM)
        assert job.wait(20) == 128 + signal.SIGTERM, job.describe()
        assert runner_helpers.wait_until_gone(marker, timeout=8) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_unreachable_remote_host_fails_the_job(idle_host):
    host = idle_host
    result = tuttirun(["-np", "2", "-H", "%s:1,%s:1" % (host.local, host.unreachable)]
                      + host.tuttirun_args()
                      + [sys.executable, "-c", "import time; time.sleep(30)"], timeout=60)
    assert result.returncode == 255, result.stdout + result.stderr
    assert "No route to host" in result.stderr
    assert "tuttirun: rank 1 exited with code 255; stopping the other ranks" in result.stderr


def test_gloo_allreduce_between_hosts(idle_host):
    try:
        import tutti.numpy as tnp
    except ImportError as exc:
        pytest.skip("the tutti core cannot be loaded: %s" % exc)
    if not tnp.gloo_built():
        pytest.skip("this core was built without Gloo")
    host = idle_host
    result = tuttirun(["-np", "3", "-H", "%s:2,%s:1" % (host.local, host.remote)]
                      + host.tuttirun_args() + [sys.executable, worker("numpy_allreduce.py")],
                      timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr + host.log()
    assert "[2]<stdout>: rank 2/3 controller=gloo local=0/1 cross=1/2 sum=6" in result.stdout
    assert "[0]<stdout>: rank 0/3 controller=gloo local=0/2 cross=0/2 sum=6" in result.stdout
    assert "[1]<stdout>: rank 1/3 controller=gloo local=1/2 cross=0/2 sum=6" in result.stdout
