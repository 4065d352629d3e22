"""tutti.ray.RayExecutor on a local Ray cluster (one per module): real actors, the real
core in Gloo mode, tuttirun's store. Ray listens on 127.0.0.1 only."""

import os
import threading
import time
import warnings

import pytest

os.environ.update({
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # keep Ray on 127.0.0.1
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_worker_niceness": "0",  # actors at nice 15 start very slowly on a busy machine
})

import ray  # noqa: E402

import digits_job  # noqa: E402
import engine_checks  # noqa: E402
import tutti.runner  # noqa: E402
from tutti.ray import RayExecutor, RayHostDiscovery, ray_logger  # noqa: E402
from tutti.runner import WorkerError  # noqa: E402



@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    for attempt in (1, 2):
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False,
                     object_store_memory=256 * 1024 * 1024, _node_ip_address="127.0.0.1",
                     log_to_driver=False)
            break
        except Exception as exc:
            # Ray gives its raylet a fixed 30 s to start; on an overloaded machine that
            # is not always enough. One more try, then fail.
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise
    yield
    ray.shutdown()
    left = engine_checks.wait_for_no_descendants(timeout=30)
    assert not left, "left running after ray.shutdown(): %s" % left


@pytest.fixture(autouse=True)
def leaves_nothing_behind():
    with engine_checks.nothing_left_behind(lambda cmd: "TuttiRayWorker" in cmd, "actors"):
        yield


@pytest.fixture
def executor():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2,
                           cpus_per_worker=1)
    executor.start()
    yield executor
    pids = executor.worker_pids
    executor.shutdown()
    assert engine_checks.wait_until_gone(pids) == []


@pytest.fixture(scope="module")
def tuttirun_weights():
    """The digits weights of every rank, trained under tuttirun (tutti.runner.run)."""
    return tutti.runner.run(digits_job.train_digits, kwargs={"epochs": 2}, np=2)


def test_digits_train_to_the_same_weights_as_tuttirun(executor, tuttirun_weights):
    first = executor.run(digits_job.train_digits, kwargs={"epochs": 2})
    # The actors stay: a second run re-initialises tutti in them and trains again.
    second = executor.run(digits_job.train_digits, kwargs={"epochs": 2})
    for rank in range(2):
        engine_checks.assert_same_weights(tuttirun_weights[rank], first[rank])
        engine_checks.assert_same_weights(tuttirun_weights[rank], second[rank])


def test_results_come_in_rank_order_with_tuttiruns_environment(executor):
    def describe(tag):
        import os

        return {name: os.environ.get(name) for name in (
            "TUTTI_RANK", "TUTTI_SIZE", "TUTTI_LOCAL_RANK", "TUTTI_LOCAL_SIZE",
            "TUTTI_CROSS_SIZE", "HOROVOD_RANK", "TUTTI_CONTROLLER",
            "TUTTI_GLOO_RENDEZVOUS_ADDR", "TUTTI_GLOO_IFACE", "TUTTI_GLOO_SECRET")}, tag

    results = executor.run(describe, args=("x",))
    assert [env["TUTTI_RANK"] for env, _ in results] == ["0", "1"]
    for rank, (env, tag) in enumerate(results):
        assert tag == "x"
        assert env["HOROVOD_RANK"] == env["TUTTI_LOCAL_RANK"] == str(rank)
        assert env["TUTTI_SIZE"] == env["TUTTI_LOCAL_SIZE"] == "2"
        assert env["TUTTI_CROSS_SIZE"] == "1"
        assert env["TUTTI_CONTROLLER"] == "gloo"
        assert env["TUTTI_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"  # the store is local only
        assert env["TUTTI_GLOO_IFACE"] == "lo"
        assert len(env["TUTTI_GLOO_SECRET"]) == 32
    assert results[0][0]["TUTTI_GLOO_SECRET"] == results[1][0]["TUTTI_GLOO_SECRET"]
    ranks = executor.run(digits_job.first_allreduce)
    assert [(r, size, total) for r, size, total, _ in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]


class Counter:
    def __init__(self, start):
        self.value = start

    def bump(self):
        self.value += 1
        return self.value


def test_execute_calls_the_executable_on_every_rank():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_hosts=1,
                           num_workers_per_host=2)
    executor.start(executable_cls=Counter, executable_args=(10,),
                   extra_env_vars={"MY_SETTING": "on"})
    try:
        assert executor.execute(lambda counter: counter.bump()) == [11, 11]
        assert executor.execute_single(lambda counter: counter.bump()) == 12
        assert executor.run(lambda: __import__("os").environ["MY_SETTING"]) == ["on", "on"]
    finally:
        executor.shutdown()


def _run_in_thread(call):
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_a_killed_worker_ends_the_job_naming_its_rank(executor, tmp_path):
    pids = executor.worker_pids
    thread, outcome = _run_in_thread(lambda: executor.run(
        digits_job.train_digits, kwargs={"epochs": 100000, "pid_dir": str(tmp_path)}))
    killed_at = digits_job.kill_when_started(str(tmp_path), 1)
    thread.join(30)
    assert not thread.is_alive(), "the job still ran 30 s after rank 1 was killed"
    print("rank 1 killed; the job ended %.2f s later" % (time.monotonic() - killed_at))
    ended_in = time.monotonic() - killed_at
    error = outcome.get("error")
    assert isinstance(error, WorkerError), outcome
    assert error.rank == 1
    assert "rank 1: its Ray actor (pid %d) died" % pids[1] in str(error)
    assert ended_in < 30
    assert engine_checks.wait_until_gone(pids) == []  # the survivor was stopped too
    with pytest.raises(RuntimeError, match=r"after rank 1 failed; call start\(\) again"):
        executor.run(digits_job.first_allreduce)


