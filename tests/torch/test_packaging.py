"""Import-time checks of tutti.torch: a library built for another torch, a missing library
or an unsupported tutti-core is refused with a clear ImportError; the op library depends
on the core by its soname."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

import launch


def _assert_ok(result, *expected_lines):
    assert result.returncode == 0, launch.describe(result)
    for line in expected_lines:
        assert line in result.stdout, launch.describe(result)


def _package_dir():
    spec = importlib.util.find_spec("tutti.torch")
    assert spec is not None, "tutti.torch is not importable from %s" % sys.path
    return list(spec.submodule_search_locations)[0]


def _import_copy(tmp_path, edit):
    """Copies the tutti.torch package under tmp_path, applies `edit(copy_dir)` and imports
    the copy in a fresh interpreter; returns the CompletedProcess."""
    copy = tmp_path / "tutti" / "torch"
    shutil.copytree(_package_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    edit(copy)
    code = "import tutti.torch as hvd; print(hvd.__file__)"
    return launch.run([sys.executable, "-c", code],
                      env={"PYTHONPATH": os.pathsep.join([str(tmp_path)] + sys.path)})


def test_copied_package_imports(tmp_path):
    result = _import_copy(tmp_path, lambda copy: None)
    _assert_ok(result, str(tmp_path))


def test_library_built_for_another_torch_is_refused(tmp_path):
    def claim_other_torch(copy):
        info_path = copy / "build_info.json"
        info = json.loads(info_path.read_text())
        info["framework_version"] = "1.13.1"
        info_path.write_text(json.dumps(info))

    result = _import_copy(tmp_path, claim_other_torch)
    assert result.returncode != 0, launch.describe(result)
    assert "ImportError" in result.stderr and "built against torch 1.13.1" in result.stderr, \
        launch.describe(result)
    assert "undefined symbol" not in result.stderr, launch.describe(result)


def test_missing_library_is_explained(tmp_path):
    result = _import_copy(tmp_path, lambda copy: (copy / "libtutti_torch_ops.so").unlink())
    assert result.returncode != 0, launch.describe(result)
    assert "ImportError" in result.stderr and "not built" in result.stderr, launch.describe(result)


def test_unsupported_core_version_is_refused(tmp_path):
    def require_future_core(copy):
        version = copy / "version.py"
        version.write_text(version.read_text().replace(
            'CORE_REQUIREMENT = ">=0.1,<0.2"', 'CORE_REQUIREMENT = ">=7.0"'))

    result = _import_copy(tmp_path, require_future_core)
    assert result.returncode != 0, launch.describe(result)
    assert "ImportError" in result.stderr and "tutti-core" in result.stderr, \
        launch.describe(result)


def test_op_library_links_the_core_by_soname():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed")
    library = os.path.join(_package_dir(), "libtutti_torch_ops.so")
    dynamic = subprocess.run([readelf, "-d", library], capture_output=True, text=True,
                             check=True).stdout
    assert "[libtutti_core.so.1]" in dynamic, dynamic
