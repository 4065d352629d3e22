"""Elastic Keras (tutti.tensorflow.keras, model.fit with the elastic callbacks) under
tuttirun on simulated hosts, 2 and 3 workers: the scenarios of elastic_scenarios.py."""

import pytest

import elastic_helpers as eh
from elastic_scenarios import *  # noqa: F401,F403  (the tests and fixtures this module runs)


@pytest.fixture(scope="module")
def train_script():
    return eh.worker("keras_train.py")


@pytest.fixture(scope="module")
def job_seconds():
    return 300  # every worker starts TensorFlow, which takes long on a loaded machine


@pytest.fixture(scope="module")
def added_host_options():
    return ["--horovod-epochs"]  # fit called as Horovod's examples call it
