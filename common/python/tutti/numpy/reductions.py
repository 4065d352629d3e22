"""Reducing collectives on numpy arrays: allreduce and reducescatter, single and grouped."""

import numpy

from tutti.common import adasum, core, requests
from tutti.common.basics import Average
from tutti.common.process_sets import global_process_set

_run_plain = requests.run_plain
_submit_plain = requests.submit_plain
_ALLREDUCE = core.ALLREDUCE


def _reduce_args(collective, op, prescale_factor, postscale_factor, process_set):
    """The checked operator and scale factors of a reduction."""
    op = requests.reduce_op(op)
    if collective == core.ALLREDUCE:
        adasum.check_ranks(op, process_set)
    return (op, requests.scale_factor(prescale_factor, "prescale_factor"),
            requests.scale_factor(postscale_factor, "postscale_factor"))


def _reduce_async(collective, kind, sources, outputs, op, name, prescale_factor,
                  postscale_factor, process_set, grouped):
    op, prescale, postscale = _reduce_args(collective, op, prescale_factor, postscale_factor,
                                           process_set)
    if outputs is not None:  # allreduce: results land in the given arrays
        def finish(allocated):
            return list(outputs) if grouped else outputs[0]
    else:  # reducescatter: the core allocates each rank's part
        def finish(allocated):
            parts = [allocated[i] for i in range(len(sources))]
            return parts if grouped else parts[0]
    return requests.submit(
        collective, kind, name, process_set, sources, finish, outputs=outputs,
        allocates=outputs is None, op=op, prescale=prescale, postscale=postscale)


# ---- allreduce ----

def allreduce_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce of `array` into a new array; returns a handle for synchronize().
    `array` must not change until the request completes."""
    source = requests.source_array(array)
    output = numpy.empty_like(source, order="C")
    return _reduce_async(core.ALLREDUCE, "allreduce", [source], [output], op, name,
                         prescale_factor, postscale_factor, process_set, grouped=False)


def allreduce_async_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts an in-place allreduce of the C-contiguous numpy array `array`; returns a
    handle for synchronize()."""
    handle = _submit_plain(_ALLREDUCE, array, name, op, prescale_factor, postscale_factor,
                           process_set)
    if handle is not None:
        return handle
    requests.check_in_place(array)
    arrays = [array]  # one list as inputs and outputs: in place
    return _reduce_async(core.ALLREDUCE, "allreduce", arrays, arrays, op, name,
                         prescale_factor, postscale_factor, process_set, grouped=False)


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces `array` over the ranks of `process_set` and returns the result as a new array.

    op: Average, Sum, Adasum, Min, Max or Product. prescale_factor multiplies the input before
    the reduction and postscale_factor the result after it. `name` identifies the request
    across ranks; when omitted, requests are numbered in call order.
    """
    return requests.run_blocking(allreduce_async, array, op, name, prescale_factor,
                                 postscale_factor, process_set)


def allreduce_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Like allreduce(), but writes the result into `array` and returns it."""
    # allreduce_async_() and synchronize() in one, without a handle's result function; with
    # plain arguments, in one native call.
    if _run_plain(_ALLREDUCE, array, name, op, prescale_factor, postscale_factor, process_set):
        return array
    requests.check_in_place(array)
    args = _reduce_args(core.ALLREDUCE, op, prescale_factor, postscale_factor, process_set)
    requests.run(core.ALLREDUCE, "allreduce", name, process_set, [array], *args)
    return array


# ---- grouped allreduce ----

def grouped_allreduce_async(arrays, op=Average, name=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one allreduce of several arrays, negotiated and completed together; the
    handle's result is a list of new arrays."""
    sources = [requests.source_array(a) for a in requests.group(arrays, "grouped_allreduce")]
    outputs = [numpy.empty_like(s, order="C") for s in sources]
    return _reduce_async(core.ALLREDUCE, "grouped_allreduce", sources, outputs, op, name,
                         prescale_factor, postscale_factor, process_set, grouped=True)


def grouped_allreduce_async_(arrays, op=Average, name=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped_allreduce_async() of C-contiguous numpy arrays."""
    arrays = requests.group(arrays, "grouped_allreduce_")
    try:
        # The native submit takes writable C-contiguous views of in-place arrays itself;
        # checking each array here first would cost as much as the rest of the call.
        return _reduce_async(core.ALLREDUCE, "grouped_allreduce", arrays, arrays, op, name,
                             prescale_factor, postscale_factor, process_set, grouped=True)
    except Exception:
        for array in arrays:  # the error a refused array gets, as for the other in-place calls
            requests.check_in_place(array)
        raise


def grouped_allreduce(arrays, op=Average, name=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """Allreduces a list of arrays as one request; returns a list of new arrays."""
    return requests.run_blocking(grouped_allreduce_async, arrays, op, name, prescale_factor,
                                 postscale_factor, process_set)


def grouped_allreduce_(arrays, op=Average, name=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Like grouped_allreduce(), but writes into the given arrays and returns them."""
    return requests.run_blocking(grouped_allreduce_async_, arrays, op, name, prescale_factor,
                                 postscale_factor, process_set)


# ---- reducescatter ----

def reducescatter_async(array, op=Average, name=None, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=global_process_set):
    """Starts a reducescatter of `array`; the handle's result is this rank's part."""
    source = requests.source_array(array)
    return _reduce_async(core.REDUCESCATTER, "reducescatter", [source], None, op, name,
                         prescale_factor, postscale_factor, process_set, grouped=False)


def reducescatter(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces `array` over the ranks of `process_set` and returns this rank's part of the
    result along the first dimension. With n rows and k ranks, the first n % k ranks get
    n // k + 1 rows and the others n // k."""
    return requests.run_blocking(reducescatter_async, array, op, name, prescale_factor,
                                 postscale_factor, process_set)


def grouped_reducescatter_async(arrays, op=Average, name=None, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    """Starts one reducescatter of several arrays; the handle's result is a list."""
    sources = [requests.source_array(a)
               for a in requests.group(arrays, "grouped_reducescatter")]
    return _reduce_async(core.REDUCESCATTER, "grouped_reducescatter", sources, None, op,
                         name, prescale_factor, postscale_factor, process_set, grouped=True)


def grouped_reducescatter(arrays, op=Average, name=None, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=global_process_set):
    """Reducescatters a list of arrays as one request; returns this rank's parts."""
    return requests.run_blocking(grouped_reducescatter_async, arrays, op, name, prescale_factor,
                                 postscale_factor, process_set)
