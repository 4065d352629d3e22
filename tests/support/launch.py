"""Starts real multi-process jobs for tests: under mpirun (MPI) or tuttirun (Gloo).

Every job runs in its own session with a deadline; on timeout the whole session is killed
and the test fails with everything the ranks printed, so a hung collective never hangs CI.
"""

import inspect
import os
import signal
import subprocess
import sys


def worker(path):
    """Absolute path of a worker script given relative to the calling test file."""
    caller = inspect.stack()[1].filename
    return os.path.join(os.path.dirname(os.path.abspath(caller)), path)


def launcher_command(np, controller):
    if controller == "mpi":
        return [
            "mpirun", "-np", str(np), "--oversubscribe", "--allow-run-as-root",
            "--bind-to", "none", "--mca", "btl_vader_single_copy_mechanism", "none",
        ]
    if controller == "gloo":
        return [sys.executable, "-m", "tutti.runner", "-np", str(np), "--gloo"]
    raise ValueError("controller must be 'mpi' or 'gloo', not %r" % (controller,))


def _job_environment(env):
    job_env = dict(os.environ)
    job_env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    job_env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # Workers must import the same tutti packages as the test: hand on the test's sys.path.
    job_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    job_env.update(env or {})
    return job_env


def run(argv, env=None, timeout=120, cwd=None):
    """Runs one command in its own session and returns the CompletedProcess (text output)."""
    proc = subprocess.Popen(
        argv, env=_job_environment(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True, start_new_session=True, cwd=cwd,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(
            "%s did not finish within %s s\n--- stdout ---\n%s\n--- stderr ---\n%s"
            % (" ".join(argv), timeout, stdout, stderr)
        )
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def run_ranks(np, argv, controller="mpi", env=None, timeout=120):
    """Runs `argv` on `np` ranks under `controller` ("mpi" or "gloo")."""
    return run(launcher_command(np, controller) + list(argv), env=env, timeout=timeout)


def describe(result):
    """Everything a failed job printed, for assertion messages."""
    return "exit code %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        result.returncode, result.stdout, result.stderr)


def kernel_allows_single_copy():
    """Whether this kernel lets a process read another's memory with process_vm_readv (what
    shared memory's single copy needs; Docker's default seccomp profile and Yama's
    ptrace_scope 2 or 3 forbid it): reads a word of a forked child."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    word = ctypes.c_uint64(0x7475747469)
    got = ctypes.c_uint64(0)
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # waits until the parent closes its end, then leaves at once
        os.close(ready_w)
        os.read(ready_r, 1)
        os._exit(0)
    os.close(ready_r)
    try:
        local = IoVec(ctypes.addressof(got), 8)
        remote = IoVec(ctypes.addressof(word), 8)
        libc.process_vm_readv.restype = ctypes.c_ssize_t
        read = libc.process_vm_readv(child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        return read == 8 and got.value == word.value
    finally:
        os.close(ready_w)
        os.waitpid(child, 0)
