"""tutti.tensorflow in real processes: 2 and 3 ranks under MPI (mpirun) and under Gloo
(tuttirun), a single process without a launcher, the examples, and the import-time checks
of the built op library."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import launch

CHECKS = launch.worker("workers/tensorflow_checks.py")
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        "frameworks", "tensorflow", "examples")
# A worker imports TensorFlow and Keras (seconds), traces a few dozen functions and trains
# small models; 3 ranks share 2 cores.
TIMEOUT = 400


def passed_ranks(result):
    """{rank: number of checks} from the workers' "rank R: N checks passed" lines."""
    return {int(r): int(n) for r, n in re.findall(r"rank (\d+): (\d+) checks passed",
                                                   result.stdout)}


@pytest.mark.parametrize("controller,np", [("mpi", 2), ("gloo", 2), ("mpi", 3), ("gloo", 3)])
def test_every_collective_and_training(controller, np):
    result = launch.run_ranks(np, [sys.executable, CHECKS, str(np), controller], controller,
                              timeout=TIMEOUT)
    assert result.returncode == 0, launch.describe(result)
    ranks = passed_ranks(result)
    assert sorted(ranks) == list(range(np)), launch.describe(result)
    assert all(count > 2000 for count in ranks.values()), launch.describe(result)


def test_every_collective_and_training_in_one_process():
    result = launch.run([sys.executable, CHECKS, "1", "local"], timeout=TIMEOUT)
    assert result.returncode == 0, launch.describe(result)
    assert list(passed_ranks(result)) == [0], launch.describe(result)


def test_keras_digits_example():
    script = os.path.join(EXAMPLES, "keras_digits.py")
    result = launch.run_ranks(2, [sys.executable, script, "--epochs", "4"], "gloo",
                              timeout=TIMEOUT)
    assert result.returncode == 0, launch.describe(result)
    for text in ("rank 0/2 (gloo)", "rank 1/2 (gloo)", "epoch 4:",
                 "on 2 ranks; weights agree across ranks"):
        assert text in result.stdout, launch.describe(result)


def test_synthetic_benchmark_runs():
    """Only that it runs and reports (figures are measured, never asserted)."""
    script = os.path.join(EXAMPLES, "tensorflow_synthetic_benchmark.py")
    result = launch.run_ranks(2, [sys.executable, script, "--model", "mlp", "--batch-size", "4",
                                  "--num-iters", "2", "--num-batches-per-iter", "1",
                                  "--num-warmup-batches", "1"], "mpi", timeout=TIMEOUT)
    assert result.returncode == 0, launch.describe(result)
    for text in ("1 rank alone:", "tutti DistributedGradientTape:",
                 "MultiWorkerMirroredStrategy:", "scaling efficiency"):
        assert text in result.stdout, launch.describe(result)


# ---- import-time checks of a copied package ---------------------------------------------

def installed_package_dir():
    # find_spec locates the package without running its __init__ (no TensorFlow import).
    spec = importlib.util.find_spec("tutti.tensorflow")
    assert spec is not None, "tutti.tensorflow is not importable from %s" % sys.path
    return list(spec.submodule_search_locations)[0]


def import_modified_copy(tmp_path, modify):
    """Copies tutti.tensorflow to tmp_path/tutti/tensorflow, lets `modify(copy)` change it
    and imports the copy in a new interpreter; returns the CompletedProcess."""
    copy = tmp_path / "tutti" / "tensorflow"
    shutil.copytree(installed_package_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    modify(copy)
    code = "import tutti.tensorflow as hvd; print('imported', hvd.__file__)"
    path = os.pathsep.join([str(tmp_path)] + sys.path)
    return launch.run([sys.executable, "-c", code], env={"PYTHONPATH": path}, timeout=120)


def test_library_built_for_another_tensorflow_is_refused(tmp_path):
    def claim_other_tensorflow(copy):
        info_file = copy / "build_info.json"
        info = json.loads(info_file.read_text())
        info["framework_version"] = "2.15.1"
        info_file.write_text(json.dumps(info))

    result = import_modified_copy(tmp_path, claim_other_tensorflow)
    assert result.returncode != 0, launch.describe(result)
    assert "ImportError: tutti.tensorflow was built against tensorflow 2.15.1" in result.stderr, \
        launch.describe(result)
    assert "pip install --no-build-isolation" in result.stderr, launch.describe(result)
    assert "undefined symbol" not in result.stderr, launch.describe(result)


def test_missing_library_is_explained(tmp_path):
    result = import_modified_copy(
        tmp_path, lambda copy: (copy / "libtutti_tensorflow_ops.so").unlink())
    assert result.returncode != 0, launch.describe(result)
    assert "ImportError: tutti.tensorflow is not built" in result.stderr, launch.describe(result)


def test_unmodified_copy_imports(tmp_path):
    # The control for the two tests above: the copying itself breaks nothing.
    result = import_modified_copy(tmp_path, lambda copy: None)
    assert result.returncode == 0, launch.describe(result)
    assert "imported %s" % tmp_path in result.stdout, launch.describe(result)


def test_op_library_links_the_core_by_soname():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed")
    library = os.path.join(installed_package_dir(), "libtutti_tensorflow_ops.so")
    dynamic = subprocess.run([readelf, "-d", library], capture_output=True, text=True,
                             check=True).stdout
    assert "Shared library: [libtutti_core.so.1]" in dynamic, dynamic
