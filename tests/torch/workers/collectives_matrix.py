"""Every tutti.torch collective besides allreduce, on any number of ranks: allgather,
broadcast, alltoall, reducescatter and the grouped variants for every dtype x 1-3 dims,
against references each rank computes itself; then process sets, barrier, join with
uneven work, gradients, object and optimizer-state broadcasts, and error cases.

Prints one summary line per rank; the exit code is 1 if anything differed.
"""

import resource
import sys

import torch

import tutti.torch as hvd
from allreduce_matrix import Checker, make_input, reference

DTYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool]
SHAPES = [(5,), (3, 4), (2, 3, 2)]


def rows_of(rank):
    """Ranks contribute different numbers of rows to allgather."""
    return rank + 1


def with_rows(shape, rows):
    return (rows,) + tuple(shape[1:])


def name_of(dtype):
    return str(dtype)[6:]


def guarded(check, label, function):
    try:
        function()
    except Exception as exc:  # recorded, so that the other cases still run
        check.fail(label, "%s: %s" % (type(exc).__name__, exc))


def allgather_cases(check, dtype, shape, case):
    label = "allgather.%s.%dd" % (name_of(dtype), len(shape))
    inputs = [make_input(dtype, hvd.Sum, with_rows(shape, rows_of(r)), case, r)
              for r in range(check.size)]
    expected = torch.cat(inputs)
    check.check(label, hvd.allgather(inputs[check.rank], name=label), expected)
    check.check(label + ".async", hvd.synchronize(hvd.allgather_async(inputs[check.rank])),
                expected)
    second = [make_input(dtype, hvd.Sum, shape, case + 500, r) for r in range(check.size)]
    got = hvd.grouped_allgather([inputs[check.rank], second[check.rank]], name=label + ".g")
    check.check(label + ".grouped0", got[0], expected)
    check.check(label + ".grouped1", got[1], torch.cat(second))
    got = hvd.synchronize(hvd.grouped_allgather_async([second[check.rank]]))
    check.check(label + ".grouped_async", got[0], torch.cat(second))


def broadcast_cases(check, dtype, shape, case):
    label = "broadcast.%s.%dd" % (name_of(dtype), len(shape))
    root = case % check.size
    inputs = check.inputs(dtype, hvd.Sum, shape, case)
    mine = inputs[check.rank]
    original = mine.clone()
    check.check(label, hvd.broadcast(mine, root, name=label), inputs[root])
    if not torch.equal(mine, original):
        check.fail(label, "the out-of-place broadcast modified its input")
    tensor = mine.clone()
    if hvd.broadcast_(tensor, root_rank=root) is not tensor:
        check.fail(label, "broadcast_ did not return its argument")
    check.check(label + ".inplace", tensor, inputs[root])
    check.check(label + ".async", hvd.synchronize(hvd.broadcast_async(mine, root)), inputs[root])
    tensor = mine.clone()
    handle = hvd.broadcast_async_(tensor, root)
    while not hvd.poll(handle):
        pass
    hvd.synchronize(handle)
    check.check(label + ".async_", tensor, inputs[root])


def alltoall_cases(check, dtype, shape, case):
    label = "alltoall.%s.%dd" % (name_of(dtype), len(shape))
    size = check.size
    # rank r sends (r + j) % 3 rows to rank j
    splits = [[(r + j) % 3 for j in range(size)] for r in range(size)]
    inputs = [make_input(dtype, hvd.Sum, with_rows(shape, sum(splits[r])), case, r)
              for r in range(size)]
    parts = [torch.split(inputs[r], splits[r]) for r in range(size)]
    expected = torch.cat([parts[r][check.rank] for r in range(size)])
    expected_splits = torch.tensor([splits[r][check.rank] for r in range(size)],
                                   dtype=torch.int32)
    output, received = hvd.alltoall(inputs[check.rank], splits=splits[check.rank], name=label)
    check.check(label, output, expected)
    check.check(label + ".splits", received, expected_splits)
    # equal parts
    even = [make_input(dtype, hvd.Sum, with_rows(shape, 2 * size), case + 7, r)
            for r in range(size)]
    expected = torch.cat([torch.split(even[r], 2)[check.rank] for r in range(size)])
    output, received = hvd.synchronize(hvd.alltoall_async(even[check.rank]))
    check.check(label + ".even", output, expected)
    check.check(label + ".even.splits", received, torch.full((size,), 2, dtype=torch.int32))
    # splits as a tensor
    output, _ = hvd.alltoall(inputs[check.rank], splits=torch.tensor(splits[check.rank]))
    check.check(label + ".tensor_splits", output, torch.cat(
        [parts[r][check.rank] for r in range(size)]))


