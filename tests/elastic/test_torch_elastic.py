"""Elastic torch jobs under tuttirun (Gloo), on simulated hosts (see elastic_helpers.py).

Every job has a deadline (launch.run / LiveJob.finish kill the whole job after it).
"""

import sys
import time

import pytest
import torch

import elastic_helpers as eh

sys.path.insert(0, eh.os.path.join(eh.HERE, "workers"))
import torch_train  # noqa: E402  (the worker's dataset and model, for the reference run)

TRAIN = eh.worker("torch_train.py")
JOB_SECONDS = 240


def new_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def finals(all_events):
    return {e["rank"]: e for e in all_events if e["event"] == "final"}


def check_training(all_events, expected_size):
    final = finals(all_events)
    assert sorted(final) == list(range(expected_size)), final
    steps = eh.kept_steps(all_events)
    eh.check_each_sample_once(steps, torch_train.SAMPLES, 3)
    reference = eh.replay(steps, torch_train.new_model, new_optimizer, torch_train.dataset())
    for rank, event in final.items():
        for got, want in zip(event["weights"], reference):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (rank, got, want)
    return steps


def test_killed_worker_job_continues_from_last_commit(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, TRAIN,
                     "--crash-host", "127.0.0.4", "--crash-epoch", "1", "--crash-batch", "3"],
                    timeout=JOB_SECONDS)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "was killed by SIGKILL" in result.stderr, described
    assert "host 127.0.0.4 is blacklisted for the rest of the job" in result.stderr, described
    assert "generation 1: 2 worker(s) on 127.0.0.2:1, 127.0.0.3:1" in result.stderr, described
    all_events = eh.events(result.stdout)
    steps = check_training(all_events, expected_size=2)
    # The failure rolled back one uncommitted step (batch 2 of epoch 1 at size 3) and the
    # step the survivors had begun (batch 3); the remaining 72 samples of epoch 1 went to
    # the two survivors.
    sizes = {(s["epoch"], s["size"]) for s in steps}
    assert sizes == {(0, 3), (1, 3), (1, 2), (2, 2)}, sizes
    lost = [s for s in all_events if s["event"] == "step" and s not in steps]
    assert {(s["gen"], s["epoch"], s["pos"]) for s in lost} == {(0, 1, 24), (0, 1, 36)}, lost


def test_killed_worker_on_another_host_aborts_shared_memory_peers(tmp_path):
    # 127.0.0.2 runs two workers that allreduce through shared memory within their host and
    # over Gloo to the third; when the third dies, the host's Gloo leader fails and must
    # abort its shared-memory peer at once (the abort word). The transports' timeouts are
    # 600 s, beyond the job's deadline: a survivor left to its timeout fails the test.
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:2", "127.0.0.3:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, TRAIN,
                     "--crash-host", "127.0.0.3", "--crash-epoch", "1", "--crash-batch", "3"],
                    env={"TUTTI_SHM": "on", "TUTTI_GLOO_TIMEOUT_SECONDS": "600"},
                    timeout=JOB_SECONDS)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "generation 1: 2 worker(s) on 127.0.0.2:2" in result.stderr, described
    all_events = eh.events(result.stdout)
    check_training(all_events, expected_size=2)
    assert len([e for e in all_events if e["event"] == "reset"]) == 2, described


def test_hung_worker_is_removed_and_the_job_continues(tmp_path):
    # The worker on 127.0.0.4 stops (SIGSTOP) mid-epoch: the survivors' collectives fail
    # at the Gloo timeout (5 s here); the hung worker never joins the next generation, so
    # tuttirun stops it, blacklists its host and re-forms without it.
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", "--stop-grace-seconds", "1", sys.executable,
                     TRAIN, "--crash-host", "127.0.0.4", "--crash-epoch", "1",
                     "--crash-batch", "3", "--crash-signal", "SIGSTOP"],
                    env={"TUTTI_GLOO_TIMEOUT_SECONDS": "5"}, timeout=JOB_SECONDS)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "did not join generation 1 within 10 s of the others; stopping it" in result.stderr, \
        described
    assert "host 127.0.0.4 is blacklisted for the rest of the job" in result.stderr, described
    assert "generation 2: 2 worker(s) on 127.0.0.2:1, 127.0.0.3:1" in result.stderr, described
    check_training(eh.events(result.stdout), expected_size=2)


