"""tutti-mxnet: tutti for MXNet Gluon (`import tutti.mxnet as hvd`).

Build and install against the MXNet and tutti-core already installed:

    pip install ./common
    pip install --no-build-isolation ./frameworks/mxnet

The native op library is compiled with MXNet's own flags (build_flags.py here, the
plugin's recipe) and linked against the installed core by its soname.
"""

import os
import re

from setuptools import find_namespace_packages, setup

try:
    from tutti.common.build import native_build_command, plugin_sources
except ImportError as exc:
    raise SystemExit(
        "tutti-mxnet is compiled against the tutti-core and MXNet installed in the target "
        "environment, and tutti-core is not importable there (%s). Install it first, in a "
        "separate command: `pip install ./common`, then `pip install --no-build-isolation "
        "./frameworks/mxnet`." % exc
    )

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = plugin_sources(HERE)


def _read(*parts):
    with open(os.path.join(HERE, *parts)) as stream:
        return stream.read()


def _version():
    text = _read("python", "tutti", "mxnet", "version.py")
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def _supported_core():
    text = _read("python", "tutti", "mxnet", "version.py")
    return re.search(r'^SUPPORTED_CORE = "([^"]+)"', text, re.M).group(1)


build_ext = native_build_command("mxnet", SOURCES, "libtutti_mxnet_ops.so", "tutti.mxnet",
                                 recipe=os.path.join(HERE, "build_flags.py"))

setup(
    name="tutti-mxnet",
    version=_version(),
    description="tutti for MXNet Gluon: Horovod-style distributed training on one shared core",
    long_description=_read("README.md"),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    package_dir={"": "python"},
    packages=find_namespace_packages(where="python", include=["tutti.mxnet"]),
    ext_modules=build_ext.ext_modules,
    cmdclass={"build_ext": build_ext},
    install_requires=["tutti-core" + _supported_core(), "mxnet>=1.9,<2"],
    zip_safe=False,
)