def own_part(tensor, rank, size):
    rows = tensor.shape[0]
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    return torch.split(tensor, counts)[rank]


def reducescatter_cases(check, dtype, shape, case):
    label = "reducescatter.%s.%dd" % (name_of(dtype), len(shape))
    rows = 2 * check.size + 1  # uneven parts
    ops = [hvd.Sum, hvd.Min, hvd.Max] if dtype == torch.bool else [hvd.Average, hvd.Sum,
                                                                      hvd.Min, hvd.Max]
    for op in ops:
        sub = "%s.%s" % (label, op.name)
        inputs = check.inputs(dtype, op, with_rows(shape, rows), case)
        expected = own_part(reference(dtype, op, inputs), check.rank, check.size)
        check.check(sub, hvd.reducescatter(inputs[check.rank], name=sub, op=op), expected)
        check.check(sub + ".async", hvd.synchronize(
            hvd.reducescatter_async(inputs[check.rank], op=op)), expected)
    inputs = check.inputs(dtype, hvd.Sum, with_rows(shape, rows), case + 3)
    second = check.inputs(dtype, hvd.Sum, shape, case + 4)
    got = hvd.grouped_reducescatter([inputs[check.rank], second[check.rank]], op=hvd.Sum)
    check.check(label + ".grouped0", got[0],
                own_part(reference(dtype, hvd.Sum, inputs), check.rank, check.size))
    check.check(label + ".grouped1", got[1],
                own_part(reference(dtype, hvd.Sum, second), check.rank, check.size))
    got = hvd.synchronize(hvd.grouped_reducescatter_async([second[check.rank]], op=hvd.Sum))
    check.check(label + ".grouped_async", got[0],
                own_part(reference(dtype, hvd.Sum, second), check.rank, check.size))


def grouped_allreduce_cases(check, dtype, shape, case):
    label = "grouped_allreduce.%s.%dd" % (name_of(dtype), len(shape))
    op = hvd.Max if dtype == torch.bool else hvd.Sum
    first = check.inputs(dtype, op, shape, case)
    second = check.inputs(dtype, op, (4,), case + 1)
    expected = [reference(dtype, op, first), reference(dtype, op, second)]
    got = hvd.grouped_allreduce([first[check.rank], second[check.rank]], op=op, name=label)
    check.check(label + ".0", got[0], expected[0])
    check.check(label + ".1", got[1], expected[1])
    tensors = [first[check.rank].clone(), second[check.rank].clone()]
    returned = hvd.synchronize(hvd.grouped_allreduce_async_(tensors, op=op))
    if returned[0] is not tensors[0]:
        check.fail(label, "grouped_allreduce_async_ did not return its tensors")
    check.check(label + ".inplace0", tensors[0], expected[0])
    check.check(label + ".inplace1", tensors[1], expected[1])
    tensors = [first[check.rank].clone()]
    hvd.grouped_allreduce_(tensors, op=op)
    check.check(label + ".inplace_sync", tensors[0], expected[0])
    got = hvd.synchronize(hvd.grouped_allreduce_async([second[check.rank]], op=op))
    check.check(label + ".async", got[0], expected[1])


