"""pip installs tutti-core and the three plugins from this checkout, as a user would, into a
throwaway environment, then runs the installed packages on 2 ranks.

The throwaway environment sees the frameworks of the project's .venv through a .pth file, so
nothing large is copied; tutti itself comes only from what pip installed here.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ["torch", "tensorflow", "mxnet"]

SMOKE = r"""
import os, re
import numpy as np
import tutti.torch as thvd, tutti.tensorflow as tfhvd, tutti.mxnet as mhvd
import torch, tensorflow as tf, mxnet as mx
import tutti.common as common

for module in (thvd, tfhvd, mhvd, common):
    assert "site-packages" in module.__file__, module.__file__
thvd.init(); tfhvd.init(); mhvd.init()
rank, size = thvd.rank(), thvd.size()
assert size == 2 and tfhvd.rank() == rank == mhvd.rank()
threads = [open("/proc/self/task/%s/comm" % t).read().strip() for t in os.listdir("/proc/self/task")]
assert threads.count("tutti-core") == 1, threads

expected = float(sum(range(1, size + 1)))
t = thvd.allreduce(torch.full((3,), rank + 1.0), op=thvd.Sum, name="torch.x")
f = tfhvd.allreduce(tf.fill([3], rank + 1.0), op=tfhvd.Sum, name="tf.x")
m = mhvd.allreduce(mx.nd.full((3,), rank + 1.0), op=mhvd.Sum, name="mx.x")
for name, value in (("torch", t.numpy()), ("tensorflow", f.numpy()), ("mxnet", m.asnumpy())):
    assert np.allclose(value, expected), (name, value)
print("rank %d ok" % rank)
"""


def _site_packages(venv):
    return venv / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("pip") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    frameworks = sysconfig.get_paths()["purelib"]
    (_site_packages(venv) / "frameworks.pth").write_text(frameworks + "\n")
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q",
           "--no-build-isolation", "--no-deps"]
    for package in ["common"] + ["frameworks/" + p for p in PLUGINS]:
        result = subprocess.run(pip + [str(REPO / package)], capture_output=True, text=True,
                                timeout=900)
        assert result.returncode == 0, "pip install %s failed:\n%s%s" % (
            package, result.stdout, result.stderr)
    return venv


def _run(argv, cwd, timeout=240, env=None):
    job_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    job_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    job_env.update(env or {})
    return subprocess.run(argv, cwd=cwd, env=job_env, capture_output=True, text=True,
                          timeout=timeout)


def test_installed_plugins_share_one_core_on_two_ranks(venv, tmp_path):
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    python = str(venv / "bin" / "python")
    result = _run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                   "--mca", "btl_vader_single_copy_mechanism", "none", python, str(script)],
                  cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 ok" in result.stdout and "rank 1 ok" in result.stdout


def test_tuttirun_console_script_runs_two_ranks(venv, tmp_path):
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    result = _run([str(venv / "bin" / "tuttirun"), "-np", "2", str(venv / "bin" / "python"),
                   str(script)], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 ok" in result.stdout and "rank 1 ok" in result.stdout


def test_plugin_refuses_a_core_outside_its_supported_range(venv, tmp_path):
    # Copy the installed tutti-core aside and pretend it is a future release.
    fake = tmp_path / "site"
    shutil.copytree(_site_packages(venv) / "tutti" / "common", fake / "tutti" / "common")
    init = fake / "tutti" / "common" / "__init__.py"
    text = init.read_text()
    assert '__version__ = "0.1.0"' in text
    init.write_text(text.replace('__version__ = "0.1.0"', '__version__ = "9.0.0"'))
    result = _run([str(venv / "bin" / "python"), "-c", "import tutti.torch"], cwd=tmp_path,
                  env={"PYTHONPATH": str(fake)})
    assert result.returncode != 0
    assert "supports tutti-core >=0.1,<0.2, but tutti-core 9.0.0 is installed" in result.stderr
