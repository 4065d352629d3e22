"""Elastic TensorFlow with a custom loop (tutti.tensorflow: DistributedGradientTape and
TensorFlowState) under tuttirun on simulated hosts: a killed worker (3 -> 2) and an added
host (2 -> 3), each checked against a run without failures (elastic_scenarios.py). The
other scenarios depend on the launcher alone and run for Keras in test_keras_elastic.py."""

import pytest

import elastic_helpers as eh
from elastic_scenarios import (  # noqa: F401  (the tests and fixtures this module runs)
    added_host_options,
    reference,
    test_added_host_joins_at_the_next_commit,
    test_killed_worker_resumes_at_the_committed_batch,
)


@pytest.fixture(scope="module")
def train_script():
    return eh.worker("tf_train.py")


@pytest.fixture(scope="module")
def job_seconds():
    return 300  # every worker starts TensorFlow, which takes long on a loaded machine