def dtype_matrix(check):
    case = 0
    for dtype in DTYPES:
        for shape in SHAPES:
            case += 10
            for cases in (allgather_cases, broadcast_cases, alltoall_cases,
                          reducescatter_cases, grouped_allreduce_cases):
                guarded(check, "%s.%s.%dd" % (cases.__name__, name_of(dtype), len(shape)),
                        lambda: cases(check, dtype, shape, case))


def process_sets(check):
    """Collectives on the set of every rank but the last, and on the last rank alone."""
    if check.size < 2:
        return
    head = hvd.add_process_set(list(range(check.size - 1)))
    tail = hvd.add_process_set([check.size - 1])
    mine = torch.full((2,), float(check.rank + 1))
    if head.included():
        members = range(check.size - 1)
        check.check("set.allreduce", hvd.allreduce(mine, op=hvd.Sum, process_set=head),
                    torch.full((2,), float(sum(r + 1 for r in members))))
        check.check("set.allgather", hvd.allgather(mine, process_set=head),
                    torch.cat([torch.full((2,), float(r + 1)) for r in members]))
        check.check("set.broadcast", hvd.broadcast(mine, 0, process_set=head),
                    torch.full((2,), 1.0))
        output = hvd.alltoall(torch.arange(len(members), dtype=torch.float32),
                              process_set=head)
        check.check("set.alltoall", output, torch.full((len(members),), float(head.rank())))
        part = hvd.reducescatter(torch.ones(len(members), 2), op=hvd.Sum, process_set=head)
        check.check("set.reducescatter", part, torch.full((1, 2), float(len(members))))
        check.check("set.grouped_allreduce",
                    hvd.grouped_allreduce([mine], op=hvd.Max, process_set=head)[0],
                    torch.full((2,), float(check.size - 1)))
        hvd.barrier(process_set=head)
        check.check("set.object", torch.tensor(hvd.allgather_object(check.rank, process_set=head)),
                    torch.tensor(list(members)))
        check.expect_error("set.not_member", hvd.InvalidArgumentError,
                           lambda: hvd.allreduce(mine, process_set=tail), "not in")
    else:
        check.check("set.alone", hvd.allreduce(mine, op=hvd.Sum, process_set=tail), mine)
        if hvd.broadcast_object("x", check.size - 1, process_set=tail) != "x":
            check.fail("set.alone.broadcast_object", "wrong object")
        hvd.barrier(process_set=tail)
    hvd.barrier()
    hvd.remove_process_set(head)
    hvd.remove_process_set(tail)


def global_roots(check):
    """root_rank on a set is a global rank (Horovod 0.28.1): on [1, 2] rank 2 is the root of a
    broadcast, broadcast_object, the broadcast gradient and broadcast_optimizer_state; rank 0
    is no root there (ValueError, as Horovod's std::invalid_argument)."""
    if check.size < 3:
        return
    pair = hvd.add_process_set([1, 2])
    if pair.included():
        mine = torch.full((2,), float(check.rank * 10))
        check.check("root2.broadcast", hvd.broadcast(mine, 2, process_set=pair),
                    torch.full((2,), 20.0))
        check.check("root1.broadcast_", hvd.broadcast_(mine.clone(), 1, process_set=pair),
                    torch.full((2,), 10.0))
        got = hvd.broadcast_object({"from": check.rank}, root_rank=2, process_set=pair)
        if got != {"from": 2}:
            check.fail("root2.broadcast_object", "got %r" % (got,))
        else:
            check.passed += 1
        x = torch.ones(2, requires_grad=True)
        (hvd.broadcast(x, 2, process_set=pair) * float(check.rank)).sum().backward()
        check.check("root2.broadcast.grad", x.grad,
                    torch.full((2,), 1.5 if check.rank == 2 else 0.0))
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * check.rank, momentum=0.9)
        if check.rank == 2:  # only the root has momentum buffers
            model(torch.ones(4, 3)).sum().backward()
            optimizer.step()
        hvd.broadcast_optimizer_state(optimizer, root_rank=2, process_set=pair)
        check.check("root2.optimizer.lr", torch.tensor(optimizer.param_groups[0]["lr"]),
                    torch.tensor(0.2))
        buffers = hvd.allgather_object(
            [optimizer.state[p]["momentum_buffer"].tolist() for p in model.parameters()],
            process_set=pair)
        if buffers[0] != buffers[1]:
            check.fail("root2.optimizer.state", "set members differ: %r" % (buffers,))
        else:
            check.passed += 1
        expected = ("root_rank 0 is not a member of process set %d (ranks 1, 2)"
                    % pair.process_set_id)
        check.expect_error("root0.broadcast", ValueError,
                           lambda: hvd.broadcast(mine, 0, name="root0", process_set=pair),
                           "broadcast of 'root0': " + expected)
        check.expect_error("root0.broadcast_object", ValueError,
                           lambda: hvd.broadcast_object("x", 0, process_set=pair), expected)
    hvd.barrier()
    hvd.remove_process_set(pair)


