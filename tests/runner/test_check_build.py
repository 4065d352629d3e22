"""tuttirun --check-build: frameworks, controllers and tensor operations."""

import os
import re
import subprocess
import sys

import runner_helpers


def sections(text):
    """{section title: {item: mark}} from the --check-build report."""
    result = {}
    current = None
    for line in text.splitlines():
        if line.startswith("Available "):
            current = result.setdefault(line.rstrip(":"), {})
        match = re.match(r"^    (\[[X ?]\]) (\w+)", line)
        if match and current is not None:
            current[match.group(2)] = match.group(1)
    return result


def test_check_build_report_layout():
    result = runner_helpers.tuttirun(["--check-build"], timeout=300)
    assert result.returncode == 0, result.stderr
    assert re.match(r"^tutti v\S+:\n", result.stdout)
    found = sections(result.stdout)
    assert set(found["Available frameworks"]) == {"TensorFlow", "PyTorch", "MXNet"}
    assert set(found["Available controllers"]) == {"MPI", "Gloo"}
    assert set(found["Available tensor operations"]) == {"NCCL", "MPI", "Gloo"}
    try:
        import tutti.common as common
    except ImportError:
        # Without a loadable core the controllers are unknown, and the report says why.
        assert found["Available controllers"] == {"MPI": "[?]", "Gloo": "[?]"}
        assert "the tutti core cannot be loaded" in result.stdout
    else:
        mark = {True: "[X]", False: "[ ]"}
        assert found["Available controllers"] == {
            "MPI": mark[common.mpi_built()], "Gloo": mark[common.gloo_built()]}
        assert found["Available tensor operations"]["NCCL"] == mark[common.nccl_built()]


def test_frameworks_not_on_the_path_are_unavailable(tmp_path):
    """A Python that sees tutti-core's sources and nothing else reports no framework.

    The interpreter is a fresh virtual environment, so plugins that were pip-installed
    into the project's environment (tools/demo installs tutti-mxnet there) stay out of
    sight; the test depends on nothing installed before it.
    """
    import tutti.runner

    # The directory that holds tutti/runner, without the framework plugins' directories.
    source_root = os.path.dirname(os.path.dirname(os.path.dirname(tutti.runner.__file__)))
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=120)
    result = runner_helpers.launch.run(
        [str(bare / "bin" / "python"), "-m", "tutti.runner", "--check-build", "--verbose"],
        env={"PYTHONPATH": source_root}, timeout=120)
    assert result.returncode == 0, result.stderr
    found = sections(result.stdout)
    assert found["Available frameworks"] == {"TensorFlow": "[ ]", "PyTorch": "[ ]", "MXNet": "[ ]"}
    assert "(tutti.torch: not installed)" in result.stdout
    assert "(tutti.mxnet: not installed)" in result.stdout


def test_nccl_shows_only_when_it_loads():
    missing = runner_helpers.tuttirun(["--check-build", "--verbose"],
                                      env={"TUTTI_NCCL_LIBRARY": "/nonexistent/libnccl.so.2"},
                                      timeout=300)
    assert missing.returncode == 0, missing.stderr
    assert sections(missing.stdout)["Available tensor operations"]["NCCL"] == "[ ]"
    assert "[ ] NCCL  (cannot load NCCL (libnccl); tried:" in missing.stdout
    from tutti.common import gpu_libraries

    if not any(os.path.exists(os.path.join(d, "libnccl.so.2"))
               for d in gpu_libraries.nvidia_library_dirs()):
        return  # no NCCL here to show as available (tools/setup installs nvidia-nccl-cu13)
    found = runner_helpers.tuttirun(["--check-build"], timeout=300)
    assert sections(found.stdout)["Available tensor operations"]["NCCL"] == "[X]"
