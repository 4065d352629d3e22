"""Messages of 2^31 bytes and more over Gloo TCP (shared memory off, as between hosts).

Gloo counts bytes in an int in places; the core cuts every transfer into smaller pieces.
One rank pair moves one float32 tensor of 2 GiB + 16 B: about 2.1 GiB of memory per rank
(plus two 256 MiB inboxes), ~20 s on a 2-core machine.
"""

import sys

import launch
from scenario import scenario

WORKER = launch.worker("workers/big_allreduce.py")
BYTES = (2 << 30) + 16


@scenario("gloo-2gib-allreduce")
def test_allreduce_of_a_tensor_above_2_gib_over_gloo_tcp():
    result = launch.run_ranks(2, [sys.executable, WORKER, str(BYTES)], controller="gloo",
                              env={"TUTTI_SHM": "off"}, timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(2):
        assert "rank %d: ok %d bytes" % (rank, BYTES) in result.stdout, launch.describe(result)
