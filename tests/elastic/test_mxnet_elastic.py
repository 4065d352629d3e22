"""Elastic MXNet Gluon (tutti.mxnet, MXNetState and a resumable training loop) under
tuttirun on simulated hosts, 2 and 3 workers: the scenarios of elastic_scenarios.py."""

import pytest

import elastic_helpers as eh
from elastic_scenarios import *  # noqa: F401,F403  (the tests and fixtures this module runs)


@pytest.fixture(scope="module")
def train_script():
    return eh.worker("mxnet_train.py")
