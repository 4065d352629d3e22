"""Horovod's resume pattern (only rank 0 loads a checkpoint, then broadcast_parameters and
broadcast_optimizer_state) with every torch.optim optimizer: no hang, identical state."""

import pytest

from compat_support import CONTROLLERS, SIZES, run_worker


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_checkpoint_resume_with_every_optimizer(controller, size):
    run_worker("checkpoint_resume.py", controller, size)
