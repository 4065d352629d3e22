"""Where the core looks for libcudart and libnccl from the nvidia-* pip packages.

The core loads both at run time (never linked), from the system or from the lib directories
of pip's nvidia-* packages (nvidia-nccl-cu13, nvidia-cuda-runtime, ...). The core cannot see
sys.path, so before it loads, this module puts those directories on TUTTI_GPU_LIBRARY_PATH
(after any the user set). Imports nothing from tutti.
"""

import glob
import os
import sys

VARIABLE = "TUTTI_GPU_LIBRARY_PATH"


def nvidia_library_dirs(paths=None):
    """The lib directories of nvidia-* packages found on `paths` (sys.path), in order."""
    found = []
    for entry in sys.path if paths is None else paths:
        if not entry or not os.path.isdir(os.path.join(entry, "nvidia")):
            continue
        for lib in sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib"))):
            if lib not in found:
                found.append(lib)
    return found


def export_search_path(environ=None):
    """Appends the nvidia-* lib directories to TUTTI_GPU_LIBRARY_PATH in `environ`."""
    environ = os.environ if environ is None else environ
    current = [d for d in environ.get(VARIABLE, "").split(":") if d]
    for directory in nvidia_library_dirs():
        if directory not in current:
            current.append(directory)
    if current:
        environ[VARIABLE] = ":".join(current)
