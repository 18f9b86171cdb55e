"""Dataset.filter: keeps the elements whose predicate is a true scalar bool."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_reference_matches, fused, reference


def test_keeps_matching_elements_in_order():
    ds = nd.Dataset.range(10).filter(lambda x: x % 3 == 0)
    got = list(ds)
    assert [int(x) for x in got] == [0, 3, 6, 9]
    assert all(type(x) is np.int64 for x in got)


def test_element_spec_unchanged_and_cardinality_unknown():
    src = nd.Dataset.from_tensor_slices(np.zeros((4, 2), np.float32))
    ds = src.filter(lambda x: x[0] == 0)
    assert ds.element_spec == src.element_spec == nd.TensorSpec((2,), np.float32)
    assert ds.cardinality() == nd.UNKNOWN


def test_python_bool_predicate():
    ds = nd.Dataset.range(6).filter(lambda x: bool(x > 3))
    assert [int(x) for x in ds] == [4, 5]


def test_numpy_bool_predicate():
    ds = nd.Dataset.range(6).filter(lambda x: np.bool_(x < 2))
    assert [int(x) for x in ds] == [0, 1]


def test_constant_predicates():
    assert list(nd.Dataset.range(5).filter(lambda x: False)) == []
    assert [int(x) for x in nd.Dataset.range(3).filter(lambda x: True)] == [0, 1, 2]


def test_array_elements_kept_whole():
    arr = np.arange(20, dtype=np.int32).reshape(5, 4)
    ds = nd.Dataset.from_tensor_slices(arr).filter(lambda r: r.sum() > 30)
    got = list(ds)
    np.testing.assert_array_equal(np.stack(got), arr[arr.sum(axis=1) > 30])
    assert all(g.dtype == np.int32 and g.shape == (4,) for g in got)


def test_tuple_unpacking():
    src = nd.Dataset.from_tensor_slices((np.arange(6), np.array([1, 0, 1, 0, 0, 1], np.int8)))
    ds = src.filter(lambda x, keep: keep == 1)
    got = list(ds)
    assert [(int(x), int(k)) for x, k in got] == [(0, 1), (2, 1), (5, 1)]
    assert all(type(e) is tuple for e in got)


def test_dict_argument():
    src = nd.Dataset.from_tensor_slices({"v": np.arange(5), "w": np.arange(5)[::-1].copy()})
    ds = src.filter(lambda d: d["v"] > d["w"])
    assert [(int(e["v"]), int(e["w"])) for e in ds] == [(3, 1), (4, 0)]


def test_string_elements():
    ds = nd.Dataset.from_tensor_slices(["apple", "kiwi", "avocado"]).filter(lambda s: s.startswith(b"a"))
    assert list(ds) == [b"apple", b"avocado"]


def test_filter_then_map_then_filter():
    ds = (
        nd.Dataset.range(30)
        .filter(lambda x: x % 2 == 0)
        .map(lambda x: x * 10)
        .filter(lambda x: x % 3 == 0)
    )
    assert [int(x) for x in ds] == [x * 10 for x in range(30) if x % 2 == 0 and (x * 10) % 3 == 0]


def test_filter_before_batch():
    ds = nd.Dataset.range(20).filter(lambda x: x % 3 != 0).batch(4)
    got = list(ds)
    kept = [x for x in range(20) if x % 3 != 0]
    assert [list(b) for b in got] == [kept[i:i + 4] for i in range(0, len(kept), 4)]
    assert all(b.dtype == np.int64 for b in got)


def test_empty_input():
    assert list(nd.Dataset.range(0).filter(lambda x: True)) == []


def test_filter_on_infinite_with_take():
    ds = nd.Dataset.range(5).repeat().filter(lambda x: x == 4).take(3)
    assert [int(x) for x in ds] == [4, 4, 4]


def test_reiteration():
    ds = nd.Dataset.range(10).filter(lambda x: x > 6)
    assert [int(x) for x in ds] == [7, 8, 9]
    assert [int(x) for x in ds] == [7, 8, 9]


def test_reference_path_matches():
    rng = np.random.default_rng(1)
    arr = rng.normal(size=(101, 3)).astype(np.float32)
    ds = (
        nd.Dataset.from_tensor_slices((arr, np.arange(101)))
        .filter(lambda x, i: x[0] > 0)
        .map(lambda x, i: (x * 2.0, i))
        .filter(lambda x, i: i % 2 == 1)
        .batch(7)
    )
    got = assert_reference_matches(ds)
    idx = np.concatenate([b[1] for b in got])
    expected = [i for i in range(101) if arr[i, 0] > 0 and i % 2 == 1]
    assert list(idx) == expected


def test_reference_path_matches_python_predicate():
    ds = nd.Dataset.range(25).filter(lambda x: str(int(x)).endswith("1"))
    got = assert_reference_matches(ds)
    assert [int(x) for x in got] == [1, 11, 21]


@pytest.mark.parametrize("n", [1, 1023, 1025, 4097, 10007])
def test_order_preserved_across_chunk_boundaries(n):
    ds = nd.Dataset.range(n).filter(lambda v: v % 7 != 3).map(lambda v: v * 2).batch(33)
    expected = [v * 2 for v in range(n) if v % 7 != 3]
    for out in (fused(ds), list(reference(ds))):
        assert all(b.dtype == np.int64 for b in out)
        assert [len(b) for b in out[:-1]] == [33] * (len(out) - 1)
        np.testing.assert_array_equal(np.concatenate(out), expected)


def test_filter_on_batch_shape_drops_partial_batch():
    got = list(nd.Dataset.range(10).batch(4).filter(lambda b: b.shape[0] == 4))
    assert [b.tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_zero_d_bool_array_predicate():
    ds = nd.Dataset.range(4).filter(lambda x: np.array(x > 1))
    assert [int(x) for x in ds] == [2, 3]


# ------------------------------------------------------------- errors

def test_integer_predicate_is_rejected_naming_filter():
    with pytest.raises((TypeError, ValueError), match="filter"):
        list(nd.Dataset.range(5).filter(lambda x: x % 2))


def test_float_predicate_is_rejected_naming_filter():
    with pytest.raises((TypeError, ValueError), match="filter"):
        list(nd.Dataset.range(5).filter(lambda x: x * 0.5))


def test_non_scalar_bool_predicate_is_rejected():
    src = nd.Dataset.from_tensor_slices(np.zeros((3, 2)))
    with pytest.raises((TypeError, ValueError), match="filter"):
        list(src.filter(lambda x: x > 0))


def test_tuple_predicate_is_rejected():
    with pytest.raises((TypeError, ValueError), match="filter"):
        list(nd.Dataset.range(3).filter(lambda x: (x > 0, x > 1)))


def test_string_predicate_is_rejected():
    with pytest.raises((TypeError, ValueError), match="filter"):
        list(nd.Dataset.range(3).filter(lambda x: "yes"))


def test_not_callable_is_type_error():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).filter(None)


def test_exception_in_predicate_is_chained():
    boom = RuntimeError("bad predicate")

    def pred(x):
        if str(int(x)) == "2":
            raise boom
        return True

    with pytest.raises(nd.errors.OpError, match="filter") as info:
        list(nd.Dataset.range(5).filter(pred))
    assert info.value.__cause__ is boom
