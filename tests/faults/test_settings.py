"""Settings at the edges: huge values, zero where zero makes no sense, infinities, and
Horovod's spellings of switches and controllers; through tuttirun (refused before anything
starts: one line, exit 2) and straight into init() (a clear error naming the variable)."""

import os
import sys

import pytest

import launch
from scenario import scenario

WORKER = launch.worker("workers/init_report.py")


def tuttirun(args, env=None, timeout=60):
    return launch.run(launch.launcher_command(1, "gloo")[:-3] + list(args), env=env,
                      timeout=timeout)


LAUNCHER_CASES = [
    (["--fusion-threshold-mb", "inf"], "--fusion-threshold-mb: inf is out of range"),
    (["--fusion-threshold-mb", "1e13"], "it must be a number from 0 to 65536 (MiB)"),
    (["--stall-check-warning-time-seconds", "0"], "from 0.001 to 604800 (seconds)"),
    (["--autotune-steps-per-sample", "0"], "an integer from 1 to 1000000"),
    (["--cycle-time-ms", "inf"], "--cycle-time-ms: inf is out of range"),
    (["--cache-capacity", "99999999"], "an integer from 0 to 1048576"),
]


@scenario("bad-launcher-settings")
@pytest.mark.parametrize("args, message", LAUNCHER_CASES)
def test_tuttirun_refuses_out_of_range_flags_before_starting(args, message, tmp_path):
    witness = tmp_path / "started"
    result = tuttirun(["-np", "2"] + args + [sys.executable, "-c",
                                              "open(%r, 'w').close()" % str(witness)])
    assert result.returncode == 2, launch.describe(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuttirun: error: argument "), result.stderr
    assert message in lines[0], lines[0]
    assert not witness.exists()


@scenario("bad-launcher-environment")
def test_tuttirun_refuses_an_inherited_variable_the_core_would_refuse(tmp_path):
    result = tuttirun(["-np", "2", sys.executable, WORKER],
                      env={"TUTTI_SHM_BUFFER_BYTES": "1e19"})
    assert result.returncode == 2, launch.describe(result)
    assert result.stderr == ("tuttirun: error: environment variable TUTTI_SHM_BUFFER_BYTES=1e19 "
                             "is out of range: it must be a number from 0 to 17179869184 "
                             "(bytes)\n"), result.stderr
    assert "init" not in result.stdout


CORE_CASES = [
    ("TUTTI_SHM_BUFFER_BYTES", "1e19", "a number from 0 to 17179869184 (bytes)"),
    ("TUTTI_SHM_BUFFER_BYTES", str(2 ** 62), "a number from 0 to 17179869184 (bytes)"),
    ("TUTTI_FUSION_THRESHOLD", "1e19", "a number from 0 to 68719476736 (bytes)"),
    ("TUTTI_CYCLE_TIME", "1e300", "a number from 0.001 to 10000 (milliseconds)"),
    ("HOROVOD_STALL_CHECK_TIME_SECONDS", "1e300", "a number from 0.001 to 604800 (seconds)"),
]


@scenario("huge-core-settings")
@pytest.mark.parametrize("variable, value, allowed", CORE_CASES)
def test_init_refuses_huge_values_naming_the_variable(variable, value, allowed):
    result = launch.run([sys.executable, WORKER], env={variable: value}, timeout=60)
    assert result.returncode == 0, launch.describe(result)
    assert result.stdout == (
        "init failed: InvalidArgumentError: tutti init failed: environment variable %s='%s' is out of "
        "range: it must be %s\n" % (variable, value, allowed)), launch.describe(result)


@scenario("horovod-switch-spellings")
@pytest.mark.parametrize("value, accepted", [("1", True), ("0", True), ("true", False),
                                             ("yes", False)])
def test_switches_take_horovods_spellings(value, accepted):
    result = launch.run([sys.executable, WORKER], env={"HOROVOD_AUTOTUNE": value}, timeout=60)
    assert result.returncode == 0, launch.describe(result)
    if accepted:
        assert result.stdout == "rank 0: init ok\n", launch.describe(result)
    else:
        assert result.stdout == (
            "init failed: InvalidArgumentError: tutti init failed: environment variable "
            "HOROVOD_AUTOTUNE='%s' is not a switch: use 1 (on) or 0 (off), as Horovod does\n"
            % value), launch.describe(result)


@scenario("horovod-controller-upper-case")
def test_upper_case_controller_names_work_under_tuttirun():
    result = launch.run_ranks(2, [sys.executable, WORKER], controller="gloo",
                              env={"HOROVOD_CONTROLLER": "GLOO"}, timeout=120)
    assert result.returncode == 0, launch.describe(result)
    assert "rank 1: init ok" in result.stdout, launch.describe(result)


@scenario("horovod-timeline-dynamic")
def test_timeline_dynamic_starts_later_and_writes_no_file_named_dynamic(tmp_path):
    trace = tmp_path / "trace.json"
    result = launch.run([sys.executable, WORKER, "timeline", str(trace)],
                        env={"HOROVOD_TIMELINE": "DYNAMIC"}, timeout=60,
                        cwd=str(tmp_path))
    assert result.returncode == 0, launch.describe(result)
    assert "rank 0: init ok" in result.stdout, launch.describe(result)
    assert not (tmp_path / "DYNAMIC").exists()
    assert trace.exists() and "traced" in trace.read_text()
