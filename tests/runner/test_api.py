"""tutti.runner.run: functions on N ranks, results in rank order, worker errors raised."""

import os

import pytest

from tutti.runner import WorkerError, run


def rank_and_size(offset, scale=1):
    return (int(os.environ["TUTTI_RANK"]) + offset) * scale, int(os.environ["TUTTI_SIZE"])


def fail_on_rank_one():
    if os.environ["TUTTI_RANK"] == "1":
        raise ValueError("rank one refuses")
    return "fine"


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no pickling")


def raise_unpicklable():
    raise Unpicklable("odd error")


def test_results_in_rank_order():
    assert run(rank_and_size, args=(10,), kwargs={"scale": 2}, np=3) == [
        (20, 3), (22, 3), (24, 3)]


def test_lambdas_and_closures_travel_by_value():
    base = {"value": 7}
    assert run(lambda: base["value"] + int(os.environ["TUTTI_RANK"]), np=2) == [7, 8]


def test_settings_and_env_reach_the_workers():
    def read():
        return os.environ.get("TUTTI_CYCLE_TIME"), os.environ.get("MY_SETTING")

    assert run(read, np=2, cycle_time_ms=5, env={"MY_SETTING": "x"}) == [("5.0", "x")] * 2


def test_worker_error_is_raised_with_its_traceback(capfd):
    with pytest.raises(WorkerError) as caught:
        run(fail_on_rank_one, np=3)
    error = caught.value
    assert error.rank == 1
    assert "rank 1: ValueError: rank one refuses" in str(error)
    assert "Traceback (most recent call last)" in error.traceback
    assert "in fail_on_rank_one" in error.traceback
    assert isinstance(error.__cause__, ValueError)
    assert "tuttirun: rank 1 exited with code 1" in capfd.readouterr().err


def test_unpicklable_exception_still_reports_its_text():
    with pytest.raises(WorkerError, match="Unpicklable: odd error") as caught:
        run(raise_unpicklable, np=2)
    assert caught.value.__cause__ is None
    assert "raise_unpicklable" in caught.value.traceback


def test_unpicklable_result_is_an_error():
    with pytest.raises(WorkerError, match="cannot be pickled"):
        run(lambda: (x for x in range(3)), np=2)


def test_worker_that_dies_without_a_result():
    with pytest.raises(WorkerError, match="rank 0: exited with code 137 before reporting"):
        run(lambda: os.kill(os.getpid(), 9) if os.environ["TUTTI_RANK"] == "0" else None, np=2)


def test_mpi_mode():
    def mpi_rank():
        return int(os.environ["OMPI_COMM_WORLD_RANK"]), os.environ["TUTTI_CONTROLLER"]

    assert run(mpi_rank, np=2, use_mpi=True) == [(0, "mpi"), (1, "mpi")]


def test_bad_settings():
    with pytest.raises(TypeError, match="unexpected setting 'fusion'"):
        run(len, args=("x",), np=1, fusion=3)
    with pytest.raises(ValueError, match="must be at least 1"):
        run(len, args=("x",), np=0)
    with pytest.raises(ValueError, match="more processes than the 1 slot"):
        run(len, args=("x",), np=2, hosts="localhost:1")
