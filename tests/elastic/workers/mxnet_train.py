"""An elastic MXNet Gluon run for tests/elastic: the job of global_batches.py with a
DistributedTrainer and `hvd.elastic.MXNetState` (parameters, trainer states, epoch, batch)."""

import global_batches as job


def main():
    args = job.options()
    import mxnet as mx
    import tutti.mxnet as hvd

    hvd.init()
    x, y = job.data()
    mx.random.seed(0)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="tanh", in_units=job.FEATURES, dtype="float64"),
            mx.gluon.nn.Dense(1, in_units=8, dtype="float64"))
    net.initialize(mx.init.Xavier())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd",
                                     {"learning_rate": 0.05, "momentum": 0.9})
    loss_fn = mx.gluon.loss.L2Loss()
    state = hvd.elastic.MXNetState(net.collect_params(), trainer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: job.say(event="reset", rank=hvd.rank(),
                                                    size=hvd.size())])

    def train_step(rows):
        data = mx.nd.array(x[rows], dtype="float64")
        label = mx.nd.array(y[rows], dtype="float64")
        # The mean in float64 and step(1): MXNet's optimizers take their rescale factor in
        # float32, and 1/rows would differ from 1/GLOBAL_BATCH by more than float64
        # rounding when the size is 3.
        with mx.autograd.record():
            loss = loss_fn(net(data), label).mean()
        loss.backward()
        trainer.step(1)

    @hvd.elastic.run
    def train(state):
        job.train_loop(state, args, hvd.rank(), hvd.size(), train_step)

    train(state)
    job.say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
            weights=[p.data().asnumpy().flatten().tolist()
                     for p in net.collect_params().values()])


if __name__ == "__main__":
    main()
