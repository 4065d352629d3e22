"""tutti.spark.run on local[2] (one session for the module): barrier tasks, the real core
in Gloo mode, tuttirun's store. Spark listens on 127.0.0.1 only."""

import os
import threading
import time

import pytest

import digits_job
import engine_checks
import spark_session
import tutti.runner
import tutti.spark
from tutti.runner import WorkerError


def _is_rank_process(command):
    return "tutti.runner.task_worker" in command


@pytest.fixture(scope="module", autouse=True)
def spark():
    with spark_session.running("local[2]", "tutti-spark-test") as session:
        yield session


@pytest.fixture(autouse=True)
def leaves_nothing_behind():
    before = engine_checks.tutti_segments()
    yield
    left = engine_checks.wait_for_no_descendants(_is_rank_process)
    assert not left, "rank processes left running: %s" % left
    assert engine_checks.segments_left(before) == set()


def test_digits_train_to_the_same_weights_as_tuttirun():
    expected = tutti.runner.run(digits_job.train_digits, kwargs={"epochs": 2}, np=2)
    actual = tutti.spark.run(digits_job.train_digits, kwargs={"epochs": 2}, num_proc=2)
    for rank in range(2):
        engine_checks.assert_same_weights(expected[rank], actual[rank])


def test_results_come_in_rank_order_with_tuttiruns_environment():
    def describe(tag):
        import os

        return {name: os.environ.get(name) for name in (
            "TUTTI_RANK", "TUTTI_SIZE", "TUTTI_LOCAL_RANK", "HOROVOD_RANK", "TUTTI_CONTROLLER",
            "TUTTI_GLOO_RENDEZVOUS_ADDR", "TUTTI_GLOO_IFACE", "MY_SETTING")}, tag

    results = tutti.spark.run(describe, args=("x",), num_proc=2, env={"MY_SETTING": "on"})
    for rank, (env, tag) in enumerate(results):
        assert tag == "x"
        assert env == {"TUTTI_RANK": str(rank), "TUTTI_SIZE": "2", "TUTTI_LOCAL_RANK": str(rank),
                       "HOROVOD_RANK": str(rank), "TUTTI_CONTROLLER": "gloo",
                       "TUTTI_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", "TUTTI_GLOO_IFACE": "lo",
                       "MY_SETTING": "on"}
    ranks = tutti.spark.run(digits_job.first_allreduce, num_proc=2)
    assert [(r, size, total) for r, size, total, _ in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]


def test_a_killed_worker_ends_the_job_naming_its_rank(tmp_path):
    outcome = {}

    def job():
        try:
            outcome["value"] = tutti.spark.run(
                digits_job.train_digits, kwargs={"epochs": 100000, "pid_dir": str(tmp_path)},
                num_proc=2)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    killed_at = digits_job.kill_when_started(str(tmp_path), 1)
    thread.join(30)
    assert not thread.is_alive(), "the job still ran 30 s after rank 1 was killed"
    print("rank 1 killed; the job ended %.2f s later" % (time.monotonic() - killed_at))
    assert time.monotonic() - killed_at < 30
    error = outcome.get("error")
    assert isinstance(error, WorkerError), outcome
    assert error.rank == 1
    assert str(error).startswith("rank 1: the worker process was killed by SIGKILL")


def test_a_rank_that_raises_ends_the_job_naming_its_rank():
    with pytest.raises(WorkerError, match="rank 1: ValueError: rank 1 gives up") as caught:
        tutti.spark.run(digits_job.rank_that_raises, args=(1,), num_proc=2)
    assert caught.value.rank == 1
    assert isinstance(caught.value.__cause__, ValueError)
    assert "raise ValueError" in caught.value.traceback


def test_too_few_slots_are_refused_up_front():
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"num_proc=3 needs 3 concurrent Spark task slots but "
                                         r"the cluster \(master local\[2\], spark.task.cpus=1\) "
                                         r"offers 2 after 1 s; use num_proc <= 2"):
        tutti.spark.run(digits_job.first_allreduce, num_proc=3, start_timeout=1)
    assert time.monotonic() - started < 30  # not Spark's own 10-minute retry loop


@pytest.mark.parametrize("arguments, message", [
    ({"num_proc": 0}, "num_proc must be a positive integer, not 0"),
    ({"num_proc": 2, "use_mpi": True}, "Gloo mode only"),
    ({"num_proc": 2, "extra_mpi_args": "-x FOO"}, "does not use mpirun"),
    ({"num_proc": 2, "stdout": object()}, "output goes to the Spark executors' logs"),
    ({"num_proc": 2, "start_timeout": -1}, "start_timeout must be positive, not -1"),
    ({"num_proc": 2, "nics": ["lo", "eth0"]}, "nics must name exactly one network interface"),
])
def test_bad_arguments_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        tutti.spark.run(digits_job.first_allreduce, **arguments)


def test_num_proc_defaults_to_the_default_parallelism():
    assert [rank for rank, _, _, _ in tutti.spark.run(digits_job.first_allreduce)] == [0, 1]


def test_nothing_listens_beyond_loopback():
    # The engine, the driver's store and the ranks' Gloo pairs: all on 127.0.0.1.
    found = tutti.spark.run(digits_job.listeners_during_a_job, args=(os.getpid(),),
                            num_proc=2)
    assert found == [[], []]
    assert engine_checks.listeners_beyond_loopback(os.getpid()) == []
