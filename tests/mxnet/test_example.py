"""The Gluon digits example trains to >= 0.9 validation accuracy on 2 ranks."""

import os
import re
import sys

import pytest
from launch import describe, run_ranks

EXAMPLE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
    "frameworks", "mxnet", "examples", "gluon_digits.py",
)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_gluon_digits_example(controller):
    result = run_ranks(2, [sys.executable, EXAMPLE], controller, timeout=180)
    assert result.returncode == 0, describe(result)
    assert "weights identical on all 2 ranks: yes" in result.stdout, describe(result)
    accuracy = float(re.search(r"final validation accuracy ([0-9.]+)", result.stdout).group(1))
    assert accuracy >= 0.9, describe(result)
