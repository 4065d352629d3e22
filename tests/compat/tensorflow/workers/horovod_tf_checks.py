"""A Horovod-style TensorFlow script with only the import changed to tutti: runs on every
rank and asserts Horovod 0.28.1's behaviour for the names and differences that
docs/horovod-compatibility.md lists for tutti.tensorflow and tutti.tensorflow.keras.

Usage: horovod_tf_checks.py EXPECTED_SIZE
One process runs every check (importing TensorFlow takes seconds); on success each rank
prints "rank R: N checks passed".
"""

import sys

import tensorflow as tf

import checking
import collective_checks
import training_checks
import tutti.tensorflow as hvd

tf.get_logger().setLevel("ERROR")


def main(argv):
    expected_size = int(argv[1])
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    hvd.init()
    checking.check(hvd.size() == expected_size, "size %d, expected %d"
                   % (hvd.size(), expected_size))
    collective_checks.main()
    training_checks.main()
    rank = hvd.rank()
    hvd.shutdown()
    print("rank %d: %d checks passed" % (rank, checking.checks), flush=True)


if __name__ == "__main__":
    main(sys.argv)
