"""Ranks that diverge into a deadlock get an error naming the tensors and ranks."""

import pytest

from compat_support import CONTROLLERS, SIZES, run_worker


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_a_deadlock_ends_in_an_error_naming_tensors_and_ranks(controller, size):
    run_worker("deadlock.py", controller, size, env={"TUTTI_STALL_CHECK_TIME_SECONDS": "2"},
               timeout=120)
