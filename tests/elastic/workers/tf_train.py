"""An elastic TensorFlow run with a custom loop for tests/elastic: the job of
global_batches.py with tf.GradientTape wrapped in hvd.DistributedGradientTape, a Keras
optimizer applied by hand, and `hvd.elastic.TensorFlowState` holding the model's and the
optimizer's variables plus epoch and batch."""

import global_batches as job


def main():
    args = job.options()
    import keras
    import tensorflow as tf
    import tutti.tensorflow as hvd

    hvd.init()
    x, y = job.data()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((job.FEATURES,), dtype="float64"),
                              keras.layers.Dense(8, activation="tanh", dtype="float64"),
                              keras.layers.Dense(1, dtype="float64")])
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    state = hvd.elastic.TensorFlowState(list(model.variables) + list(optimizer.variables),
                                        epoch=0, batch=0)
    state.register_reset_callbacks([lambda: job.say(event="reset", rank=hvd.rank(),
                                                    size=hvd.size())])

    def train_step(rows):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x[rows]) - y[rows]))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    @hvd.elastic.run
    def train(state):
        job.train_loop(state, args, hvd.rank(), hvd.size(), train_step)

    train(state)
    job.say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
            weights=[w.flatten().tolist() for w in model.get_weights()])


if __name__ == "__main__":
    main()
