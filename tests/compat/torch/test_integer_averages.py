"""Horovod's exact integer averages and scale factors, with a rank joined, with the
response cache on and off."""

import pytest

from compat_support import CONTROLLERS, SIZES, run_worker


@pytest.mark.parametrize("cache", ["on", "off"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_integer_averages_with_join_as_horovod(controller, size, cache):
    env = {"TUTTI_CACHE_CAPACITY": "1024" if cache == "on" else "0"}
    run_worker("integer_averages.py", controller, size, env=env)