def join_uneven(check):
    """Rank r makes r + 1 allreduces, then joins; the joined ranks contribute zeros."""
    for step in range(check.rank + 1):
        got = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.step.%d" % step)
        active = sum(1 for r in range(check.size) if r >= step)
        check.check("join.step.%d" % step, got, torch.full((3,), float(active)))
    last = hvd.join()
    check.check("join.last", torch.tensor(last), torch.tensor(check.size - 1))
    # afterwards unnamed requests match again
    check.check("join.after", hvd.allreduce(torch.ones(2), op=hvd.Sum),
                torch.full((2,), float(check.size)))
    hvd.barrier()


def gradients(check):
    size, rank = check.size, check.rank
    weights = [float(r + 1) for r in range(size)]
    mean_weight = sum(weights) / size
    # allgather: rank r's rows of the averaged output gradient
    x = torch.full((rows_of(rank), 2), 1.0, requires_grad=True)
    y = hvd.allgather(x, name="grad.allgather")
    (y * weights[rank]).sum().backward()
    check.check("grad.allgather", x.grad, torch.full((rows_of(rank), 2), mean_weight))
    # grouped allgather
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(rows_of(rank), 3, requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b])
    (ga.sum() * weights[rank] + gb.sum() * 2.0).backward()
    check.check("grad.grouped_allgather.a", a.grad, torch.full((2,), mean_weight))
    check.check("grad.grouped_allgather.b", b.grad, torch.full((rows_of(rank), 3), 2.0))
    # broadcast: the root gets the average, the others zeros
    for root in range(size):
        x = torch.ones(3, requires_grad=True)
        y = hvd.broadcast(x, root, name="grad.broadcast.%d" % root)
        (y * weights[rank]).sum().backward()
        expected = mean_weight if rank == root else 0.0
        check.check("grad.broadcast.%d" % root, x.grad, torch.full((3,), expected))
    # reducescatter, as Horovod 0.28.1 defines its gradient: the gather of the output
    # gradients, times the set size for Sum
    for op, factor in ((hvd.Sum, float(size)), (hvd.Average, 1.0)):
        x = torch.ones(size, 2, requires_grad=True)
        y = hvd.reducescatter(x, op=op)
        (y * weights[rank]).sum().backward()
        expected = torch.tensor(weights).repeat_interleave(2).view(size, 2) * factor
        check.check("grad.reducescatter." + op.name, x.grad, expected)
    # grouped allreduce
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    ra, rb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    (ra.sum() * weights[rank] + rb.sum()).backward()
    check.check("grad.grouped_allreduce.a", a.grad, torch.full((2,), sum(weights)))
    check.check("grad.grouped_allreduce.b", b.grad, torch.full((3,), float(size)))
    # alltoall: the gradient goes back to where each row came from
    x = torch.ones(size, 2, requires_grad=True)
    y = hvd.alltoall(x)  # without splits Horovod returns the tensor alone
    (y * torch.arange(size, dtype=torch.float32).view(size, 1)).sum().backward()
    check.check("grad.alltoall", x.grad, torch.full((size, 2), float(rank)))


