"""Response cache, fusion, timeline, stall inspector and autotune, observed through the
counters, the trace file and the ranks' output, on 2 and 3 ranks under MPI and Gloo."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import launch

WORKER = launch.worker("workers/performance.py")
CONTROLLERS = ["mpi", "gloo"]


def run(scenario, controller, np_=2, env=None, args=(), timeout=120):
    result = launch.run_ranks(np_, [sys.executable, WORKER, scenario] + list(args),
                              controller=controller, env=env, timeout=timeout)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d: ok" % rank in result.stdout, launch.describe(result)
    return result


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("np_", [2, 3])
def test_cache_serves_repeats_and_a_changed_shape_invalidates(controller, np_):
    run("cache", controller, np_)


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_cache_capacity_zero_disables_the_cache(controller):
    run("nocache", controller, env={"TUTTI_CACHE_CAPACITY": "0"})


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("np_", [2, 3])
def test_fusion_keeps_interleaved_dtypes_ops_and_scales_apart(controller, np_):
    run("fusion", controller, np_)


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("np_", [2, 3])
def test_blocking_calls_run_their_cycles_on_the_calling_thread(controller, np_):
    run("caller", controller, np_)


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("np_", [2, 3])
def test_a_step_split_over_cycles_opens_the_next_cycle_at_once(controller, np_):
    run("followup", controller, np_, env={"TUTTI_SHM": "on"}, args=["yes"])


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_ranks_waiting_for_a_late_rank_do_not_burn_a_cpu(controller):
    run("latewait", controller, np_=3, env={"TUTTI_SHM": "on"})


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("shm", ["on", "off"])
def test_ranks_taking_turns_on_one_cpu_move_apart(controller, shm):
    run("cpushare", controller, env={"TUTTI_SHM": shm}, args=["yes" if shm == "on" else "no"])


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_without_shared_memory_in_flight_requests_wait_for_the_cycle_time(controller):
    run("followup", controller, env={"TUTTI_SHM": "off"}, args=["no"])


def load_trace(path):
    with open(path) as f:
        events = json.load(f)  # must be valid JSON
    rows = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    spans = [(rows[e["tid"]], e["name"]) for e in events if e.get("ph") == "X"]
    return rows, spans


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_timeline_from_the_environment_and_at_run_time(controller, tmp_path):
    from_init = str(tmp_path / "init.json")
    at_run_time = str(tmp_path / "runtime.json")
    run("timeline", controller, env={"TUTTI_TIMELINE": from_init}, args=[at_run_time])
    rows, spans = load_trace(from_init)
    assert "before.timeline" in rows.values(), rows
    assert ("before.timeline", "negotiate") in spans and ("before.timeline", "allreduce") in spans
    rows, spans = load_trace(at_run_time)
    assert "before.timeline" not in rows.values() and "after.timeline" not in rows.values()
    for what in ["negotiate", "queued", "allreduce"]:
        assert ("traced.allreduce", what) in spans, spans
    assert ("traced.allgather", "allgather") in spans, spans
    assert any(name.startswith("traced.fused.") for name, _ in spans), spans


def wait_until_unchanged(path, quiet_seconds, limit_seconds):
    deadline = time.time() + limit_seconds
    last = None
    while time.time() < deadline:
        stat = os.stat(path)
        now = (stat.st_size, stat.st_mtime_ns)
        if now == last:
            return
        last = now
        time.sleep(quiet_seconds)
    raise AssertionError("%s was still being written %d s after the job was killed"
                         % (path, limit_seconds))


def test_timeline_stays_valid_json_when_the_job_is_killed(tmp_path):
    path = str(tmp_path / "killed.json")
    argv = launch.launcher_command(2, "mpi") + [sys.executable, WORKER, "forever"]
    env = dict(os.environ, TUTTI_TIMELINE=path, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(path) and os.path.getsize(path) > 2000:
                break
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    # mpirun's ranks may outlive it for a moment (they are not all in its process group):
    # read the trace once nothing writes it any more, not while rank 0 is still appending.
    wait_until_unchanged(path, quiet_seconds=1.0, limit_seconds=30)
    rows, spans = load_trace(path)
    assert ("forever", "allreduce") in spans


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_stall_warning_on_every_rank_names_the_missing_rank(controller):
    result = run("stall", controller, env={"TUTTI_STALL_CHECK_TIME_SECONDS": "1"})
    for rank in range(2):
        lines = [l for l in result.stderr.splitlines() if "rank %d: stall" % rank in l]
        assert lines, launch.describe(result)
        assert "'late' (missing rank 1)" in lines[0], lines[0]
        assert "TUTTI_STALL_CHECK_TIME_SECONDS" in lines[0], lines[0]


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_stall_shutdown_time_turns_a_stall_into_an_error(controller):
    result = run("stalldie", controller, np_=3, env={"TUTTI_STALL_CHECK_TIME_SECONDS": "1",
                                                      "TUTTI_STALL_SHUTDOWN_TIME_SECONDS": "2"})
    for rank in (0, 2):
        line = [l for l in result.stdout.splitlines() if "rank %d: PreconditionError" % rank in l]
        assert line, launch.describe(result)
        assert "waited more than 2 s for rank 1" in line[0], line[0]
        assert "TUTTI_STALL_SHUTDOWN_TIME_SECONDS" in line[0], line[0]


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_autotune_converges_and_every_rank_agrees(controller, tmp_path):
    log = str(tmp_path / "autotune.csv")
    result = run("autotune", controller, env={
        "TUTTI_AUTOTUNE": "1", "TUTTI_AUTOTUNE_LOG": log, "TUTTI_AUTOTUNE_WARMUP_SAMPLES": "1",
        "TUTTI_AUTOTUNE_STEPS_PER_SAMPLE": "3", "TUTTI_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "8",
    }, timeout=240)
    assert "rank 0: setting" in result.stdout, launch.describe(result)
    with open(log) as f:
        lines = f.read().splitlines()
    assert lines[0].split(",")[1:4] == ["cycle_time_ms", "fusion_threshold_bytes",
                                        "cache_enabled"], lines[0]
    samples = [l for l in lines[1:] if not l.startswith("best")]
    assert len(samples) == 8, lines
    assert lines[-1].startswith("best"), lines


@pytest.mark.parametrize("variable, value, expected", [
    ("TUTTI_CACHE_CAPACITY", "lots", "TUTTI_CACHE_CAPACITY='lots' is not an integer"),
    ("TUTTI_FUSION_THRESHOLD", "-1",
     "TUTTI_FUSION_THRESHOLD='-1' is out of range: it must be a number from 0 to"),
    ("TUTTI_AUTOTUNE", "yes", "TUTTI_AUTOTUNE='yes' is not a switch: use 1 (on) or 0 (off)"),
    ("TUTTI_STALL_CHECK_TIME_SECONDS", "0", "is out of range: it must be a number from 0.001"),
    ("TUTTI_SHM", "maybe", "TUTTI_SHM='maybe' is not one of auto, on, off"),
    ("TUTTI_HIERARCHICAL_ALLREDUCE", "on", "TUTTI_HIERARCHICAL_ALLREDUCE='on' is not a switch"),
])
def test_bad_tuning_values_fail_init_naming_the_variable(variable, value, expected):
    code = "import tutti.numpy as hvd\ntry:\n    hvd.init()\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    result = launch.run([sys.executable, "-c", code], env={variable: value})
    assert "InvalidArgumentError" in result.stdout and expected in result.stdout, \
        launch.describe(result)
