"""Tests for Dataset.reduce(initial_state, reduce_func): reduce_func(state, element) -> state.

As in tf.data, reduce_func takes exactly two arguments: the state (whatever its
structure) and the element (a tuple element is passed as one tuple, not unpacked).
"""

import numpy as np
import pytest

import nbdata as nd

from equivalence import Boom, fusing, reference


def assert_int64_scalar(v, expected):
    a = np.asarray(v)
    assert a.shape == () and a.dtype == np.int64
    assert int(a) == expected


def test_doc_example_count():
    assert_int64_scalar(nd.Dataset.range(5).reduce(np.int64(0), lambda x, _: x + 1), 5)


def test_doc_example_sum():
    assert_int64_scalar(nd.Dataset.range(5).reduce(np.int64(0), lambda x, y: x + y), 10)


def test_python_int_initial_state_is_int64():
    assert_int64_scalar(nd.Dataset.range(5).reduce(0, lambda x, y: x + y), 10)


def test_result_is_numpy_scalar():
    r = nd.Dataset.range(4).reduce(np.int64(0), lambda x, y: x + y)
    assert isinstance(r, (np.int64, np.ndarray))


def test_empty_dataset_returns_initial_state():
    assert_int64_scalar(nd.Dataset.range(0).reduce(np.int64(7), lambda x, y: x + y), 7)


def test_float32_state():
    ds = nd.Dataset.from_tensor_slices(np.array([0.5, 1.5, 2.0], np.float32))
    r = ds.reduce(np.float32(0), lambda s, x: s + x)
    assert np.asarray(r).dtype == np.float32 and float(r) == 4.0


def test_tuple_state():
    s, n = nd.Dataset.range(1, 6).reduce((np.int64(0), np.int64(0)), lambda state, x: (state[0] + x, state[1] + 1))
    assert_int64_scalar(s, 15)
    assert_int64_scalar(n, 5)


def test_tuple_state_result_is_tuple():
    r = nd.Dataset.range(3).reduce((np.int64(0), np.float64(1.0)), lambda st, x: (st[0] + x, st[1] * 2.0))
    assert isinstance(r, tuple) and len(r) == 2
    assert np.asarray(r[1]).dtype == np.float64 and float(r[1]) == 8.0


def test_dict_state():
    r = nd.Dataset.range(4).reduce({"sum": np.int64(0), "max": np.int64(-1)},
                                   lambda st, x: {"sum": st["sum"] + x, "max": np.maximum(st["max"], x)})
    assert isinstance(r, dict) and set(r) == {"sum", "max"}
    assert_int64_scalar(r["sum"], 6)
    assert_int64_scalar(r["max"], 3)


def test_tuple_elements_passed_as_one_argument():
    ds = nd.Dataset.from_tensor_slices((np.array([1, 2, 3]), np.array([4, 5, 6])))
    assert_int64_scalar(ds.reduce(np.int64(0), lambda s, e: s + e[0] * e[1]), 32)


def test_dict_elements():
    ds = nd.Dataset.from_tensor_slices({"a": np.array([1, 2, 3]), "b": np.array([10, 20, 30])})
    assert_int64_scalar(ds.reduce(np.int64(0), lambda s, d: s + d["a"] * d["b"]), 140)


def test_vector_state():
    ds = nd.Dataset.from_tensor_slices(np.arange(12, dtype=np.float64).reshape(4, 3))
    r = ds.reduce(np.zeros(3), lambda s, x: s + x)
    assert isinstance(r, np.ndarray) and r.dtype == np.float64 and r.shape == (3,)
    np.testing.assert_array_equal(r, [18.0, 22.0, 26.0])


def test_reduce_after_batch():
    r = nd.Dataset.range(10).batch(3).reduce(np.int64(0), lambda s, b: s + b.sum())
    assert_int64_scalar(r, 45)


def test_reduce_after_filter_and_map_matches_reference():
    ds = nd.Dataset.range(100).filter(lambda x: x % 3 == 0).map(lambda x: x * 2)
    want = sum(2 * x for x in range(0, 100, 3))
    assert_int64_scalar(fusing(ds).reduce(np.int64(0), lambda s, x: s + x), want)
    assert_int64_scalar(reference(ds).reduce(np.int64(0), lambda s, x: s + x), want)


def test_reduce_is_repeatable():
    ds = nd.Dataset.range(4)
    f = lambda s, x: s + x  # noqa: E731
    assert int(ds.reduce(np.int64(0), f)) == int(ds.reduce(np.int64(0), f)) == 6


def test_reduce_with_python_only_function():
    seen = []

    def f(s, x):
        seen.append(int(x))
        return s + x

    assert_int64_scalar(nd.Dataset.range(4).reduce(np.int64(0), f), 6)
    assert seen == [0, 1, 2, 3]


# ---------------------------------------------------------------- bad input

def test_state_structure_change_rejected():
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(3).reduce(np.int64(0), lambda s, x: (s, x))


def test_non_callable_rejected():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).reduce(np.int64(0), 5)


def test_error_in_reduce_func_is_chained():
    def f(s, x):
        if x == 2:
            raise Boom("bad element")
        return s + x

    with pytest.raises(nd.errors.OpError) as info:
        nd.Dataset.range(5).reduce(np.int64(0), f)
    assert "reduce" in str(info.value)
    assert isinstance(info.value.__cause__, Boom)


def _sparse(i):
    return nd.SparseTensor(np.array([[0, 0]]), i * np.array([1]), np.array([1, 1]))


def test_sparse_state_stays_sparse():
    # tf.data: a SparseTensor initial state gives a sparse state (its dtype kept).
    got = nd.Dataset.from_tensors(_sparse(3)).reduce(_sparse(0), lambda state, value: value)
    assert got == _sparse(3)
    got = nd.Dataset.range(1, 4).map(lambda i: {"dense": i, "sparse": _sparse(i)}).reduce(
        {"dense": np.int64(0), "sparse": _sparse(0)},
        lambda s, v: {"dense": s["dense"] + v["dense"], "sparse": v["sparse"]})
    assert int(got["dense"]) == 6 and got["sparse"] == _sparse(3)


def test_sparse_state_keeps_its_dtype():
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(2).reduce(_sparse(0), lambda state, value: _sparse(0.5))
