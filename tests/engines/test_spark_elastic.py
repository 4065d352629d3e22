"""tutti.spark.run_elastic on local[3] (one session for the module): long-running Spark
tasks as slots, tutti's elastic driver, workers training with tutti.torch's
hvd.elastic.run (elastic_training.py). All tasks of local[3] are on one host."""

import os
import signal
import threading

import numpy
import pytest

import elastic_training
import engine_checks
import spark_session
import tutti.spark


@pytest.fixture(scope="module", autouse=True)
def spark():
    with spark_session.running("local[3]", "tutti-spark-elastic-test") as session:
        yield session


@pytest.fixture(autouse=True)
def leaves_nothing_behind():
    with engine_checks.nothing_left_behind(
            lambda command: "tutti.runner.task_worker" in command, "rank processes"):
        yield


def assert_trained_together(results, workers):
    assert [r["rank"] for r in results] == list(range(workers))
    assert [r["size"] for r in results] == [workers] * workers
    batches = results[0]["batch"]
    reference = elastic_training.reference_weights(batches)
    for result in results:
        assert result["batch"] == batches
        assert result["sizes"] == results[0]["sizes"] and len(result["sizes"]) == batches
        for name, value in reference.items():
            numpy.testing.assert_allclose(result["weights"][name], value, rtol=0, atol=1e-5)


def test_two_workers_train_and_return_in_rank_order():
    results = tutti.spark.run_elastic(elastic_training.train, kwargs={"batches": 6},
                                      num_proc=2, elastic_timeout=60, start_timeout=120)
    assert_trained_together(results, 2)
    assert results[0]["sizes"] == [2] * 6


def test_a_free_task_gets_a_worker_up_to_max_np():
    # The first generation has num_proc=2 workers; the third task then gets one (often
    # before the first two have trained a batch: they then start at the size of 3).
    results = tutti.spark.run_elastic(
        elastic_training.train, kwargs={"batches": 6, "final_size": 3}, num_proc=2,
        min_np=2, max_np=3, elastic_timeout=60, start_timeout=120)
    assert_trained_together(results, 3)
    sizes = results[0]["sizes"]
    assert sizes[-1] == 3 and sizes == sorted(sizes)


def test_a_killed_worker_on_the_only_host_stops_the_job_with_the_reason(tmp_path):
    # A failed worker blacklists its host; local[3] has one, so the job falls below
    # min_np and stops after elastic_timeout.
    def kill_a_worker():
        os.kill(int(elastic_training.wait_for_file(str(tmp_path / "127.0.0.1.pid"))),
                signal.SIGKILL)

    threading.Thread(target=kill_a_worker, daemon=True).start()
    with pytest.raises(RuntimeError, match=r"fewer than min_np 2, for 3 s \(elastic_timeout\)"):
        tutti.spark.run_elastic(elastic_training.train,
                                kwargs={"batches": 400, "progress_dir": str(tmp_path)},
                                num_proc=2, elastic_timeout=3, start_timeout=120)


@pytest.mark.parametrize("arguments, message", [
    ({"num_proc": 2, "min_np": 3}, r"need min_np <= num_proc <= max_np, not 3, 2, 2"),
    ({"num_proc": 2, "max_np": 1}, r"need min_np <= num_proc <= max_np, not 2, 2, 1"),
    ({"num_proc": 2, "min_np": 0}, "min_np must be a positive integer, not 0"),
    ({"num_proc": 2, "reset_limit": -1}, "reset_limit must be an integer of at least 0"),
    ({"num_proc": 2, "elastic_timeout": 0}, "elastic_timeout must be positive, not 0"),
    ({"num_proc": 2, "stdout": object()}, "stdout, stderr and prefix_output_with_timestamp"),
])
def test_bad_arguments_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        tutti.spark.run_elastic(elastic_training.train, **arguments)