def gradients_more(check):
    """Gradients in float16, bfloat16 and float64, of the grouped reducescatter, of
    allreduce with scale factors and of the collectives on a process set."""
    size, rank = check.size, check.rank
    weights = [float(r + 1) for r in range(size)]
    mean_weight = sum(weights) / size
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        label = "grad2.%s" % name_of(dtype)
        x = torch.ones(3, dtype=dtype, requires_grad=True)
        (hvd.allreduce(x, op=hvd.Sum) * weights[rank]).sum().backward()
        check.check(label + ".allreduce", x.grad, torch.full((3,), sum(weights), dtype=dtype))
        x = torch.ones(rows_of(rank), 2, dtype=dtype, requires_grad=True)
        (hvd.allgather(x) * weights[rank]).sum().backward()
        check.check(label + ".allgather", x.grad,
                    torch.full((rows_of(rank), 2), mean_weight, dtype=dtype))
        x = torch.ones(2, dtype=dtype, requires_grad=True)
        (hvd.broadcast(x, 0) * weights[rank]).sum().backward()
        check.check(label + ".broadcast", x.grad,
                    torch.full((2,), mean_weight if rank == 0 else 0.0, dtype=dtype))
        x = torch.ones(size, 2, dtype=dtype, requires_grad=True)
        (hvd.reducescatter(x, op=hvd.Sum) * weights[rank]).sum().backward()
        check.check(label + ".reducescatter", x.grad,
                    torch.tensor(weights, dtype=dtype).repeat_interleave(2).view(size, 2) * size)
        x = torch.ones(size, 2, dtype=dtype, requires_grad=True)
        y = hvd.alltoall(x)
        (y * torch.arange(size, dtype=dtype).view(size, 1)).sum().backward()
        check.check(label + ".alltoall", x.grad, torch.full((size, 2), float(rank), dtype=dtype))
    # grouped reducescatter: each tensor's gradient is its own gather
    a = torch.ones(size, 2, requires_grad=True)
    b = torch.ones(size + 1, requires_grad=True)
    pa, pb = hvd.grouped_reducescatter([a, b], op=hvd.Sum)
    (pa.sum() * weights[rank] + pb.sum() * 3.0).backward()
    check.check("grad2.grouped_reducescatter.a", a.grad,
                torch.tensor(weights).repeat_interleave(2).view(size, 2) * size)
    check.check("grad2.grouped_reducescatter.b", b.grad, torch.full((size + 1,), 3.0 * size))
    # scale factors apply to the gradient as they do to the value
    x = torch.ones(2, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
     * weights[rank]).sum().backward()
    check.check("grad2.allreduce.scaled", x.grad, torch.full((2,), sum(weights)))
    # alltoall with uneven splits: rank r sends j + 1 rows to rank j
    x = torch.ones(sum(j + 1 for j in range(size)), requires_grad=True)
    y, received = hvd.alltoall(x, splits=[j + 1 for j in range(size)])
    (y * weights[rank]).sum().backward()
    expected = torch.cat([torch.full((j + 1,), weights[j]) for j in range(size)])
    check.check("grad2.alltoall.splits", x.grad, expected)
    if size < 2:
        return
    head = hvd.add_process_set(list(range(size - 1)))
    if head.included():
        members = [weights[r] for r in range(size - 1)]
        x = torch.ones(2, requires_grad=True)
        (hvd.allreduce(x, op=hvd.Sum, process_set=head) * weights[rank]).sum().backward()
        check.check("grad2.set.allreduce", x.grad, torch.full((2,), sum(members)))
        x = torch.ones(1, 2, requires_grad=True)
        (hvd.allgather(x, process_set=head) * weights[rank]).sum().backward()
        check.check("grad2.set.allgather", x.grad,
                    torch.full((1, 2), sum(members) / len(members)))
        x = torch.ones(2, requires_grad=True)
        (hvd.broadcast(x, 0, process_set=head) * weights[rank]).sum().backward()
        check.check("grad2.set.broadcast", x.grad,
                    torch.full((2,), sum(members) / len(members) if head.rank() == 0 else 0.0))
    hvd.barrier()
    hvd.remove_process_set(head)


