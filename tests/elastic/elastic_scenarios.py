"""The elastic scenarios that the Keras, TensorFlow and MXNet tests run, as pytest tests.

A framework's test module imports the tests it runs (`from elastic_scenarios import *`
for all of them) and provides the fixture `train_script`, its worker script
(workers/*_train.py, the job of workers/global_batches.py); it may override
`job_seconds`, the deadline of each job (a job past it is killed and fails the test), and
`added_host_options`. The script trains in float64 on fixed global batches, each
worker on its equal part of every batch, so that each step applies the gradient of the
whole global batch whatever the job's size. The job's final weights must therefore equal
those of the same script run alone, without failures (`reference`), and every global batch
must be trained exactly once, by every rank of one generation, each sample once
(`check_training`). Steps of a generation that come after the point where the next
generation resumed were rolled back (a failure restores the last commit) and do not count.
"""

import collections
import sys

import pytest

import elastic_helpers as eh

SAMPLES, GLOBAL_BATCH, EPOCHS = 144, 24, 3
BATCHES = SAMPLES // GLOBAL_BATCH

__all__ = [
    "added_host_options", "job_seconds", "reference",
    "test_killed_worker_resumes_at_the_committed_batch",
    "test_added_host_joins_at_the_next_commit", "test_failing_host_is_blacklisted",
    "test_job_waits_for_min_np_workers", "test_failure_below_min_np_stops_the_survivors",
]


def finals(all_events):
    return {e["rank"]: e for e in all_events if e["event"] == "final"}


@pytest.fixture(scope="module")
def job_seconds():
    return 240


@pytest.fixture(scope="module")
def reference(train_script, job_seconds):
    """The weights of the script run alone (one process, no launcher, no failure)."""
    result = eh.launch.run([sys.executable, train_script], timeout=job_seconds)
    assert result.returncode == 0, result.stdout + result.stderr
    final = finals(eh.events("\n".join("[0]<stdout>: " + line
                                        for line in result.stdout.splitlines())))
    return final[0]["weights"]


def kept_steps(all_events):
    """The steps that count: those of each generation before the (epoch, batch) where a
    later generation resumed."""
    steps = [e for e in all_events if e["event"] == "step"]
    generations = sorted({s["gen"] for s in steps})
    kept = []
    for gen in generations:
        later = [(s["epoch"], s["batch"]) for s in steps if s["gen"] > gen]
        resumed = min(later) if later else (EPOCHS, 0)
        kept += [s for s in steps if s["gen"] == gen and (s["epoch"], s["batch"]) < resumed]
    return kept


def resume_points(all_events):
    """gen -> the (epoch, batch) its first step trained."""
    points = {}
    for step in (e for e in all_events if e["event"] == "step"):
        key = (step["epoch"], step["batch"])
        points[step["gen"]] = min(points.get(step["gen"], key), key)
    return points


def check_training(all_events, reference, expected_size):
    """Every rank of the last generation finished with the weights of a run without
    failures; every global batch of every epoch was trained once, each sample once."""
    final = finals(all_events)
    assert sorted(final) == list(range(expected_size)), final
    for rank, event in final.items():
        assert event["size"] == expected_size and event["epoch"] == EPOCHS, event
        for got, want in zip(event["weights"], reference):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (rank, got, want)
    by_batch = collections.defaultdict(list)
    for step in kept_steps(all_events):
        by_batch[(step["epoch"], step["batch"])].append(step)
    assert sorted(by_batch) == [(e, b) for e in range(EPOCHS) for b in range(BATCHES)], \
        sorted(by_batch)
    for (epoch, batch), steps in by_batch.items():
        size = steps[0]["size"]
        assert sorted(s["rank"] for s in steps) == list(range(size)), steps
        assert len({s["gen"] for s in steps}) == 1, steps
        samples = sorted(i for s in steps for i in s["indices"])
        assert samples == list(range(batch * GLOBAL_BATCH, (batch + 1) * GLOBAL_BATCH)), \
            (epoch, batch, samples)


def described(result):
    return "exit %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def added_host_options():
    """Options of the worker script in test_added_host_joins_at_the_next_commit."""
    return []


