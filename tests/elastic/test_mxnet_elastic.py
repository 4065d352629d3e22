"""Elastic MXNet Gluon (tutti.mxnet, MXNetState and a resumable training loop) under
tuttirun on simulated hosts, 2 and 3 workers: the scenarios of elastic_scenarios.py."""

import pytest

import elastic_helpers as eh
from elastic_scenarios import (  # noqa: F401  (the tests and fixtures this module runs)
    added_host_options,
    reference,
    test_added_host_joins_at_the_next_commit,
    test_failing_host_is_blacklisted,
    test_failure_below_min_np_stops_the_survivors,
    test_job_waits_for_min_np_workers,
    test_killed_worker_resumes_at_the_committed_batch,
)


@pytest.fixture(scope="module")
def train_script():
    return eh.worker("mxnet_train.py")


@pytest.fixture(scope="module")
def job_seconds():
    return 240
