"""Loads the TensorFlow op library libtutti_tensorflow_ops.so.

tutti.common is imported first: it loads the core, and the op library's DT_NEEDED entry
libtutti_core.so.1 then resolves to that already loaded copy, so every framework in the
process shares one core.
"""

import os

import tensorflow as tf
from tutti.common import plugin

LIBRARY_NAME = "libtutti_tensorflow_ops.so"

ops = plugin.load_native_library(
    os.path.dirname(os.path.abspath(__file__)),
    LIBRARY_NAME,
    "tensorflow",
    tf.__version__,
    tf.load_op_library,
)
