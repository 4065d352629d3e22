"""Elastic training on a real local Ray cluster of three nodes (ray.cluster_utils.Cluster):
the head on 127.0.0.1 and nodes on 127.0.0.2 and 127.0.0.3, one CPU (one slot) each, so
every node is a host of its own, as tests/elastic simulates hosts with loopback addresses.
ElasticRayExecutor and RayExecutor(min_workers=...) run tutti's elastic driver with Ray's
node list as host discovery and one actor per worker; the workers train with
tutti.torch's hvd.elastic.run (elastic_training.py)."""

import os
import signal
import threading
import warnings

import pytest

os.environ.update({
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_worker_niceness": "0",  # actors at nice 15 start very slowly on a busy machine
})

import numpy  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import digits_job  # noqa: E402
import elastic_training  # noqa: E402
import engine_checks  # noqa: E402
from tutti.ray import ElasticRayExecutor, RayExecutor  # noqa: E402

NODE_OPTIONS = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024}
EXTRA_NODES = ("127.0.0.2", "127.0.0.3")
# Bounds every job: a worker waits at most this long for a generation, and the job stops
# when it has fewer than its minimum of workers for this long.
ELASTIC_TIMEOUT = 60


class Nodes:
    """The cluster and its extra nodes, added and removed as a test needs."""

    def __init__(self):
        for attempt in (1, 2):
            try:
                self.cluster = Cluster(initialize_head=True, connect=False, head_node_args=dict(
                    NODE_OPTIONS, node_ip_address="127.0.0.1", include_dashboard=False))
                break
            except Exception as exc:
                # Ray gives its raylet a fixed 30 s to start, not always enough on an
                # overloaded machine: one more try, then fail.
                if attempt == 2 or "timed out during startup" not in str(exc):
                    raise
        self.extra = {}

    def want(self, addresses):
        """Makes the extra nodes exactly `addresses` (the head always stays)."""
        for address in [a for a in self.extra if a not in addresses]:
            self.remove(address)
        for address in addresses:
            if address not in self.extra:
                self.extra[address] = self.cluster.add_node(node_ip_address=address,
                                                            **NODE_OPTIONS)
        self.cluster.wait_for_nodes(timeout=60)

    def remove(self, address):
        self.cluster.remove_node(self.extra.pop(address))


