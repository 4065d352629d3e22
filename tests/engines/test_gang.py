"""The engine-neutral parts: rank placement, the store's address, host discovery from a
node list, and the messages when Ray or PySpark is missing. No engine is started."""

import subprocess
import sys

import pytest

from tutti.runner import gang, hosts
from tutti.runner.store_client import StoreClient


def test_ranks_of_one_host_are_consecutive_and_hosts_keep_their_order():
    assert gang.rank_order(["b", "a", "b", "a", "c"]) == [0, 2, 1, 3, 4]
    placed = gang.place(["b", "b", "a", "a", "c"])
    assert [(p.rank, p.host, p.local_rank, p.local_size, p.cross_rank, p.cross_size)
            for p in placed] == [(0, "b", 0, 2, 0, 3), (1, "b", 1, 2, 0, 3),
                                 (2, "a", 0, 2, 1, 3), (3, "a", 1, 2, 1, 3),
                                 (4, "c", 0, 1, 2, 3)]
    assert all(p.size == 5 and p.is_local for p in placed)


def test_same_placement_as_tuttirun_for_hosts_with_slots():
    tuttirun = hosts.place(4, [hosts.Host("a", 2), hosts.Host("b", 2)], {})
    assert [p[:7] for p in gang.place(["a", "a", "b", "b"])] == [p[:7] for p in tuttirun]


def test_the_store_listens_on_loopback_when_every_worker_is_local():
    assert gang.store_address("10.1.2.3", ["127.0.0.1", "127.0.0.1"]) == "127.0.0.1"
    assert gang.store_address("10.1.2.3", ["10.1.2.3"]) == "127.0.0.1"
    assert gang.store_address("192.0.2.10", ["192.0.2.10", "192.0.2.11"]) == "192.0.2.10"
    assert gang.interface_towards("127.0.0.1") == "lo"


def test_the_driver_store_speaks_tuttiruns_protocol_and_checks_the_secret():
    store = gang.DriverStore("127.0.0.1")
    try:
        env = store.endpoint.worker_environment(gang.place(["h", "h"])[1], "lo", {"A": 1})
        assert env["TUTTI_RANK"] == "1" and env["TUTTI_CONTROLLER"] == "gloo"
        assert env["A"] == "1" and env["TUTTI_GLOO_IFACE"] == "lo"
        assert env["TUTTI_GLOO_SECRET"] == env["TUTTI_RUN_SECRET"] == store.secret
        with StoreClient("127.0.0.1", store.port, store.secret) as client:
            client.set("k", b"v")
            assert client.get("k") == b"v"
        with StoreClient("127.0.0.1", store.port, "wrong") as client:
            with pytest.raises(Exception, match=r"refused GET .k. \(status 2\)"):
                client.get("k")
    finally:
        store.close()


def _without(package, statement):
    code = "import sys; sys.modules[%r] = None\n%s" % (package, statement)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_missing_ray_is_named_with_the_package_to_install():
    result = _without("ray", "import tutti.ray")
    assert result.returncode != 0
    assert 'ImportError: tutti.ray needs Ray: pip install "ray[default]"' in result.stderr


def test_missing_pyspark_is_named_with_the_package_to_install():
    result = _without("pyspark", "import tutti.spark")
    assert result.returncode != 0
    assert ("ImportError: tutti.spark needs PySpark (and Java 17 or newer): pip install "
            "pyspark") in result.stderr


NODES = [
    {"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 8.0, "GPU": 2.0}},
    {"Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 3.0}},
    {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 64.0}},
]


def test_host_discovery_counts_slots_of_live_nodes():
    from tutti.ray.discovery import hosts_and_slots

    assert hosts_and_slots(NODES) == {"10.0.0.1": 8, "10.0.0.2": 3}
    assert hosts_and_slots(NODES, cpus_per_slot=2) == {"10.0.0.1": 4, "10.0.0.2": 1}
    assert hosts_and_slots(NODES, cpus_per_slot=0.5) == {"10.0.0.1": 16, "10.0.0.2": 6}
    assert hosts_and_slots(NODES, use_gpu=True) == {"10.0.0.1": 2}
    assert hosts_and_slots(NODES, use_gpu=True, cpus_per_slot=4, gpus_per_slot=1) == {
        "10.0.0.1": 2}
    with pytest.raises(ValueError, match="cpus_per_slot must be positive, not 0"):
        hosts_and_slots(NODES, cpus_per_slot=0)
    with pytest.raises(ValueError, match="gpus_per_slot must be positive with use_gpu"):
        hosts_and_slots(NODES, use_gpu=True, gpus_per_slot=0)


def test_the_listener_check_sees_a_socket_beyond_loopback():
    import os
    import socket

    import engine_checks

    with socket.socket() as loopback, socket.socket() as everywhere:
        loopback.bind(("127.0.0.1", 0))
        loopback.listen(1)
        everywhere.bind(("0.0.0.0", 0))
        everywhere.listen(1)
        port = everywhere.getsockname()[1]
        found = engine_checks.listeners_beyond_loopback(os.getpid())
    assert [(address, port) for _, _, address, port in found] == [("0.0.0.0", port)]


def test_the_rank_that_failed_is_named_not_the_peers_that_lost_it():
    from tutti.runner import serialization
    from tutti.runner.task_worker import RESULT_KEY

    aborted = "tutti.common.exceptions.AbortedError: shared-memory group: rank 1 exited"
    store = gang.DriverStore("127.0.0.1")
    try:
        assert store.first_failure(3, grace_s=0.1) is None
        store._server.set(gang.FAILURE_KEY % 0, serialization.dumps((1.0, aborted, "")))
        only_peers = store.first_failure(3, grace_s=0.2)  # no cause arrives: the loss it is
        assert only_peers.rank == 0 and "AbortedError" in str(only_peers)
        # The failing rank's own record arrives later (its task noticed later): it wins.
        store._server.set(gang.FAILURE_KEY % 2, serialization.dumps(
            (2.0, "the worker process was killed by SIGKILL", "")))
        error = store.first_failure(3)
        assert (error.rank, str(error)) == (2, "rank 2: the worker process was killed by SIGKILL")
        # An error result alone (its task was stopped before recording a failure) counts.
        store._server.set(RESULT_KEY % 1, serialization.dumps(
            ("error", "ValueError: bad", "Traceback ...", None)))
        assert store.first_failure(3).rank == 2  # recorded failures come first
    finally:
        store.close()
    assert gang.is_consequence(aborted)
    assert not gang.is_consequence("ValueError: AbortedError in a message")
