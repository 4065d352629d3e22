"""tutti-tensorflow: tutti for TensorFlow (`import tutti.tensorflow as hvd`).

    pip install ./common
    pip install --no-build-isolation ./frameworks/tensorflow

The op library is compiled against the TensorFlow and tutti-core already installed in the
environment (an op library only loads into the TensorFlow version it was built for),
which is why the build must not be isolated.
"""

import importlib.metadata
import os
import re

from setuptools import find_namespace_packages, setup

try:
    from tutti.common.build import native_build_command, plugin_sources
except ImportError as error:
    raise SystemExit(
        "building tutti-tensorflow needs tutti-core installed in the same environment "
        "(pip install ./common), and pip's --no-build-isolation flag: %s" % error
    )

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = plugin_sources(HERE)


def _read(*parts):
    with open(os.path.join(HERE, *parts)) as stream:
        return stream.read()


def _version_field(name):
    text = _read("python", "tutti", "tensorflow", "version.py")
    return re.search(r'^%s = "([^"]+)"' % name, text, re.M).group(1)


# TensorFlow ships under several distribution names; requiring plain "tensorflow" would make
# pip download it next to an installed tensorflow-cpu.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly")


def _installed_tensorflow():
    """The requirement "<distribution>==<version>" of the TensorFlow being built against:
    the op library works with exactly that version."""
    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            return "%s==%s" % (name, importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
    raise SystemExit(
        "building tutti-tensorflow needs TensorFlow installed in the same environment "
        "(one of: %s)" % ", ".join(TENSORFLOW_DISTRIBUTIONS)
    )


BuildOps = native_build_command(
    "tensorflow", SOURCES, "libtutti_tensorflow_ops.so", "tutti.tensorflow",
    recipe=os.path.join(HERE, "build_flags.py"),  # the plugin's compile recipe
)

setup(
    name="tutti-tensorflow",
    version=_version_field("__version__"),
    description="tutti for TensorFlow: Horovod-style data-parallel training on the tutti core",
    long_description=_read("README.md"),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    package_dir={"": "python"},
    packages=find_namespace_packages(where="python", include=["tutti.*"]),
    ext_modules=BuildOps.ext_modules,
    cmdclass={"build_ext": BuildOps},
    install_requires=["tutti-core" + _version_field("CORE_REQUIREMENT"), _installed_tensorflow()],
    zip_safe=False,
)
