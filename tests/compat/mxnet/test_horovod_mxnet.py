"""A Horovod MXNet script, import changed only, on 2 and 3 ranks under MPI and Gloo."""

import subprocess
import sys

import pytest
from launch import describe, run, run_ranks, worker


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_horovod_mxnet_script(controller, np_):
    result = run_ranks(np_, [sys.executable, worker("workers/horovod_mxnet_script.py")],
                       controller, timeout=240)
    assert result.returncode == 0, describe(result)
    for rank in range(np_):
        assert "rank %d: horovod mxnet checks passed" % rank in result.stdout, describe(result)


def test_mxnet_imports_first_in_the_project_environment():
    # A fresh interpreter of the environment tools/setup creates, importing mxnet before
    # anything else (numpy 1.26 removed the numpy.bool alias MXNet 1.9 uses).
    result = run([sys.executable, "-c", "import mxnet; print(mxnet.__version__)"], timeout=120)
    assert result.returncode == 0, (
        "the start-up hook of tools/setup is missing (run tools/setup)\n" + describe(result))
    assert result.stdout.strip() == "1.9.1"


def test_startup_hook_leaves_other_interpreters_alone():
    # The hook only acts when mxnet is imported: numpy is not loaded at start-up.
    code = "import sys; print('numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() == "False", result.stderr
