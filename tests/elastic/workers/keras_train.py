"""An elastic Keras run for tests/elastic: the job of global_batches.py with model.fit, a
Keras DistributedOptimizer and the elastic callbacks (CommitStateCallback every 2 batches,
UpdateBatchStateCallback resuming fit at the committed batch). --horovod-epochs calls fit
as Horovod's examples do (epochs=EPOCHS - state.epoch, fit counting from 0) instead of
initial_epoch=state.epoch."""

import argparse
import time

import global_batches as job


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--horovod-epochs", action="store_true")
    args = job.options(parser)
    import keras
    import tutti.tensorflow.keras as hvd

    hvd.init()
    keras.config.set_floatx("float64")
    x, y = job.data()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((job.FEATURES,)),
                              keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9))
    model.compile(optimizer=optimizer, loss="mse")
    state = hvd.elastic.KerasState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: job.say(event="reset", rank=hvd.rank(),
                                                    size=hvd.size())])

    class Log(keras.callbacks.Callback):
        """Logs every trained batch (not those before the committed one, which
        UpdateBatchStateCallback passes over) and crashes where asked."""

        def on_train_begin(self, logs=None):
            self.resume = (state.epoch, state.batch)
            self.epoch = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = state.epoch  # fit's own count may start at 0 (--horovod-epochs)

        def on_train_batch_begin(self, batch, logs=None):
            if (self.epoch, batch) >= self.resume:
                job.begin_step(args, hvd.rank(), hvd.size(), self.epoch, batch)

        def on_train_batch_end(self, batch, logs=None):
            if args.step_seconds:
                time.sleep(args.step_seconds)

    @hvd.elastic.run
    def train(state):
        mine = [i for b in range(job.BATCHES) for i in job.rows(hvd.rank(), hvd.size(), b)]
        if args.horovod_epochs:
            epochs = dict(epochs=args.epochs - state.epoch)
        else:
            epochs = dict(initial_epoch=state.epoch, epochs=args.epochs)
        # Log first: it sees the epoch before UpdateEpochStateCallback moves it on.
        model.fit(x[mine], y[mine], batch_size=job.GLOBAL_BATCH // hvd.size(), shuffle=False,
                  verbose=0, callbacks=[
                      Log(), hvd.elastic.UpdateEpochStateCallback(state),
                      hvd.elastic.UpdateBatchStateCallback(state),
                      hvd.elastic.CommitStateCallback(state, job.COMMIT_EVERY)], **epochs)

    train(state)
    job.say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
            weights=[w.flatten().tolist() for w in model.get_weights()])


if __name__ == "__main__":
    main()
