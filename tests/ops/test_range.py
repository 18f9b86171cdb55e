"""Dataset.range: Python range semantics, int64 scalars, output_type/dtype."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_reference_matches


def _values(ds):
    out = list(ds)
    for x in out:
        assert isinstance(x, np.generic), type(x)
    return [int(x) for x in out]


@pytest.mark.parametrize(
    "args",
    [
        (5,),
        (0,),
        (-3,),
        (2, 5),
        (5, 2),
        (-3, 3),
        (1, 10, 3),
        (10, 0, -3),
        (5, 1, -2),
        (1, 5, -1),
        (0, 0, 1),
        (-1, -10, -4),
        (3, 4, 100),
    ],
)
def test_matches_python_range(args):
    ds = nd.Dataset.range(*args)
    assert _values(ds) == list(range(*args))
    assert ds.cardinality() == len(range(*args))


def test_elements_are_int64_scalars():
    elems = list(nd.Dataset.range(3))
    assert [type(x) for x in elems] == [np.int64] * 3
    spec = nd.Dataset.range(3).element_spec
    assert spec == nd.TensorSpec((), np.int64)
    assert spec.shape == () and spec.dtype == np.int64


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16, np.int64])
def test_output_type(dtype):
    ds = nd.Dataset.range(1, 4, output_type=dtype)
    elems = list(ds)
    assert [type(x) for x in elems] == [dtype] * 3
    assert [int(x) for x in elems] == [1, 2, 3]
    assert ds.element_spec == nd.TensorSpec((), dtype)


def test_dtype_keyword_is_accepted():
    ds = nd.Dataset.range(3, dtype=np.int32)
    elems = list(ds)
    assert [type(x) for x in elems] == [np.int32] * 3
    assert ds.element_spec.dtype == np.int32


def test_numpy_integer_arguments():
    ds = nd.Dataset.range(np.int64(2), np.int32(8), np.int16(2))
    assert _values(ds) == [2, 4, 6]


def test_large_values():
    start = 2**40
    ds = nd.Dataset.range(start, start + 3)
    assert _values(ds) == [start, start + 1, start + 2]


def test_empty_range_iterates_nothing_and_reiterates():
    ds = nd.Dataset.range(4, 4)
    assert list(ds) == []
    assert list(ds) == []
    assert ds.cardinality() == 0


def test_reiteration_restarts():
    ds = nd.Dataset.range(4)
    assert _values(ds) == [0, 1, 2, 3]
    assert _values(ds) == [0, 1, 2, 3]


def test_as_numpy_iterator():
    assert [int(x) for x in nd.Dataset.range(3).as_numpy_iterator()] == [0, 1, 2]


def test_reference_path_matches():
    for args in [(7,), (2, 9, 3), (9, 2, -2)]:
        ds = nd.Dataset.range(*args).map(lambda x: x)  # a fused stage reads the range source
        got = assert_reference_matches(ds)
        assert [int(x) for x in got] == list(range(*args))


def test_zero_step_is_rejected():
    with pytest.raises(ValueError, match=r"(?i)step|range"):
        nd.Dataset.range(0, 10, 0)


@pytest.mark.parametrize("args", [(), (1, 2, 3, 4)])
def test_wrong_number_of_arguments(args):
    with pytest.raises(TypeError):
        nd.Dataset.range(*args)


@pytest.mark.parametrize("bad", ["3", None, [3]])
def test_non_integer_argument(bad):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(bad)
