"""tutti.spark.run on local-cluster[2,1,1024]: two executor JVMs, one slot each, as on a
real cluster (tasks in separate executors, results through the driver's store)."""

import pytest

import digits_job
import engine_checks
import spark_session
import tutti.spark


@pytest.fixture(scope="module", autouse=True)
def spark():
    with spark_session.running("local-cluster[2,1,1024]", "tutti-spark-cluster-test") as session:
        yield session


def test_two_executors_run_one_rank_each():
    before = engine_checks.tutti_segments()
    results = tutti.spark.run(digits_job.first_allreduce, num_proc=2, start_timeout=120)
    assert [(r, size, total) for r, size, total, _ in results] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert engine_checks.segments_left(before) == set()
