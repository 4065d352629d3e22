"""Whether Open MPI's single-copy transfer between local processes can work here.

Open MPI's shared-memory transport (vader) moves large messages with one copy, reading the
peer's memory through the kernel (cross-memory attach, process_vm_readv). Containers whose
seccomp profile or missing ptrace rights forbid that call make every such transfer fail, so
there the benchmark turns the mechanism off; where the kernel permits it, raw MPI keeps its
fastest path and is the reference it would be in a user's job.
"""

import ctypes
import os


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def permitted():
    """True when this process may read a child's memory with process_vm_readv (what Open
    MPI's CMA needs between its ranks; Open MPI itself lifts Yama's restriction to
    ancestors)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "process_vm_readv"):
        return False
    marker = b"tutti-cma"
    source = ctypes.create_string_buffer(marker)  # the child inherits it at this address
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(ready_w, b"x")
            os.read(release_r, 1)
        finally:
            os._exit(0)
    try:
        os.read(ready_r, 1)
        target = ctypes.create_string_buffer(len(marker))
        local = _IoVec(ctypes.cast(target, ctypes.c_void_p), len(marker))
        remote = _IoVec(ctypes.cast(source, ctypes.c_void_p), len(marker))
        libc.process_vm_readv.restype = ctypes.c_ssize_t
        read = libc.process_vm_readv(pid, ctypes.byref(local), ctypes.c_ulong(1),
                                     ctypes.byref(remote), ctypes.c_ulong(1), ctypes.c_ulong(0))
        return read == len(marker) and target.raw == marker
    finally:
        os.write(release_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, release_r, release_w):
            os.close(fd)


if __name__ == "__main__":
    print("Open MPI single copy (CMA): %s" % ("permitted" if permitted() else "forbidden"))