def test_killed_worker_resumes_at_the_committed_batch(tmp_path, train_script, reference,
                                                      job_seconds):
    """3 workers on 3 hosts; the one on 127.0.0.4 dies (SIGKILL) before batch 3 of epoch 1:
    the two others restore the commit after batch 1 and go on from batch 2 at size 2."""
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, train_script,
                     "--crash-host", "127.0.0.4", "--crash-epoch", "1", "--crash-batch", "3"],
                    timeout=job_seconds)
    assert result.returncode == 0, described(result)
    assert "was killed by SIGKILL" in result.stderr, described(result)
    assert "host 127.0.0.4 is blacklisted for the rest of the job" in result.stderr, \
        described(result)
    assert "generation 1: 2 worker(s) on 127.0.0.2:1, 127.0.0.3:1" in result.stderr, \
        described(result)
    all_events = eh.events(result.stdout)
    check_training(all_events, reference, expected_size=2)
    assert resume_points(all_events)[1] == (1, 2), described(result)
    lost = {(s["gen"], s["size"], s["epoch"], s["batch"]) for s in all_events
            if s["event"] == "step" and s not in kept_steps(all_events)}
    assert (0, 3, 1, 2) in lost and all(key[:3] == (0, 3, 1) for key in lost), lost


def test_added_host_joins_at_the_next_commit(tmp_path, train_script, reference, job_seconds,
                                             added_host_options):
    """2 workers; a third host appears in the discovery output: the job grows to 3 at a
    commit, keeps its state (nothing is trained twice) and syncs the new worker."""
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1"])
    job = eh.LiveJob(["--host-discovery-script", hosts.script, "--elastic-timeout", "60",
                      sys.executable, train_script, "--step-seconds", "0.2"]
                     + added_host_options)
    try:
        assert job.wait_for(lambda ev: any(e["event"] == "step" for e in ev), job_seconds / 2), \
            job.describe()
        hosts.write(["127.0.0.2:1", "127.0.0.3:1", "127.0.0.5:1"])
        result = job.finish(job_seconds)
    finally:
        job.kill()
    assert result.returncode == 0, described(result)
    assert "generation 1: 3 worker(s)" in result.stderr, described(result)
    all_events = eh.events(result.stdout)
    check_training(all_events, reference, expected_size=3)
    steps = [e for e in all_events if e["event"] == "step"]
    assert len(kept_steps(all_events)) == len(steps), "a host change rolled steps back"
    assert {s["size"] for s in steps} == {2, 3}, described(result)


def test_failing_host_is_blacklisted(tmp_path, train_script, reference, job_seconds):
    """A host whose worker fails at once is blacklisted for good; the job trains with the
    two others."""
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.6:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, train_script,
                     "--fail-host", "127.0.0.6"], timeout=job_seconds)
    assert result.returncode == 0, described(result)
    assert result.stderr.count("on 127.0.0.6 exited with code 3") == 1, described(result)
    assert "host 127.0.0.6 is blacklisted for the rest of the job" in result.stderr, \
        described(result)
    check_training(eh.events(result.stdout), reference, expected_size=2)


def test_job_waits_for_min_np_workers(tmp_path, train_script, reference, job_seconds):
    """One host of one slot and --min-np 2: tuttirun waits (no generation) until a second
    host appears within --elastic-timeout, then the job trains at size 2."""
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1"])
    job = eh.LiveJob(["--host-discovery-script", hosts.script, "--min-np", "2",
                      "--elastic-timeout", "120", sys.executable, train_script])
    try:
        assert job.wait_for_stderr("fewer than --min-np 2; waiting up to 120 s", job_seconds / 2), \
            job.describe()
        assert not eh.events("".join(job.lines)), job.describe()
        hosts.write(["127.0.0.2:1", "127.0.0.3:1"])
        result = job.finish(job_seconds)
    finally:
        job.kill()
    assert result.returncode == 0, described(result)
    assert "generation 0: 2 worker(s) on 127.0.0.2:1, 127.0.0.3:1" in result.stderr, \
        described(result)
    check_training(eh.events(result.stdout), reference, expected_size=2)


def test_failure_below_min_np_stops_the_survivors(tmp_path, train_script, job_seconds):
    """2 workers, --min-np 2; one dies: the survivor is stopped and tuttirun exits 1 with a
    message once --elastic-timeout (3 s) passes without a second host."""
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "3", sys.executable, train_script,
                     "--crash-host", "127.0.0.3", "--crash-epoch", "0", "--crash-batch", "2"],
                    timeout=job_seconds)
    assert result.returncode == 1, described(result)
    assert ("tuttirun: error: only 1 worker(s) available, fewer than --min-np 2, for 3 s "
            "(--elastic-timeout); stopping the job") in result.stderr, described(result)
    assert not finals(eh.events(result.stdout)), described(result)
