"""The contracts tutti.common owns for every frontend: the C ABI's numbers (checked against
the header), the names of unnamed requests, and how rows split over a process set.
Process-set size and rank by id are checked on 3 ranks in workers/process_sets.py."""

import os
import re

import pytest

import tutti.common as common
from tutti.common import basics, c_api, core, naming
from tutti.common.process_sets import even_splits, reducescatter_rows


def header_text():
    path = os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti",
                        "common/include/tutti/c_api.h")
    with open(path) as stream:
        return re.sub(r"/\*.*?\*/", "", stream.read(), flags=re.S)  # without comments


def header_enums():
    """typedef name -> {constant: value} of every enum in c_api.h."""
    enums = {}
    for body, name in re.findall(r"typedef enum \{(.*?)\}\s*(\w+);", header_text(), re.S):
        enums[name] = {
            constant: int(value)
            for constant, value in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)
        }
    return enums


def test_every_enum_of_the_header_is_stated_once_in_python():
    enums = header_enums()
    assert sorted(enums) == sorted(c_api.HEADER_ENUMS), "an enum of c_api.h has no Python owner"
    for name, (enum_class, prefix) in c_api.HEADER_ENUMS.items():
        stated = {prefix + member.name: int(member) for member in enum_class}
        assert stated == enums[name], name


def test_defines_match_the_header():
    defines = dict(re.findall(r"#define (TUTTI_\w+) (\d+)", header_text()))
    for name, value in c_api.HEADER_DEFINES.items():
        assert int(defines[name]) == value, name


def test_the_loaded_core_speaks_the_stated_version():
    assert core.lib.tutti_c_api_version() == c_api.C_API_VERSION
    assert core.lib.tutti_c_api_minor_version() >= c_api.C_API_MINOR_VERSION


def test_dtype_names_and_reduce_codes_come_from_the_enums():
    assert common.DTYPE == {"uint8": 0, "int8": 1, "uint16": 2, "int16": 3, "int32": 4,
                            "int64": 5, "float16": 6, "bfloat16": 7, "float32": 8,
                            "float64": 9, "bool": 10}
    for op in common.ReduceOp:
        code = basics.core_reduce_op(op)
        assert c_api.ReduceCode(code).name == op.name.upper()
        assert basics.reduce_op_from_core(code) is op
    assert basics.core_reduce_op(common.Adasum) == 5  # Horovod's 2
    for collective in c_api.Collective:  # the short names core.ALLREDUCE, ...
        assert getattr(core, collective.name) is collective
    assert core.ALLREDUCE == 0 and core.JOIN == 6


def test_an_unknown_reduce_op_names_the_choices():
    with pytest.raises(common.InvalidArgumentError) as info:
        basics.core_reduce_op(17)
    assert str(info.value) == ("op must be one of hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, "
                               "hvd.Max, hvd.Product; got 17")


def test_exception_classes_carry_the_status_codes():
    assert common.InvalidArgumentError.status == c_api.Status.ERR_INVALID_ARGUMENT == 2
    assert common.InternalError.status == 6


@pytest.fixture
def fresh_numbering():
    naming.restart_numbering()
    yield
    naming.restart_numbering()


def test_unnamed_requests_count_per_frontend_kind_and_set(fresh_numbering):
    names = [
        naming.request_name(None, "allreduce", 0),
        naming.request_name(None, "allreduce", 0),
        naming.request_name(None, "allgather", 0),
        naming.request_name(None, "allreduce", 2),
        naming.request_name(None, "allreduce", 0, prefix="torch"),
        naming.request_name(None, "allreduce", 2, prefix="tf"),
        naming.request_name(None, "allreduce", 0),
    ]
    assert names == [
        "allreduce.noname.0",
        "allreduce.noname.1",
        "allgather.noname.0",
        "allreduce.noname.0.set2",
        "torch.allreduce.noname.0",
        "tf.allreduce.noname.0.set2",
        "allreduce.noname.2",
    ]


def test_given_names_pass_unchanged_and_consume_no_number(fresh_numbering):
    assert naming.request_name("grad.3", "allreduce", 1) == "grad.3"
    assert naming.request_name(None, "allreduce", 1) == "allreduce.noname.0.set1"


@pytest.mark.parametrize("bad", ["", 3, b"x"])
def test_a_bad_name_is_refused(bad, fresh_numbering):
    with pytest.raises(common.InvalidArgumentError) as info:
        naming.request_name(bad, "allreduce", 0)
    assert str(info.value) == "name must be a non-empty string, got %r" % (bad,)
    assert isinstance(info.value, ValueError)  # as in Horovod


def test_numbering_restarts_after_join_and_in_a_new_session(fresh_numbering):
    naming.request_name(None, "broadcast", 0)
    naming.restart_numbering()
    assert naming.request_name(None, "broadcast", 0) == "broadcast.noname.0"
    assert naming.request_name(None, "broadcast", 0) == "broadcast.noname.1"
    common.init()  # a local single-process job starts a new session
    try:
        assert naming.request_name(None, "broadcast", 0) == "broadcast.noname.0"
    finally:
        common.shutdown()


@pytest.mark.parametrize("rows, size, expected", [
    (7, 3, [3, 2, 2]),
    (6, 3, [2, 2, 2]),
    (2, 4, [1, 1, 0, 0]),
    (0, 2, [0, 0]),
])
def test_rows_split_as_evenly_as_possible_first_ranks_first(rows, size, expected):
    assert even_splits(rows, size) == expected
    assert [reducescatter_rows(rows, r, size) for r in range(size)] == expected
