"""Multi-host Gloo jobs for real: a second host in a network namespace.

The second host is a Linux network namespace joined to this one by a veth pair (both ends
named alike, as a cluster's hosts would share an interface name). No ssh server is
installed here, so workers/netns_ssh.sh stands in for ssh: it receives exactly the
arguments tuttirun gives ssh and runs the remote command in the namespace, in a new
session like sshd, so everything else is real: the store on the veth address, the remote
command line, secrets on stdin, remote_guard, and stopping over a closed connection.
The tests skip when namespaces cannot be created (not root, no iproute2).
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import runner_helpers
from runner_helpers import LiveJob, tuttirun, worker


def _ip(*args, namespace=None):
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run(prefix + ["ip"] + list(args), check=True, timeout=30,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def remote_host(tmp_path_factory):
    """(this host's address, the other host's address, interface name, env for tuttirun)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("setsid") is None:
        pytest.skip("network namespaces need root, iproute2 and setsid")
    tag = "%05d" % random.randrange(100000)
    namespace, iface, peer = "tutti%s" % tag, "tt%s" % tag, "tp%s" % tag
    subnet = "10.%d.%d" % (random.randrange(100, 250), random.randrange(1, 250))
    local, remote = subnet + ".1", subnet + ".2"
    try:
        _ip("netns", "add", namespace)
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip("cannot create a network namespace: %s" % exc)
    try:
        _ip("link", "add", iface, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", namespace)
        _ip("addr", "add", local + "/24", "dev", iface)
        _ip("link", "set", iface, "up")
        _ip("link", "set", peer, "name", iface, namespace=namespace)
        _ip("addr", "add", remote + "/24", "dev", iface, namespace=namespace)
        _ip("link", "set", iface, "up", namespace=namespace)
        _ip("link", "set", "lo", "up", namespace=namespace)
        bin_dir = tmp_path_factory.mktemp("bin")
        os.symlink(worker("netns_ssh.sh"), str(bin_dir / "ssh"))
        log = bin_dir / "ssh.log"
        log.write_text("")
        env = {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"]), "NETNS_SSH_HOST": remote,
               "NETNS_SSH_NAMESPACE": namespace, "NETNS_SSH_LOG": str(log)}
        yield local, remote, iface, env, log
    finally:
        subprocess.run(["ip", "netns", "del", namespace], timeout=30)
        subprocess.run(["ip", "link", "del", iface], timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fields_by_rank(stdout):
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"\[(\d+)\]<stdout>: (rank=.*)$", line)
        if match:
            found[int(match.group(1))] = dict(f.split("=", 1) for f in match.group(2).split())
    return found


def test_ranks_on_two_hosts(remote_host):
    local, remote, iface, env, log = remote_host
    result = tuttirun(["-np", "3", "-H", "%s:1,%s:2" % (local, remote), "--ssh-port", "22",
                       sys.executable, worker("print_env.py"), "two words"], env=env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    ranks = fields_by_rank(result.stdout)
    places = {r: (f["local_rank"], f["local_size"], f["cross_rank"], f["cross_size"])
              for r, f in ranks.items()}
    assert places == {0: ("0", "1", "0", "2"), 1: ("0", "2", "1", "2"), 2: ("1", "2", "1", "2")}
    for fields in ranks.values():
        assert fields["TUTTI_GLOO_RENDEZVOUS_ADDR"] == local
        assert fields["TUTTI_GLOO_IFACE"] == iface
        assert fields["secret_set"] == "True"
        assert fields["args"] == "two%20words"
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and all(call.startswith(remote + " cd ") for call in calls)
    assert all("-m tutti.runner.remote_guard" in call for call in calls)


def test_remote_ranks_reach_the_store_only_with_the_secret(remote_host):
    local, remote, _, env, _ = remote_host
    result = tuttirun(["-np", "2", "-H", "%s:1,%s:1" % (local, remote),
                       sys.executable, worker("store_probe.py")], env=env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(2):
        assert "rank %d wrong secret: status=2 closed=True" % rank in result.stdout
        assert "rank %d right secret: status=0" % rank in result.stdout
        assert "rank %d store address: %s" % (rank, local) in result.stdout
    assert "rank 0 loopback: refused" in result.stdout


def test_remote_failure_stops_the_local_ranks(remote_host):
    local, remote, _, env, _ = remote_host
    marker = runner_helpers.new_marker()
    try:
        started = time.monotonic()
        result = tuttirun(["-np", "3", "-H", "%s:2,%s:1" % (local, remote), sys.executable,
                           worker("stubborn.py"), marker, "--fail-rank", "2", "--code", "4"],
                          env=env, timeout=60)
        assert result.returncode == 4, result.stdout + result.stderr
        assert time.monotonic() - started < 6
        assert "tuttirun: rank 2 exited with code 4; stopping the other ranks" in result.stderr
        assert runner_helpers.wait_until_gone(marker, timeout=2) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_stopping_the_job_stops_remote_ranks(remote_host):
    local, remote, _, env, _ = remote_host
    marker = runner_helpers.new_marker()
    job = LiveJob(["-np", "3", "-H", "%s:1,%s:2" % (local, remote), sys.executable,
                   worker("stubborn.py"), marker], env=env)
    try:
        job.wait_for_output("ready", count=3)
        job.proc.send_signal(signal.SIGTERM)
        assert job.wait(20) == 128 + signal.SIGTERM, job.describe()
        # Remote ranks live in their own sessions: only remote_guard could stop them.
        assert runner_helpers.wait_until_gone(marker, timeout=5) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_unreachable_remote_host_fails_the_job(remote_host):
    local, _, _, env, _ = remote_host
    result = tuttirun(["-np", "2", "-H", "%s:1,192.0.2.123:1" % local, sys.executable, "-c",
                       "import time; time.sleep(30)"], env=env, timeout=60)
    assert result.returncode == 255
    assert "No route to host" in result.stderr
    assert "tuttirun: rank 1 exited with code 255; stopping the other ranks" in result.stderr


def test_gloo_allreduce_between_hosts(remote_host):
    try:
        import tutti.numpy as tnp
    except ImportError as exc:
        pytest.skip("the tutti core cannot be loaded: %s" % exc)
    if not tnp.gloo_built():
        pytest.skip("this core was built without Gloo")
    local, remote, _, env, _ = remote_host
    result = tuttirun(["-np", "3", "-H", "%s:2,%s:1" % (local, remote), sys.executable,
                       worker("numpy_allreduce.py")], env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[2]<stdout>: rank 2/3 controller=gloo local=0/1 cross=1/2 sum=6" in result.stdout
    assert "[0]<stdout>: rank 0/3 controller=gloo local=0/2 cross=0/2 sum=6" in result.stdout
