"""init/shutdown and configuration errors, in real processes (alone, under mpirun, under
tuttirun)."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/lifecycle.py")

# Variables a launcher may leave behind that would change the controller a plain process picks.
PLAIN = {"TUTTI_CONTROLLER": "", "HOROVOD_CONTROLLER": "", "TUTTI_GLOO_RENDEZVOUS_ADDR": ""}


def run_alone(scenario, env=None):
    result = launch.run([sys.executable, WORKER, scenario], env=dict(PLAIN, **(env or {})),
                        timeout=60)
    assert result.returncode == 0, launch.describe(result)
    return result.stdout


def test_calls_before_init_raise_not_initialized_naming_the_fix():
    out = run_alone("before_init")
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "rank", "size", "local_rank", "local_size", "cross_rank", "cross_size", "allreduce"]
    for line in lines:
        assert "init" in line.split(":", 1)[1], line


def test_unknown_controller_lists_the_valid_choices():
    out = run_alone("init_error", {"TUTTI_CONTROLLER": "carrier-pigeon"})
    assert "ERROR InvalidArgumentError" in out, out
    assert "TUTTI_CONTROLLER" in out and "carrier-pigeon" in out, out
    assert "mpi" in out and "gloo" in out, out


def test_horovod_variable_names_are_accepted_and_named_in_errors():
    out = run_alone("init_error", {"HOROVOD_CONTROLLER": "smoke-signals"})
    assert "ERROR InvalidArgumentError" in out and "HOROVOD_CONTROLLER" in out, out


@pytest.mark.parametrize("variable, value", [
    ("TUTTI_RANK", "abc"),
    ("TUTTI_SIZE", "-3"),
    ("TUTTI_GLOO_RENDEZVOUS_PORT", "70000"),
    ("TUTTI_GLOO_TIMEOUT_SECONDS", "soon"),
    ("TUTTI_CYCLE_TIME", "-1"),
    ("HOROVOD_CYCLE_TIME", "fast"),
])
def test_malformed_environment_value_names_the_variable(variable, value):
    env = {"TUTTI_CONTROLLER": "gloo", "TUTTI_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
           "TUTTI_GLOO_RENDEZVOUS_PORT": "9", "TUTTI_RANK": "0", "TUTTI_SIZE": "1"}
    env[variable] = value
    out = run_alone("init_error", env)
    assert "ERROR InvalidArgumentError" in out, out
    assert variable in out and value in out, out


def test_plain_python_runs_as_a_job_of_one():
    out = run_alone("single")
    assert "single ok" in out, out
    assert "dtype: " in out and "complex64" in out, out
    assert "op: " in out and "Average" in out, out
    assert "in place: " in out and "contiguous" in out, out


SHUT_DOWN = "tutti has been shut down: call init() again before using it"


def test_init_shutdown_init_alone():
    out = run_alone("restart")
    assert "round 1 ok: rank 0/1 controller local" in out, out
    assert "round 2 ok: rank 0/1 controller local" in out, out
    assert sum(line.startswith("after shutdown: ") for line in out.splitlines()) == 2, out
    assert "shut down" in out, out


def test_every_call_after_shutdown_says_to_init_again():
    lines = [line for line in run_alone("restart").splitlines() if " after shutdown: " in line]
    names = [line.split(" after shutdown: ")[0] for line in lines]
    assert names == [
        "allreduce", "allreduce_", "grouped_allreduce", "allgather", "grouped_allgather",
        "broadcast", "broadcast_", "alltoall", "reducescatter", "grouped_reducescatter",
        "barrier", "join", "add_process_set", "process_set_size", "mpi_threads_supported",
        "allreduce"], lines
    for line in lines:
        assert line.endswith(SHUT_DOWN), line


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_init_shutdown_init_on_two_ranks(controller):
    result = launch.run_ranks(2, [sys.executable, WORKER, "restart"], controller=controller)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(2):
        for round_number in (1, 2):
            line = "round %d ok: rank %d/2 controller %s" % (round_number, rank, controller)
            assert line in result.stdout, launch.describe(result)
