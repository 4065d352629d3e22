"""Names of collective requests.

The core matches requests across ranks by name, so a name must come out the same on every
rank and be unique among the requests in flight. Eagerly, every rank runs the same
sequence of collectives, so a process-wide counter works. Inside tf.function (or any
graph) the name is built when the graph is traced: a counter kept on the outermost graph,
prefixed with that graph's name. Graph names sometimes end in a process-wide unique id
(`cond_true_42`, `__backward_step_117`) that can differ between ranks, so that suffix is
dropped.
"""

import itertools
import re

import tensorflow as tf
from tensorflow.python.framework import func_graph

_eager_counter = itertools.count()
_GRAPH_COUNTER = "_tutti_request_counter"
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


def request_name(name, kind):
    """The name under which a collective of `kind` (e.g. "allreduce") is submitted.

    name: the name the user gave, or None to generate one.
    """
    if tf.executing_eagerly():
        return name if name else "%s.noname.%d" % (kind, next(_eager_counter))
    graph = _outermost_graph(tf.compat.v1.get_default_graph())
    counter = getattr(graph, _GRAPH_COUNTER, None)
    if counter is None:
        counter = itertools.count()
        setattr(graph, _GRAPH_COUNTER, counter)
    prefix = _UID_SUFFIX.sub("", getattr(graph, "name", "") or "graph")
    return "%s/%s.%d" % (prefix, name or kind, next(counter))
