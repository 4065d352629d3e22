"""What every plugin checks before an Adasum allreduce, with Horovod 0.28.1's exceptions.

Horovod refuses, in Python and before any request is made, an Adasum reduction over a
number of ranks that is not a power of two (NotImplementedError). tutti checks the size of
the process set that reduces (Horovod only supports the global set, whose size is size()).
The core refuses the same requests too, for callers of the C ABI.
"""

from .basics import Adasum, size
from .process_sets import global_process_set

NON_POWER_OF_TWO = "Running Adasum with non-power of 2 ranks is not supported yet."


def is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0


def check_ranks(op, process_set=None):
    """Raises NotImplementedError when `op` is Adasum and the ranks of `process_set` (the
    global set when None) are not a power of two in number."""
    if op != Adasum:
        return
    process_set = process_set or global_process_set
    if process_set is global_process_set:
        count = size()
    elif hasattr(process_set, "size"):
        count = process_set.size()
    else:
        return  # not a process set: the request itself reports that
    if count is not None and not is_power_of_two(count):
        raise NotImplementedError(NON_POWER_OF_TWO)
