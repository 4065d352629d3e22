"""Jobs whose workers run collectives through the tutti core (tutti.numpy allreduce)."""

import re
import sys

import pytest

from runner_helpers import tuttirun, worker

try:
    import tutti.numpy as tnp
except ImportError as exc:  # the core library is not built
    pytestmark = pytest.mark.skip(reason="the tutti core cannot be loaded: %s" % exc)
    tnp = None

ALLREDUCE = [sys.executable, worker("numpy_allreduce.py")]


def reports(stdout):
    return {int(m.group(1)): m.group(0) for m in re.finditer(
        r"^\[\d+\]<stdout>: rank (\d+)/\d+ .*$", stdout, re.M)}


@pytest.mark.parametrize("np", [2, 3])
def test_gloo_allreduce(np):
    if not tnp.gloo_built():
        pytest.skip("this core was built without Gloo")
    result = tuttirun(["-np", str(np)] + ALLREDUCE, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = reports(result.stdout)
    assert sorted(lines) == list(range(np)), result.stdout
    for rank, line in lines.items():
        assert "controller=gloo local=%d/%d cross=0/1 sum=%d" % (rank, np, np * (np + 1) // 2) \
            in line


def test_gloo_allreduce_across_two_host_entries():
    if not tnp.gloo_built():
        pytest.skip("this core was built without Gloo")
    result = tuttirun(["-np", "3", "-H", "localhost:1,127.0.0.1:2"] + ALLREDUCE, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = reports(result.stdout)
    assert "local=0/1 cross=0/2 sum=6" in lines[0]
    assert "local=1/2 cross=1/2 sum=6" in lines[2]


def test_mpi_allreduce():
    if not tnp.mpi_built():
        pytest.skip("this core was built without MPI")
    result = tuttirun(["--mpi", "-np", "2"] + ALLREDUCE, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = reports(result.stdout)
    assert all("controller=mpi" in line and "sum=3" in line for line in lines.values())


def _allreduce_rank():
    import numpy

    import tutti.numpy as hvd

    hvd.init()
    try:
        return float(hvd.allreduce(numpy.array([hvd.rank() + 1.0]), op=hvd.Sum)[0])
    finally:
        hvd.shutdown()


def test_run_api_with_collectives():
    from tutti.runner import run

    if not tnp.gloo_built():
        pytest.skip("this core was built without Gloo")
    assert run(_allreduce_rank, np=3) == [6.0, 6.0, 6.0]