@pytest.fixture(scope="module")
def nodes():
    nodes = Nodes()
    ray.init(address=nodes.cluster.address, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    yield nodes
    ray.shutdown()
    nodes.cluster.shutdown()
    left = engine_checks.wait_for_no_descendants(timeout=30)
    assert not left, "left running after the cluster's shutdown: %s" % left


@pytest.fixture(autouse=True)
def leaves_nothing_behind():
    with engine_checks.nothing_left_behind(lambda cmd: "TuttiRayWorker" in cmd, "actors"):
        yield


def settings(**overrides):
    values = dict(min_num_proc=2, elastic_timeout=ELASTIC_TIMEOUT, timeout_s=60, verbose=1)
    values.update(overrides)
    return ElasticRayExecutor.create_settings(**values)


def run(executor, **kwargs):
    return run_function(executor, lambda: elastic_training.train(**kwargs))


def run_function(executor, fn):
    executor.start()
    return executor.run(fn)


def assert_trained_together(results, workers, nodes):
    """`workers` results in rank order, one per node, equal weights that match plain SGD
    over the batches done (so no committed step was lost or applied twice)."""
    assert [r["rank"] for r in results] == list(range(workers))
    assert [r["size"] for r in results] == [workers] * workers
    assert sorted(r["node"] for r in results) == sorted(nodes)
    batches = results[0]["batch"]
    reference = elastic_training.reference_weights(batches)
    for result in results:
        assert result["batch"] == batches
        assert result["sizes"] == results[0]["sizes"]
        assert len(result["sizes"]) == batches
        for name, value in reference.items():
            numpy.testing.assert_allclose(result["weights"][name], value, rtol=0, atol=1e-5)


def test_two_workers_train_and_return_in_rank_order(nodes):
    nodes.want(EXTRA_NODES[:1])
    executor = ElasticRayExecutor(settings(max_num_proc=2), cpus_per_slot=1)
    results = run(executor, batches=6)
    assert_trained_together(results, 2, ["127.0.0.1", "127.0.0.2"])
    assert results[0]["sizes"] == [2] * 6
    assert results[0]["resets"] == []


def test_a_killed_actor_of_three_leads_to_a_reset_and_training_goes_on(nodes, tmp_path):
    nodes.want(EXTRA_NODES)
    executor = ElasticRayExecutor(settings(max_num_proc=3), cpus_per_slot=1)
    killed = {}

    def kill_the_worker_on_the_third_node():
        pid = int(elastic_training.wait_for_file(str(tmp_path / "127.0.0.3.pid")))
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    killer = threading.Thread(target=kill_the_worker_on_the_third_node, daemon=True)
    killer.start()
    results = run(executor, batches=8, final_size=2, progress_dir=str(tmp_path))
    killer.join(5)
    assert "pid" in killed
    assert engine_checks.wait_until_gone([killed["pid"]]) == []
    assert_trained_together(results, 2, ["127.0.0.1", "127.0.0.2"])
    sizes = results[0]["sizes"]
    assert sizes[0] == 3 and sizes[-1] == 2 and sizes == sorted(sizes, reverse=True)
    assert results[0]["resets"][-1] == 2


def test_a_node_that_joins_gets_a_worker_up_to_max_np(nodes, tmp_path):
    nodes.want(EXTRA_NODES[:1])
    executor = ElasticRayExecutor(settings(max_num_proc=3), cpus_per_slot=1)
    outcome = {}

    def train():  # Ray adds nodes from the main thread only: the job runs in this one
        try:
            outcome["results"] = run(executor, batches=8, final_size=3,
                                     progress_dir=str(tmp_path))
        except BaseException as exc:
            outcome["error"] = exc

    job = threading.Thread(target=train, daemon=True)
    job.start()
    elastic_training.wait_for_file(str(tmp_path / "127.0.0.1.pid"))
    nodes.want(EXTRA_NODES)
    job.join(300)
    assert not job.is_alive(), "the job still ran 300 s after the node joined"
    assert "error" not in outcome, outcome
    results = outcome["results"]
    assert_trained_together(results, 3, ["127.0.0.1", "127.0.0.2", "127.0.0.3"])
    sizes = results[0]["sizes"]
    assert sizes[0] == 2 and sizes[-1] == 3 and sizes == sorted(sizes)


def store_and_gloo_addresses(driver):
    """In the middle of a job: this worker's store address and Gloo interface, and (rank 0)
    what the driver process itself listens on beyond 127.0.0.1."""
    import numpy
    import os

    import tutti.numpy as hvd

    hvd.init()
    hvd.allreduce(numpy.ones(1), name="before")
    own = [entry for entry in engine_checks.listeners_beyond_loopback(driver)
           if entry[0] == driver] if hvd.rank() == 0 else []
    hvd.allreduce(numpy.ones(1), name="after")
    return (os.environ["TUTTI_GLOO_RENDEZVOUS_ADDR"], os.environ["TUTTI_GLOO_IFACE"], own)


def test_the_store_and_gloo_stay_on_loopback(nodes):
    # Ray's own processes of a cluster_utils node listen on every address; tutti's store
    # (in the driver) and the workers' Gloo pairs (interface lo) stay on 127.0.0.1.
    nodes.want(EXTRA_NODES[:1])
    executor = ElasticRayExecutor(settings(max_num_proc=2))
    driver = os.getpid()
    found = run_function(executor, lambda: store_and_gloo_addresses(driver))
    assert found == [("127.0.0.1", "lo", []), ("127.0.0.1", "lo", [])]


def test_a_node_that_leaves_takes_its_worker_and_training_goes_on(nodes, tmp_path):
    nodes.want(EXTRA_NODES)
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           max_workers=3, cpus_per_worker=1, elastic_timeout=ELASTIC_TIMEOUT)

    def remove_a_node():
        elastic_training.wait_for_file(str(tmp_path / "127.0.0.3.pid"))
        nodes.remove("127.0.0.3")

    remover = threading.Thread(target=remove_a_node, daemon=True)
    remover.start()
    executor.start()
    results = executor.run(elastic_training.train,
                           kwargs={"batches": 8, "final_size": 2,
                                   "progress_dir": str(tmp_path)})
    remover.join(60)
    executor.shutdown()
    assert_trained_together(results, 2, ["127.0.0.1", "127.0.0.2"])
    assert results[0]["sizes"][0] == 3 and results[0]["sizes"][-1] == 2


def test_fewer_slots_than_min_np_stop_the_job_with_the_reason(nodes):
    nodes.want(EXTRA_NODES[:1])
    executor = ElasticRayExecutor(settings(min_num_proc=3, elastic_timeout=3))
    with pytest.raises(RuntimeError, match=r"only 2 worker\(s\) available, fewer than "
                                           r"min_num_proc 3, for 3 s \(elastic_timeout\)"):
        run(executor, batches=2)


def test_workers_that_all_raise_end_the_job_with_their_error(nodes):
    nodes.want(EXTRA_NODES[:1])
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           elastic_timeout=3)
    executor.start()
    with pytest.raises(RuntimeError, match=r"(?s)fewer than min_workers 2.*ValueError: "
                                           r"worker of rank \d gives up"):
        executor.run(elastic_training.raise_on_every_worker)


def test_reset_limit_stops_the_job_at_the_first_reset_too_many(nodes, tmp_path):
    nodes.want(EXTRA_NODES)
    executor = ElasticRayExecutor(settings(max_num_proc=3, reset_limit=0))

    def kill_the_worker_on_the_third_node():
        os.kill(int(elastic_training.wait_for_file(str(tmp_path / "127.0.0.3.pid"))),
                signal.SIGKILL)

    threading.Thread(target=kill_the_worker_on_the_third_node, daemon=True).start()
    with pytest.raises(RuntimeError, match=r"re-formed for the 1st time, more than "
                                           r"reset_limit 0 allows"):
        run(executor, batches=8, final_size=2, progress_dir=str(tmp_path))


