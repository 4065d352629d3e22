"""Bad input: one line `tuttirun: error: ...`, exit code 2, and nothing started."""

import sys

import pytest

from runner_helpers import tuttirun


@pytest.fixture
def witness(tmp_path):
    """A command that would leave a file behind if any rank ever ran."""
    path = tmp_path / "started"
    return path, [sys.executable, "-c", "open(%r, 'w').close()" % str(path)]


CASES = {
    "np_zero": (["-np", "0"], "argument -np/--num-proc: must be at least 1, not 0"),
    "np_negative": (["-np", "-2"], "must be at least 1"),
    "np_missing": ([], "-np is required"),
    "too_many_processes": (["-np", "3", "-H", "localhost:2"],
                           "-np 3 asks for more processes than the 2 slots"),
    "too_many_processes_mpi": (["--mpi", "-np", "5", "-H", "localhost:1,127.0.0.1:2"],
                               "more processes than the 3 slots"),
    "unknown_host": (["-np", "2", "-H", "localhost:1,no-such-host.invalid:1"],
                     "unknown host 'no-such-host.invalid'"),
    "malformed_hosts_slots": (["-np", "1", "-H", "localhost:two"], "is not an integer"),
    "malformed_hosts_empty": (["-np", "1", "-H", "localhost:1,,"], "empty host entry"),
    "malformed_hosts_colons": (["-np", "1", "-H", "a:1:2"], "must be host or host:slots"),
    "missing_hostfile": (["-np", "1", "--hostfile", "/nonexistent/hosts"],
                         "cannot read host file /nonexistent/hosts"),
    "unreadable_config": (["-np", "1", "--config-file", "/nonexistent/c.yaml"],
                          "cannot read config file /nonexistent/c.yaml"),
    "config_is_a_directory": (["-np", "1", "--config-file", "/"], "cannot read config file /"),
    "unknown_interface": (["-np", "1", "--network-interface", "nosuchif0"],
                          "--network-interface nosuchif0: no such interface"),
    "unknown_flag": (["-np", "1", "--fusion-threshold", "3"], "unrecognized arguments"),
    "bad_tuning_value": (["-np", "1", "--cycle-time-ms", "fast"], "'fast' is not a number"),
    # Values the core would refuse on every rank after the job started: refused up front,
    # against the core's own range table (tutti/common/settings.def).
    "fusion_threshold_inf": (["-np", "1", "--fusion-threshold-mb", "inf"],
                             "argument --fusion-threshold-mb: inf is out of range: it must be "
                             "a number from 0 to 65536 (MiB)"),
    "stall_warning_zero": (["-np", "1", "--stall-check-warning-time-seconds", "0"],
                           "0 is out of range: it must be a number from 0.001 to 604800"),
    "autotune_steps_zero": (["-np", "1", "--autotune-steps-per-sample", "0"],
                            "0 is out of range: it must be an integer from 1 to 1000000"),
    "cycle_time_inf": (["-np", "1", "--cycle-time-ms", "inf"],
                       "argument --cycle-time-ms: inf is out of range"),
    "cache_capacity_huge": (["-np", "1", "--cache-capacity", "99999999"],
                            "it must be an integer from 0 to 1048576 (responses)"),
    "stop_grace_inf": (["-np", "1", "--stop-grace-seconds", "inf"], "infinite"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_and_exit_code_2(name, witness):
    path, command = witness
    args, message = CASES[name]
    result = tuttirun(args + command, timeout=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuttirun: error: "), result.stderr
    assert message in lines[0]
    assert result.stdout == ""
    assert not path.exists()


@pytest.mark.parametrize("args, message", [
    (["-np", "2"], "no command given"),
    (["-np", "2", "no-such-program-xyz"], "command 'no-such-program-xyz' not found on PATH"),
    (["-np", "2", "/nonexistent/train"],
     "command /nonexistent/train does not exist or is not executable"),
    (["--mpi", "-np", "2"], "no command given"),
])
def test_missing_command(args, message):
    result = tuttirun(args, timeout=30)
    assert result.returncode == 2
    assert result.stderr == "tuttirun: error: %s%s\n" % (
        message, "; usage: tuttirun -np N [options] COMMAND [ARGS...]"
        if message == "no command given" else "")


def test_missing_mpirun_in_mpi_mode(tmp_path):
    (tmp_path / "python3").symlink_to(sys.executable)
    result = tuttirun(["--mpi", "-np", "1", "python3", "-c", "pass"],
                      env={"PATH": str(tmp_path)}, timeout=30)
    assert result.returncode == 2
    assert "tuttirun: error: --mpi needs mpirun, which is not on PATH" in result.stderr
