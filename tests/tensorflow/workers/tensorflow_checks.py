"""Runs on every rank of a job: exercises tutti.tensorflow end to end.

Usage: tensorflow_checks.py EXPECTED_SIZE EXPECTED_CONTROLLER   (controller: mpi, gloo, local)

One process does every check because importing TensorFlow takes seconds. Each check
raises AssertionError with the details on failure; on success the rank prints
"rank R: N checks passed".
"""

import sys

import tensorflow as tf

import allreduce_checks
import checking
import movement_checks
import training_checks
import tutti.tensorflow as hvd

tf.get_logger().setLevel("ERROR")  # every dtype gets its own traces on purpose


def main(argv):
    expected_size, expected_controller = int(argv[1]), argv[2]
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    allreduce_checks.check_before_init()
    hvd.init()
    allreduce_checks.check_topology(expected_size, expected_controller)
    allreduce_checks.check_values_eagerly()
    allreduce_checks.check_values_in_function()
    allreduce_checks.check_scaling()
    allreduce_checks.check_api_details()
    allreduce_checks.check_gradients()
    allreduce_checks.check_core_errors()
    movement_checks.check_values()
    movement_checks.check_grouped_allreduce_and_mixed_dtypes()
    movement_checks.check_gradients()
    movement_checks.check_process_sets()
    movement_checks.check_global_roots()
    movement_checks.check_join()
    movement_checks.check_objects_and_variables()
    movement_checks.check_errors()
    training_checks.main()
    rank = hvd.rank()
    allreduce_checks.check_after_shutdown()
    print("rank %d: %d checks passed" % (rank, checking.checks), flush=True)


if __name__ == "__main__":
    main(sys.argv)
