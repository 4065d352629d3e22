"""Elastic MXNet Gluon (tutti.mxnet) under tuttirun: a worker killed mid-epoch."""

import sys

import elastic_helpers as eh

TRAIN = eh.worker("mxnet_train.py")


def test_killed_worker_mxnet_job_continues(tmp_path):
    hosts = eh.Hosts(tmp_path, ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"])
    result = eh.run(["--host-discovery-script", hosts.script, "--min-np", "2",
                     "--elastic-timeout", "60", sys.executable, TRAIN,
                     "--crash-host", "127.0.0.4"], timeout=300)
    described = "exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 0, described
    assert "was killed by SIGKILL" in result.stderr, described
    assert "generation 1: 2 worker(s) on 127.0.0.2:1, 127.0.0.3:1" in result.stderr, described
    events = eh.events(result.stdout)
    finals = {e["rank"]: e for e in events if e["event"] == "final"}
    assert sorted(finals) == [0, 1], described
    assert all(e["epoch"] == 3 and e["size"] == 2 for e in finals.values()), finals
    assert finals[0]["weights"] == finals[1]["weights"]
    # The survivors went back to the commit after batch 2 of epoch 1 and went on from
    # batch 2 at size 2: nothing before the commit was done twice, nothing after it skipped.
    resumed = sorted((e["epoch"], e["batch"]) for e in events
                     if e["event"] == "step" and e["gen"] == 1 and e["rank"] == 0)
    assert resumed[0] == (1, 2), resumed
    assert resumed == [(1, b) for b in range(2, 6)] + [(2, b) for b in range(6)], resumed