def objects(check):
    payload = {"rank": check.rank, "text": "x" * (check.rank * 100), "list": [1, 2.5, None]}
    for root in range(check.size):
        got = hvd.broadcast_object(payload, root_rank=root, name="object.%d" % root)
        want = {"rank": root, "text": "x" * (root * 100), "list": [1, 2.5, None]}
        if got != want:
            check.fail("broadcast_object.%d" % root, "got %r" % (got,))
        else:
            check.passed += 1
    got = hvd.allgather_object(payload)
    if [g["rank"] for g in got] != list(range(check.size)) or got[check.rank] != payload:
        check.fail("allgather_object", "got %r" % (got,))
    else:
        check.passed += 1
    if hvd.allgather_object(None, name="none") != [None] * check.size:
        check.fail("allgather_object.none", "wrong")


def parameters(check):
    torch.manual_seed(check.rank)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    torch.manual_seed(0)
    reference_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    for (name, got), want in zip(model.state_dict().items(),
                                 reference_model.state_dict().values()):
        check.check("parameters." + name, got, want)
    torch.manual_seed(check.rank + 10)
    model = torch.nn.Linear(2, 2)
    hvd.broadcast_parameters(model.named_parameters(), root_rank=check.size - 1)
    torch.manual_seed(check.size - 1 + 10)
    want = torch.nn.Linear(2, 2)
    check.check("named_parameters.weight", model.weight.detach(), want.weight.detach())


