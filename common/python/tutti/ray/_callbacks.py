"""The driver's half of `callbacks=`: one Ray queue per run, which the workers' ray_logger
fills and the driver empties into the callbacks, on the thread that called run()."""

from ._imports import ray_module


def checked(callbacks):
    """`callbacks` as a list (empty when None); ValueError naming what is not callable."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        raise ValueError("callbacks must be a list of callables, not %r" % (callbacks,))
    for index, callback in enumerate(callbacks):
        if not callable(callback):
            raise ValueError("callbacks[%d] is not callable: %r" % (index, callback))
    return list(callbacks)


class Relay:
    """The queue of one run and the callbacks it feeds. `queue` is None without callbacks,
    so that the workers' ray_logger drops its values."""

    def __init__(self, callbacks):
        self._callbacks = callbacks
        self.queue = None
        if callbacks:
            from ray.util.queue import Queue

            # No CPU: the workers may hold every CPU of the cluster (a placement group).
            self.queue = Queue(actor_options={"num_cpus": 0})

    def deliver(self):
        """Calls the callbacks with every value queued so far, in order, without waiting
        for more. A callback's exception propagates."""
        if self.queue is None:
            return
        count = self.queue.qsize()
        if count:
            for value in self.queue.get_nowait_batch(count):
                for callback in self._callbacks:
                    callback(value)

    def close(self):
        if self.queue is not None:
            queue, self.queue = self.queue, None
            if ray_module().is_initialized():
                try:
                    queue.shutdown(force=True)
                except Exception:  # already gone with the cluster
                    pass