def test_a_rank_that_raises_ends_the_job_naming_its_rank(executor):
    pids = executor.worker_pids
    with pytest.raises(WorkerError, match="rank 1: ValueError: rank 1 gives up") as caught:
        executor.run(digits_job.rank_that_raises, args=(1,))
    assert caught.value.rank == 1
    assert isinstance(caught.value.__cause__, ValueError)
    assert engine_checks.wait_until_gone(pids) == []  # rank 0 was blocked: it is stopped
    executor.start()  # the executor can be started again
    assert [rank for rank, _, _, _ in executor.run(digits_job.first_allreduce)] == [0, 1]


def test_callbacks_get_what_rank_0_logs_in_order(executor):
    seen, calls = [], []
    results = executor.run(digits_job.log_values,
                           callbacks=[seen.append, lambda value: calls.append(value["step"])])
    assert results == [0, 1]
    # rank 1 logged too, with chief_only=True: dropped on the worker.
    assert seen == [{"rank": 0, "step": step} for step in range(3)]
    assert calls == [0, 1, 2]  # every callback, with every value, in order
    everyone = []
    executor.execute(lambda _: digits_job.log_values(chief_only=False),
                     callbacks=(everyone.append,))
    for rank in (0, 1):
        assert [v for v in everyone if v["rank"] == rank] == [
            {"rank": rank, "step": step} for step in range(3)]
    assert len(everyone) == 6
    # Without callbacks the workers' log() calls are dropped and the run goes on.
    assert executor.run(digits_job.log_values) == [0, 1]


def test_logging_outside_an_executor_warns_once_and_drops_the_value():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ray_logger.log({"loss": 1.0})
        ray_logger.log({"loss": 0.5})
    assert [str(w.message) for w in caught] == [
        "tutti.ray.ray_logger.log: no callbacks are listening (the executor was given no "
        "callbacks, or this is not an executor's worker); the value is dropped"]


class EnoughLogs(Exception):
    pass


def test_a_callback_that_raises_stops_the_run_and_its_workers(executor):
    pids = executor.worker_pids
    seen = []

    def stop_at_the_second(value):
        seen.append(value)
        if len(seen) == 2:
            raise EnoughLogs("two values are enough")

    started = time.monotonic()
    with pytest.raises(EnoughLogs, match="two values are enough"):
        executor.run(digits_job.log_until_stopped, args=(60,), callbacks=[stop_at_the_second])
    assert time.monotonic() - started < 30  # not the 60 s the ranks would have logged for
    assert seen == [{"step": 0}, {"step": 1}]
    assert engine_checks.wait_until_gone(pids) == []
    with pytest.raises(RuntimeError, match=r"after a callback raised EnoughLogs; call "
                                           r"start\(\) again"):
        executor.run(digits_job.first_allreduce)


@pytest.mark.parametrize("callbacks, message", [
    ([print, 3], r"callbacks\[1\] is not callable: 3"),
    (print, "callbacks must be a list of callables, not <built-in function print>"),
])
def test_bad_callbacks_are_refused_with_the_reason(callbacks, message):
    executor = RayExecutor(RayExecutor.create_settings(), num_workers=2)
    with pytest.raises(ValueError, match=message):
        executor.run(digits_job.log_values, callbacks=callbacks)
    with pytest.raises(ValueError, match=message):
        executor.execute(lambda _: None, callbacks=callbacks)


def test_too_few_resources_end_in_a_timeout_that_says_what_is_missing():
    executor = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=2),
                           num_workers=3)
    with pytest.raises(TimeoutError, match=r"could not place 3 bundle\(s\) of \{'CPU': 1\} "
                                           r"\(PACK\) within 2 s; the cluster has CPU=2"):
        executor.start()
    deadline = time.monotonic() + 10  # the placement group was removed: CPUs come back
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2


@pytest.mark.parametrize("arguments, message", [
    ({"num_workers": 0}, "num_workers must be a positive integer, not 0"),
    ({"num_workers": 2, "num_hosts": 1}, "give either num_workers or num_hosts"),
    ({}, "give either num_workers or num_hosts"),
    ({"num_workers": 2, "cpus_per_worker": 0}, "cpus_per_worker must be positive, not 0"),
    ({"num_workers": 2, "min_workers": 1}, "give either min_workers .* or num_workers"),
])
def test_bad_arguments_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        RayExecutor(RayExecutor.create_settings(), **arguments)


def test_bad_settings_and_calls_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="timeout_s must be positive, not 0"):
        RayExecutor.create_settings(timeout_s=0)
    with pytest.raises(ValueError, match="nics must name exactly one network interface"):
        RayExecutor.create_settings(nics={"eth0", "eth1"})
    with pytest.raises(TypeError, match="settings must come from RayExecutor.create_settings"):
        RayExecutor({"timeout_s": 30}, num_workers=2)
    executor = RayExecutor(RayExecutor.create_settings(), num_workers=2)
    with pytest.raises(RuntimeError, match=r"not started; call start\(\) first"):
        executor.run(digits_job.first_allreduce)


def test_host_discovery_reports_this_node_and_its_slots():
    assert RayHostDiscovery().find_available_hosts_and_slots() == {"127.0.0.1": 2}
    assert RayHostDiscovery(cpus_per_slot=2)() == {"127.0.0.1": 1}
    assert RayHostDiscovery(cpus_per_slot=3)() == {}
    assert RayHostDiscovery(use_gpu=True)() == {}  # no GPU here


def test_nothing_listens_beyond_loopback(executor):
    # The engine, the driver's store and the ranks' Gloo pairs: all on 127.0.0.1.
    assert executor.run(digits_job.listeners_during_a_job, args=(os.getpid(),)) == [[], []]
    assert engine_checks.listeners_beyond_loopback(os.getpid()) == []