@pytest.mark.parametrize("arguments, message", [
    ({"min_num_proc": 0}, "min_num_proc must be a positive integer, not 0"),
    ({"min_num_proc": 3, "max_num_proc": 2}, "max_num_proc 2 is smaller than min_num_proc 3"),
    ({"reset_limit": -1}, "reset_limit must be an integer of at least 0, not -1"),
    ({"elastic_timeout": 0}, "elastic_timeout must be a positive number of seconds, not 0"),
    ({"timeout_s": 0}, "timeout_s must be positive, not 0"),
    ({"cooldown_range": (5, 1)}, r"cooldown_range must be \(low, high\) with 0 <= low"),
    ({"nics": {"eth0", "eth1"}}, "nics must name exactly one network interface"),
    ({"min_num_proc": 2, "min_np": 3}, "give min_num_proc or min_np, not both"),
])
def test_bad_elastic_settings_are_refused_with_the_reason(arguments, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match=message):
            ElasticRayExecutor.create_settings(**arguments)


def test_min_np_and_max_np_are_deprecated_spellings():
    with pytest.warns(DeprecationWarning, match="min_np is deprecated"):
        made = ElasticRayExecutor.create_settings(min_np=2, max_np=4)
    assert (made.min_num_proc, made.max_num_proc) == (2, 4)
    assert (made.min_np, made.max_np) == (2, 4)


@pytest.mark.parametrize("arguments, message", [
    ({"gpus_per_slot": 1}, "gpus_per_slot is set, but use_gpu is False"),
    ({"cpus_per_slot": 0}, "cpus_per_slot must be positive, not 0"),
    ({"override_discovery": False}, "override_discovery=False needs settings.discovery"),
])
def test_bad_executor_arguments_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        ElasticRayExecutor(settings(), **arguments)


@pytest.mark.parametrize("arguments, message", [
    ({"max_workers": 2}, "max_workers is given without a positive min_workers"),
    ({"min_workers": 2, "num_workers": 2}, "give either min_workers .* or num_workers"),
    ({"min_workers": 0}, "min_workers must be a positive integer, not 0"),
    ({"min_workers": 3, "max_workers": 2}, "max_workers 2 is smaller than min_workers 3"),
    ({"min_workers": 2, "cooldown_range": (1,)}, "cooldown_range must be two whole numbers"),
])
def test_bad_elastic_ray_executor_arguments_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        RayExecutor(RayExecutor.create_settings(), **arguments)


def test_elastic_ray_executor_refuses_what_it_cannot_do(nodes):
    executor = RayExecutor(RayExecutor.create_settings(), min_workers=2)
    with pytest.raises(RuntimeError, match=r"not started; call start\(\) first"):
        executor.run(elastic_training.train)
    executor.start()
    with pytest.raises(NotImplementedError, match="run_remote is not available in elastic"):
        executor.run_remote(elastic_training.train)
    with pytest.raises(NotImplementedError, match="execute_single is not available"):
        executor.execute_single(lambda executable: None)
    assert executor.worker_pids == []


def test_callbacks_get_what_the_rank_0_worker_logs(nodes):
    nodes.want(EXTRA_NODES[:1])
    executor = ElasticRayExecutor(settings(max_num_proc=2))
    seen = []
    executor.start()
    assert executor.run(digits_job.log_values, callbacks=[seen.append]) == [0, 1]
    assert seen == [{"rank": 0, "step": step} for step in range(3)]


class EnoughLogs(Exception):
    pass


def test_a_callback_that_raises_stops_the_elastic_job(nodes):
    nodes.want(EXTRA_NODES[:1])
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           max_workers=2, elastic_timeout=ELASTIC_TIMEOUT)

    def stop(value):
        raise EnoughLogs("one value is enough: %r" % (value,))

    executor.start()
    # The workers log for 60 s unless stopped; nothing_left_behind checks their actors end.
    with pytest.raises(EnoughLogs, match=r"one value is enough: \{'step': 0\}"):
        executor.run(digits_job.log_until_stopped, args=(60,), callbacks=[stop])
    executor.shutdown()


@pytest.mark.parametrize("callbacks, message", [
    ([print, "not a function"], r"callbacks\[1\] is not callable: 'not a function'"),
    ({"on_log": print}, "callbacks must be a list of callables"),
])
def test_bad_callbacks_are_refused_with_the_reason(nodes, callbacks, message):
    executor = ElasticRayExecutor(settings())
    executor.start()
    with pytest.raises(ValueError, match=message):
        executor.run(digits_job.log_values, callbacks=callbacks)
    executor = RayExecutor(RayExecutor.create_settings(), min_workers=2)
    executor.start()
    with pytest.raises(ValueError, match=message):
        executor.run(digits_job.log_values, callbacks=callbacks)
    with pytest.raises(ValueError, match=message):
        executor.execute(lambda _: None, callbacks=callbacks)
