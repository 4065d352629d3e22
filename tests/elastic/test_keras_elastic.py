"""Elastic Keras (tutti.tensorflow.keras) under tuttirun: a worker killed mid-epoch."""

import sys

import elastic_helpers as eh

TRAIN = eh.worker("keras_train.py")


def test_killed_worker_keras_job_continues(tmp_path):
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
    # Both survivors hold the same weights (synced, then trained in lockstep).
    assert finals[0]["weights"] == finals[1]["weights"]
    # Epoch 1 ran again at size 2 from its start (Keras restarts the committed epoch).
    starts = {(e["gen"], e["size"], e["epoch"]) for e in events if e["event"] == "epoch"}
    assert (0, 3, 1) in starts and (1, 2, 1) in starts and (1, 2, 2) in starts, starts
    assert (1, 2, 0) not in starts, starts
