"""A Horovod 0.28.1 script with only the import changed: the shared names and
tutti.torch's behaviour where Horovod's is specific. Every check states Horovod's result.
Prints one summary line per rank; exit code 1 on any failure."""

import sys
import time
import warnings

import torch

import tutti.torch as hvd
from tutti.torch.mpi_ops import allreduce_async, synchronize  # Horovod's module path

failures = []


def expect(label, condition, detail=""):
    if not condition:
        failures.append("%s %s" % (label, detail))


def raises(label, kinds, function):
    try:
        function()
    except kinds as exc:
        return exc
    except Exception as exc:  # the wrong kind
        failures.append("%s: raised %s: %s" % (label, type(exc).__name__, exc))
        return None
    failures.append("%s: raised nothing" % label)
    return None


def shared_names(rank, size):
    expect("hvd.mpi_ops", hvd.mpi_ops.allreduce is hvd.allreduce)
    expect("build facts", (hvd.ccl_built(), hvd.rocm_built(), hvd.ddl_built())
           == (False, False, False))
    expect("is_homogeneous", hvd.is_homogeneous() is True)
    expect("op values", (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product)
           == (0, 1, 2, 3, 4, 5))
    expect("HorovodInternalError", issubclass(hvd.HorovodInternalError, RuntimeError))
    unregistered = hvd.ProcessSet([0])
    expect("unregistered rank/size", unregistered.rank() is None
           and unregistered.size() is None)
    expect("included", unregistered.included() is (rank == 0))
    expect("remove unregistered", hvd.remove_process_set(unregistered) is False)
    expect("remove global", hvd.remove_process_set(hvd.global_process_set) is False)
    # a name in flight twice: ValueError
    if rank == 0:
        first = allreduce_async(torch.ones(2), name="dup", op=hvd.Sum)
        raises("duplicate name", ValueError,
               lambda: hvd.allreduce_async(torch.ones(2), name="dup", op=hvd.Sum))
    else:
        time.sleep(0.5)  # keeps rank 0's first request in flight while it reuses the name
        first = allreduce_async(torch.ones(2), name="dup", op=hvd.Sum)
    synchronize(first)
    # a mismatched collective: RuntimeError and HorovodInternalError
    error = raises("mismatch", hvd.HorovodInternalError,
                   lambda: hvd.allreduce(torch.ones(rank + 1), name="mismatch"))
    expect("mismatch is RuntimeError", isinstance(error, RuntimeError))
    # cloudpickle: lambdas and closures travel
    offset = 10 + rank
    function = hvd.broadcast_object(lambda x: x + offset, root_rank=0)
    expect("broadcast_object lambda", function(1) == 11, function(1))
    functions = hvd.allgather_object(lambda: offset)
    expect("allgather_object closures", [f() for f in functions]
           == [10 + r for r in range(size)])


def alltoall_as_horovod(rank, size):
    rows = 2 * size + 1  # not divisible by the set size
    out = hvd.alltoall(torch.arange(rows, dtype=torch.float32) + 100 * rank)
    expect("alltoall returns the tensor", isinstance(out, torch.Tensor), type(out))
    mine = 2 + (1 if rank < rows % size else 0)  # the remainder goes to the first ranks
    start = sum(2 + (1 if r < rows % size else 0) for r in range(rank))
    expected = torch.cat([torch.arange(start, start + mine, dtype=torch.float32) + 100 * r
                          for r in range(size)])
    expect("alltoall uneven", torch.equal(out, expected), (out, expected))
    splits = torch.ones(size, dtype=torch.float32)  # float splits are accepted
    result = hvd.alltoall(torch.full((size,), float(rank)), splits=splits)
    expect("alltoall with splits returns a pair", isinstance(result, tuple) and len(result) == 2)
    out, received = result
    expect("float splits", torch.equal(out, torch.arange(size, dtype=torch.float32)))
    expect("received splits", received.tolist() == [1] * size, received)


def reducescatter_as_horovod(rank, size):
    raises("0-d reducescatter", ValueError, lambda: hvd.reducescatter(torch.tensor(1.0)))
    for op, factor in ((hvd.Sum, float(size)), (hvd.Average, 1.0)):
        x = torch.ones(size, 2, requires_grad=True)
        hvd.reducescatter(x, op=op).sum().backward()
        expect("reducescatter gradient %s" % op.name,
               torch.equal(x.grad, torch.full((size, 2), factor)), x.grad)
        a = torch.ones(size, requires_grad=True)
        (part,) = hvd.grouped_reducescatter([a], op=op)
        part.sum().backward()
        expect("grouped reducescatter gradient %s" % op.name,
               torch.equal(a.grad, torch.full((size,), factor)), a.grad)


