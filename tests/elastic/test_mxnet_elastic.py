"""Elastic MXNet Gluon (tutti.mxnet, MXNetState and a resumable training loop) under
tuttirun on simulated hosts: the scenarios of elastic_scenarios.py, 2 and 3 workers."""

import pytest

import elastic_helpers as eh
import elastic_scenarios as scenarios

TRAIN = eh.worker("mxnet_train.py")
# Each job starts MXNet in every worker.
JOB_SECONDS = 240


@pytest.fixture(scope="module")
def reference():
    return scenarios.reference_weights(TRAIN, JOB_SECONDS)


def test_killed_worker_resumes_at_the_committed_batch(tmp_path, reference):
    scenarios.killed_worker(tmp_path, TRAIN, reference, JOB_SECONDS)


def test_added_host_joins_at_the_next_commit(tmp_path, reference):
    scenarios.added_host(tmp_path, TRAIN, reference, JOB_SECONDS)


def test_failing_host_is_blacklisted(tmp_path, reference):
    scenarios.failing_host(tmp_path, TRAIN, reference, JOB_SECONDS)


def test_job_waits_for_min_np_workers(tmp_path, reference):
    scenarios.waits_for_min_np(tmp_path, TRAIN, reference, JOB_SECONDS)


def test_failure_below_min_np_stops_the_survivors(tmp_path):
    scenarios.below_min_np(tmp_path, TRAIN, JOB_SECONDS)