def test_added_host_joins_at_the_next_commit(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1"])
    job = eh.LiveJob(["--host-discovery-script", hosts.script, "--elastic-timeout", "60",
                      sys.executable, TRAIN, "--step-seconds", "0.05"])
    try:
        assert job.wait_for(lambda ev: any(e["event"] == "step" for e in ev), 120), \
            job.describe()
        # The launcher listens on one port only, the job's authenticated store (the
        # workers' rendezvous): no driver service of its own.
        assert len(eh.listening_ports(job.proc.pid)) == 1, eh.listening_ports(job.proc.pid)
        hosts.write(["127.0.0.2:1", "127.0.0.3:1", "127.0.0.5:1"])
        result = job.finish(JOB_SECONDS)
    finally:
        if job.proc.poll() is None:
            eh.os.killpg(job.proc.pid, 9)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "generation 1: 3 worker(s)" in result.stderr, described
    all_events = eh.events(result.stdout)
    steps = check_training(all_events, expected_size=3)
    # Nothing was rolled back: the job re-formed at a commit, keeping the state.
    assert len(steps) == len([e for e in all_events if e["event"] == "step"])
    grown = [s for s in steps if s["size"] == 3]
    assert grown and all(s["gen"] >= 1 for s in grown)
    # The new worker started from the synced state, not from its own initialisation.
    assert len({tuple(map(tuple, e["weights"])) for e in finals(all_events).values()}) == 1


def test_removed_host_retires_its_worker_at_the_next_commit(tmp_path):
    # Hosts listed without slots get --slots-per-host 2; --max-np 3 caps the first
    # generation at 3 of the 4 slots. When 127.0.0.3 leaves the discovery output, its
    # worker leaves with the others at the next commit and exits with status 0.
    hosts = eh.Hosts(tmp_path, ["127.0.0.2", "127.0.0.3"])
    job = eh.LiveJob(["--host-discovery-script", hosts.script, "--slots-per-host", "2",
                      "--max-np", "3", "--elastic-timeout", "60", sys.executable, TRAIN,
                      "--step-seconds", "0.05"])
    try:
        assert job.wait_for(lambda ev: any(e["event"] == "step" for e in ev), 120), \
            job.describe()
        hosts.write(["127.0.0.2"])
        result = job.finish(JOB_SECONDS)
    finally:
        job.kill()
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "generation 0: 3 worker(s) on 127.0.0.2:2, 127.0.0.3:1" in result.stderr, described
    assert "worker 2 on 127.0.0.3 retired (host removed)" in result.stderr, described
    assert "generation 1: 2 worker(s) on 127.0.0.2:2" in result.stderr, described
    assert "is no longer needed; exiting" in result.stderr, described
    all_events = eh.events(result.stdout)
    steps = check_training(all_events, expected_size=2)
    assert len(steps) == len([e for e in all_events if e["event"] == "step"]), described


def test_failing_host_is_blacklisted(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.6:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, TRAIN,
                     "--epochs", "1", "--fail-host", "127.0.0.6"], timeout=JOB_SECONDS)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert result.stderr.count("on 127.0.0.6 exited with code 3") == 1, described
    assert "host 127.0.0.6 is blacklisted for the rest of the job" in result.stderr, described
    assert sorted(finals(eh.events(result.stdout))) == [0, 1], described


def test_blacklisted_host_returns_after_cooldown_until_reset_limit(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.6:1"])
    started = time.monotonic()
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--blacklist-cooldown-range", "1", "1", "--reset-limit", "2",
                     sys.executable, TRAIN, "--step-seconds", "0.2",
                     "--fail-host", "127.0.0.6"], timeout=JOB_SECONDS)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 1, described
    assert "host 127.0.0.6 is blacklisted for 1.0 s" in result.stderr, described
    assert "host 127.0.0.6 is no longer blacklisted" in result.stderr, described
    assert ("error: the job would be re-formed for the 3rd time, more than --reset-limit 2 "
            "allows; stopping the job") in result.stderr, described
    assert time.monotonic() - started < JOB_SECONDS


def test_fewer_than_min_np_stops_with_a_clear_error(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1"])
    started = time.monotonic()
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "3", sys.executable, TRAIN], timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert ("tuttirun: error: only 1 worker(s) available, fewer than --min-np 2, for 3 s "
            "(--elastic-timeout); stopping the job") in result.stderr, result.stderr
    assert took < 30, took


def test_failure_below_min_np_stops_the_survivors(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "3", sys.executable, TRAIN,
                     "--crash-host", "127.0.0.3", "--crash-epoch", "0", "--crash-batch", "2"],
                    timeout=90)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 1, described
    assert "fewer than --min-np 2, for 3 s" in result.stderr, described
    assert not finals(eh.events(result.stdout)), described


@pytest.mark.parametrize("args, message", [
    (["--min-np", "2", "true"], "--min-np needs --host-discovery-script"),
    (["--host-discovery-script", "/nonexistent/discover", "true"],
     "cannot run host discovery script /nonexistent/discover"),
    (["--host-discovery-script", "SCRIPT", "--min-np", "3", "--max-np", "2", "true"],
     "--min-np 3 is larger than --max-np 2"),
    (["--host-discovery-script", "SCRIPT", "--mpi", "true"],
     "elastic training (--host-discovery-script) needs the Gloo controller, not --mpi"),
    (["--host-discovery-script", "SCRIPT", "--blacklist-cooldown-range", "5", "1", "true"],
     "--blacklist-cooldown-range 5 1: LOW is larger than HIGH"),
])
def test_bad_elastic_settings_are_named(tmp_path, args, message):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1"])
    args = [hosts.script if a == "SCRIPT" else a for a in args]
    result = eh.run(args, timeout=30)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_bad_discovery_output_is_named(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:x"])
    result = eh.run(["--host-discovery-script", hosts.script, "true"], timeout=30)
    assert result.returncode == 2, result.stderr
    assert "host discovery script %s, line 1" % hosts.script in result.stderr, result.stderr
    assert "slot count 'x' is not an integer" in result.stderr, result.stderr


@pytest.mark.parametrize("launcher", [[], ["-np", "2"]])
def test_elastic_script_runs_unchanged_outside_elastic_mode(launcher):
    # Alone (no launcher) and under a fixed-size tuttirun job: run() syncs and returns.
    if launcher:
        result = eh.run(launcher + [sys.executable, TRAIN, "--epochs", "1"], timeout=120)
    else:
        result = eh.launch.run([sys.executable, TRAIN, "--epochs", "1"], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [l for l in result.stdout.splitlines() if '"final"' in l]
    assert len(lines) == (2 if launcher else 1), result.stdout
