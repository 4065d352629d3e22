"""tutti-torch: tutti for PyTorch (`import tutti.torch as hvd`).

    pip install ./common
    pip install --no-build-isolation ./frameworks/torch

The native op library is compiled against the torch and tutti-core already installed in
the environment, which is why the build must not be isolated.
"""

import os
import re

from setuptools import find_namespace_packages, setup

try:
    from tutti.common.build import native_build_command, plugin_sources
except ImportError as error:
    raise SystemExit(
        "building tutti-torch needs tutti-core installed in the same environment "
        "(pip install ./common), and pip's --no-build-isolation flag: %s" % error
    )

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = plugin_sources(HERE)


def _read(*parts):
    with open(os.path.join(HERE, *parts)) as stream:
        return stream.read()


def _version_field(name):
    text = _read("python", "tutti", "torch", "version.py")
    return re.search(r'^%s = "([^"]+)"' % name, text, re.M).group(1)


BuildOps = native_build_command("torch", SOURCES, "libtutti_torch_ops.so", "tutti.torch",
                                recipe=os.path.join(HERE, "build_flags.py"))

setup(
    name="tutti-torch",
    version=_version_field("__version__"),
    description="tutti for PyTorch: Horovod-style data-parallel training on the tutti core",
    long_description=_read("README.md"),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    package_dir={"": "python"},
    packages=find_namespace_packages(where="python", include=["tutti.*"]),
    ext_modules=BuildOps.ext_modules,
    cmdclass={"build_ext": BuildOps},
    install_requires=["tutti-core" + _version_field("CORE_REQUIREMENT"), "torch"],
    zip_safe=False,
)
