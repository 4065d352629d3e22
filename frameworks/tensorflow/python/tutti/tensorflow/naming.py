"""Names of collective requests in TensorFlow.

The core matches requests across ranks by name, so a name must come out the same on every
rank and be unique among the requests in flight. Eagerly, TensorFlow names requests as
every frontend does (tutti.common.naming, prefix "tf"). Inside tf.function (or any graph)
the name is built when the graph is traced: a counter per process set kept on the
outermost graph, prefixed with that graph's name. Graph names sometimes end in a
process-wide unique id (`cond_true_42`, `__backward_step_117`) that can differ between
ranks, so that suffix is dropped.
"""

import collections
import itertools
import re

import tensorflow as tf
from tensorflow.python.framework import func_graph
from tutti.common import naming

_GRAPH_COUNTERS = "_tutti_request_counters"
_UID_SUFFIX = re.compile(r"_\d+$")
_INVALID_OP_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")


def op_name(name, default):
    """A valid TensorFlow op name for the user's `name` (or `default`)."""
    if not name:
        return default
    cleaned = _INVALID_OP_NAME_CHARS.sub("_", name)
    return cleaned if cleaned[0].isalnum() or cleaned[0] == "." else "_" + cleaned


def _outermost_graph(graph):
    while isinstance(getattr(graph, "outer_graph", None), func_graph.FuncGraph):
        graph = graph.outer_graph
    return graph


def request_name(name, kind, process_set_id=0):
    """The name under which a collective of `kind` (e.g. "allreduce") is submitted.

    name: the name the user gave, or None to generate one.
    process_set_id: the id of the request's process set (0: every rank).
    """
    if tf.executing_eagerly():
        return naming.request_name(name or None, kind, process_set_id, prefix="tf")
    graph = _outermost_graph(tf.compat.v1.get_default_graph())
    counters = getattr(graph, _GRAPH_COUNTERS, None)
    if counters is None:
        counters = collections.defaultdict(itertools.count)
        setattr(graph, _GRAPH_COUNTERS, counters)
    prefix = _UID_SUFFIX.sub("", getattr(graph, "name", "") or "graph")
    number = next(counters[process_set_id])
    return "%s/%s.%d%s" % (prefix, name or kind, number, naming.set_suffix(process_set_id))