OPTIMIZERS = [
    ("SGD", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("Adam", lambda p: torch.optim.Adam(p, lr=0.01)),
    ("AdamW", lambda p: torch.optim.AdamW(p, lr=0.01)),
    ("Adagrad", lambda p: torch.optim.Adagrad(p, lr=0.01)),
    ("Adadelta", lambda p: torch.optim.Adadelta(p)),
    ("Adamax", lambda p: torch.optim.Adamax(p)),
    ("ASGD", lambda p: torch.optim.ASGD(p)),
    ("NAdam", lambda p: torch.optim.NAdam(p)),
    ("RAdam", lambda p: torch.optim.RAdam(p)),
    ("RMSprop", lambda p: torch.optim.RMSprop(p, momentum=0.5, centered=True)),
    ("Rprop", lambda p: torch.optim.Rprop(p)),
    ("LBFGS", lambda p: torch.optim.LBFGS(p)),
]


def optimizer_states(check):
    """The root has taken rank-dependent steps; after the broadcast every rank's optimizer
    state and hyperparameters equal the root's, and the parameters are untouched."""
    for label, make in OPTIMIZERS:
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        optimizer = make(model.parameters())
        optimizer.param_groups[0]["lr"] = 0.5 + check.rank
        if check.rank == 0 and label != "LBFGS":
            for step in range(2):
                optimizer.zero_grad()
                model(torch.full((4, 3), float(step + 1))).sum().backward()
                optimizer.step()
        before = [p.detach().clone() for p in model.parameters()]
        try:
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        except Exception as exc:
            check.fail("optimizer." + label, "%s: %s" % (type(exc).__name__, exc))
            continue
        for i, p in enumerate(model.parameters()):
            check.check("optimizer.%s.param%d" % (label, i), p.detach(), before[i])
        if optimizer.param_groups[0]["lr"] != 0.5:
            check.fail("optimizer.%s.lr" % label, optimizer.param_groups[0]["lr"])
        state = optimizer.state_dict()["state"]
        gathered = hvd.allgather_object(
            {k: {n: v.tolist() if torch.is_tensor(v) else v for n, v in s.items()}
             for k, s in state.items()}, name="optimizer.check.%s" % label)
        if any(g != gathered[0] for g in gathered):
            check.fail("optimizer.%s.state" % label, "ranks differ")
        elif label != "LBFGS" and not gathered[0]:
            check.fail("optimizer.%s.state" % label, "no state was created")
        else:
            check.passed += 1


def reused_outputs(check):
    """Large allocated outputs come from a pool that reuses a block only once nothing else
    refers to it: what the caller keeps (the tensor, a view of it, its numpy array) is never
    overwritten, and a dropped output's storage serves the next one of its size."""
    size, rank = check.size, check.rank
    rows = 1 << 18  # 1 MiB of float32 per rank: pooled
    expected = lambda step: torch.cat(  # noqa: E731
        [torch.full((rows,), float(100 * step + r)) for r in range(size)])
    gather = lambda step: hvd.allgather(  # noqa: E731
        torch.full((rows,), float(100 * step + rank)), name="pool.gather")
    kept = gather(0)
    view = gather(1)[rows // 2:]
    as_numpy = gather(2).numpy()
    dropped = gather(3)
    address = dropped.data_ptr()
    del dropped
    again = gather(4)
    check.check("pool.reuses_a_dropped_output", torch.tensor(again.data_ptr() == address),
                torch.tensor(True))
    check.check("pool.new_result", again, expected(4))
    check.check("pool.kept_tensor", kept, expected(0))
    check.check("pool.kept_view", view, expected(1)[rows // 2:])
    check.check("pool.kept_numpy", torch.from_numpy(as_numpy), expected(2))
    addresses = {kept.data_ptr(), as_numpy.ctypes.data, again.data_ptr()}
    check.check("pool.kept_blocks_distinct", torch.tensor(len(addresses)), torch.tensor(3))
    # The largest pooled output, 128 MiB (64 MiB per rank on two ranks), is reused too: the
    # second call touches no fresh page of it (a fresh one faults in every 4 KiB page; its
    # address proves nothing, since the system often maps a new block where the old was).
    del kept, view, as_numpy, again
    big = (128 << 20) // 4 // size
    hvd.allgather(torch.full((big,), float(rank)), name="pool.big")  # dropped at once
    source = torch.full((big,), float(rank + 1))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = hvd.allgather(source, name="pool.big")
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    pages = second.nbytes // 4096
    if faults > pages // 4:
        check.fail("pool.reuses_the_largest_block",
                   "%d page faults in an allgather of a %d-page output" % (faults, pages))
    else:
        check.passed += 1
    check.check("pool.largest_block_values", second[::big], torch.arange(1.0, size + 1.0))
    del second, source


def errors(check):
    size = check.size
    check.expect_error("error.alltoall_splits_count", hvd.InvalidArgumentError,
                       lambda: hvd.alltoall(torch.ones(4), splits=[1] * (size + 1)), "splits")
    check.expect_error("error.broadcast_root", RuntimeError,
                       lambda: hvd.broadcast(torch.ones(2), size, name="error.root"), "root")
    check.expect_error("error.grouped_empty", hvd.InvalidArgumentError,
                       lambda: hvd.grouped_allgather([]), "at least one")
    if size > 1:  # ranks disagree on the second dimension
        check.expect_error("error.allgather_shape", RuntimeError,
                           lambda: hvd.allgather(torch.ones(2, 2 + check.rank),
                                                 name="error.shape"), "error.shape")
    check.expect_error("error.dtype", RuntimeError,
                       lambda: hvd.broadcast(torch.ones(2, dtype=torch.complex64), 0), "dtype")
    check.expect_error("error.type", TypeError, lambda: hvd.allgather([1, 2]), "torch.Tensor")
    hvd.barrier()


def main():
    hvd.init()
    check = Checker()
    dtype_matrix(check)
    for section in (process_sets, global_roots, join_uneven, gradients, gradients_more, objects, parameters,
                    optimizer_states, reused_outputs, errors):
        guarded(check, section.__name__, lambda: section(check))
    hvd.shutdown()
    for failure in check.failures:
        print("rank %d: FAIL %s" % (check.rank, failure), flush=True)
    print("rank %d/%d: %d cases ok, %d failed" % (
        check.rank, check.size, check.passed, len(check.failures)), flush=True)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
