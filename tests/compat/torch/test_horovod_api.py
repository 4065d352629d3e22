"""The shared names and tutti.torch's Horovod-specific behaviour, as a Horovod script
expects them."""

import pytest

from compat_support import CONTROLLERS, SIZES, run_worker


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_horovod_api_and_behaviour(controller, size):
    run_worker("horovod_api.py", controller, size)