def optimizer_as_horovod(rank, size):
    embedding = torch.nn.Embedding(8, 3, sparse=True)
    optimizer = hvd.DistributedOptimizer(torch.optim.SparseAdam(embedding.parameters()),
                                         named_parameters=embedding.named_parameters())
    embedding(torch.tensor([rank, 5])).sum().backward()
    optimizer.synchronize()
    grad = embedding.weight.grad
    expect("sparse gradient stays sparse", grad.is_sparse, grad.layout)
    dense = grad.to_dense()
    expect("sparse average", abs(dense[5].sum().item() - 3.0) < 1e-6, dense)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()  # after synchronize(), outside skip_synchronize()
    messages = [str(w.message) for w in caught]
    expect("step() warning", any(m.startswith("optimizer.step() called without "
                                              "optimizer.skip_synchronize() context after "
                                              "optimizer.synchronize().") for m in messages),
           messages)
    optimizer.zero_grad()
    optimizer.set_backward_passes_per_step(2)
    expect("set_backward_passes_per_step", optimizer._passes == 2)
    handle = hvd.sparse_allreduce_async(torch.eye(size)[rank].to_sparse(), "sparse", hvd.Sum)
    total = hvd.synchronize(handle)
    expect("sparse_allreduce_async", total.is_sparse
           and torch.equal(total.to_dense(), torch.ones(size)), total)


def rooted_on_sets(rank, size):
    """Horovod: root_rank on a process set is a global rank, one of the set's ranks (the even
    and the odd ranks each broadcast from every member); another rank is ValueError."""
    even = hvd.add_process_set(list(range(0, size, 2)))
    odd = hvd.add_process_set(list(range(1, size, 2))) if size > 1 else None
    for label, ps in (("even", even), ("odd", odd)):
        if ps is None or not ps.included():
            continue
        for root in ps.ranks:
            got = hvd.broadcast(torch.full((3,), float(rank)), root, process_set=ps)
            expect("%s set broadcast from rank %d" % (label, root),
                   got.tolist() == [float(root)] * 3, got)
            got = hvd.broadcast_object(("from", rank), root, process_set=ps)
            expect("%s set broadcast_object from rank %d" % (label, root),
                   got == ("from", root), got)
        outsider = 1 if label == "even" else 0
        if outsider < size:
            raises("%s set broadcast from rank %d" % (label, outsider), ValueError,
                   lambda: hvd.broadcast(torch.ones(1), outsider, process_set=ps))
    hvd.barrier()
    for ps in (even, odd):
        if ps is not None:
            hvd.remove_process_set(ps)


def communicators(rank, size):
    """init(comm=...) and ProcessSet(comm) with mpi4py communicators (under mpirun), and
    init(process_sets="dynamic")."""
    hvd.shutdown()
    hvd.init(process_sets="dynamic")
    expect("dynamic", hvd.size() == size)
    if hvd.controller() != "mpi":
        return
    from mpi4py import MPI

    hvd.shutdown()
    hvd.init(comm=MPI.COMM_WORLD)
    expect("init(comm)", hvd.rank() == rank and hvd.size() == size)
    # The same communicator on every rank: every rank registers the same set.
    everyone = hvd.add_process_set(hvd.ProcessSet(MPI.COMM_WORLD))
    expect("ProcessSet(comm) ranks", everyone.ranks == list(range(size)), everyone.ranks)
    total = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=everyone)
    expect("allreduce on ProcessSet(comm)", total.item() == size, total)
    hvd.remove_process_set(everyone)
    if size > 1:
        hvd.shutdown()
        raises("init(comm) of a part of the job", RuntimeError,
               lambda: hvd.init(comm=[0]))
        if hvd.is_initialized():
            failures.append("init(comm=[0]) left tutti initialized")
        hvd.init()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for section in (shared_names, alltoall_as_horovod, reducescatter_as_horovod,
                    optimizer_as_horovod, rooted_on_sets, communicators):
        try:
            section(rank, size)
        except Exception as exc:
            failures.append("%s: %s: %s" % (section.__name__, type(exc).__name__, exc))
        hvd.barrier()
    for failure in failures:
        print("rank %d: FAIL %s" % (rank, failure), flush=True)
    print("rank %d/%d: %d failures" % (rank, size, len(failures)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
