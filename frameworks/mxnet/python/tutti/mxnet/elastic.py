"""Elastic training for MXNet Gluon: `hvd.elastic.run` and `MXNetState`.

Horovod has no elastic MXNet; this follows its torch and TensorFlow states:

    state = hvd.elastic.MXNetState(net.collect_params(), trainer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            ...steps from batch state.batch on, state.batch += 1, state.commit() now and then
            state.epoch += 1; state.batch = 0; state.commit()

MXNet runs collectives asynchronously on its engine, so a broken job shows up as an
MXNetError carrying the core's message when a result is read; `run` turns those into
HorovodInternalError. commit() first waits for every pending operation, so a copy is only
taken of values that were computed. See docs/elastic.md.
"""

import mxnet as mx

from tutti.common import elastic as _elastic
from tutti.common.elastic import ObjectState, State  # noqa: F401
from tutti.common.exceptions import HorovodInternalError

from .functions import broadcast_object, broadcast_parameters

# How the core words a broken generation (a transport failure, or a peer that shut down).
_BROKEN_JOB_MARKERS = ("transport failed", "was shut down by rank", "peer process may have exited")


def _is_broken_job(error):
    text = str(error)
    return any(marker in text for marker in _BROKEN_JOB_MARKERS)


def _settle_engine():
    """Waits for MXNet's engine; a failed operation re-raises once, so drain them all."""
    for _ in range(100):
        try:
            mx.nd.waitall()
            return
        except mx.base.MXNetError:
            continue


def run(func):
    """Decorator: runs `func(state, ...)` to completion across failures and host changes."""

    def translated(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except mx.base.MXNetError as exc:
            if not _is_broken_job(exc):
                raise
            raise HorovodInternalError(str(exc)) from exc

    translated.__name__ = getattr(func, "__name__", "train")
    translated.__doc__ = getattr(func, "__doc__", None)
    return _elastic.run_fn(translated, _elastic.reset)


class MXNetState(ObjectState):
    """State of a Gluon run: the parameters (a ParameterDict, e.g. net.collect_params()),
    the trainer's optimizer states (momentum, ...) and any picklable attributes."""

    def __init__(self, params, trainer=None, **kwargs):
        self.params = params
        self.trainer = trainer
        super().__init__(bcast_object=self._broadcast_values, **kwargs)

    @staticmethod
    def _broadcast_values(values, root):
        return broadcast_object(values, root_rank=root, name="tutti.elastic.objects")

    def _trainer_states(self):
        updaters = getattr(self.trainer, "_updaters", None) if self.trainer else None
        if not updaters:
            return None
        return updaters[0].get_states(dump_optimizer=False)

    def _set_trainer_states(self, states):
        if states is not None and getattr(self.trainer, "_updaters", None):
            self.trainer._updaters[0].set_states(states)

    def save(self):
        try:
            mx.nd.waitall()  # a failed step raises here, before anything is overwritten
        except mx.base.MXNetError as exc:
            if not _is_broken_job(exc):
                raise
            raise HorovodInternalError(str(exc)) from exc
        self._saved_params = {name: p.data().copy() for name, p in self.params.items()
                              if p._data is not None}
        self._saved_trainer = self._trainer_states()
        mx.nd.waitall()
        super().save()

    def restore(self):
        _settle_engine()
        for name, value in self._saved_params.items():
            self.params[name].set_data(value)
        self._set_trainer_states(self._saved_trainer)
        super().restore()

    def sync_from(self, root_rank):
        broadcast_parameters(self.params, root_rank=root_rank, prefix="tutti.elastic")
        states = broadcast_object(self._trainer_states(), root_rank=root_rank,
                                  name="tutti.elastic.trainer")
        self._set_trainer_states(states)
        mx.nd.waitall()
        super().sync_from(root_rank)
