"""Tests for Dataset.window: size/shift/stride/drop_remainder; windows are datasets (tf.data semantics)."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_paths_agree, assert_reference_matches


def windows(ds):
    """Each window (a Dataset) as a list of Python ints."""
    out = []
    for w in ds:
        assert isinstance(w, nd.Dataset)
        out.append([int(v) for v in w.as_numpy_iterator()])
    return out


def expected_windows(n, size, shift, stride, drop_remainder):
    """tf.data's window: a window starts every `shift` inputs and takes `size` inputs
    `stride` apart; incomplete windows are kept unless drop_remainder."""
    out = []
    for start in range(0, n, shift):
        w = list(range(start, n, stride))[:size]
        if len(w) < size and drop_remainder:
            break
        out.append(w)
    return out


# ---------------------------------------------------------------- doc examples

def test_size_only():
    assert windows(nd.Dataset.range(7).window(3)) == [[0, 1, 2], [3, 4, 5], [6]]


def test_drop_remainder():
    assert windows(nd.Dataset.range(7).window(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]


def test_shift_one_drop_remainder():
    assert windows(nd.Dataset.range(7).window(3, shift=1, drop_remainder=True)) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6]]


def test_shift_one_keeps_partial_windows():
    assert windows(nd.Dataset.range(7).window(3, shift=1)) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6], [5, 6], [6]]


def test_stride_drop_remainder():
    assert windows(nd.Dataset.range(7).window(3, shift=1, stride=2, drop_remainder=True)) == [
        [0, 2, 4], [1, 3, 5], [2, 4, 6]]


def test_stride_keeps_partial_windows():
    assert windows(nd.Dataset.range(7).window(3, shift=1, stride=2)) == [
        [0, 2, 4], [1, 3, 5], [2, 4, 6], [3, 5], [4, 6], [5], [6]]


def test_shift_larger_than_size():
    assert windows(nd.Dataset.range(7).window(2, shift=3)) == [[0, 1], [3, 4], [6]]


@pytest.mark.parametrize("size, shift, stride", [(1, 1, 1), (2, 1, 1), (4, 2, 1), (3, 2, 3), (5, 5, 2), (2, 4, 1), (8, 1, 1)])
@pytest.mark.parametrize("drop_remainder", [False, True])
def test_matches_definition(size, shift, stride, drop_remainder):
    ds = nd.Dataset.range(11).window(size, shift=shift, stride=stride, drop_remainder=drop_remainder)
    want = expected_windows(11, size, shift, stride, drop_remainder)
    assert windows(ds) == want
    assert ds.cardinality() == len(want)


def test_window_larger_than_dataset():
    assert windows(nd.Dataset.range(2).window(5)) == [[0, 1]]
    assert windows(nd.Dataset.range(2).window(5, drop_remainder=True)) == []


def test_empty_input():
    assert windows(nd.Dataset.range(0).window(3)) == []


def test_positional_arguments():
    assert windows(nd.Dataset.range(5).window(2, 2, 1, True)) == [[0, 1], [2, 3]]


# ---------------------------------------------------------------- element types and structures

def test_window_elements_are_int64_scalars():
    w = next(iter(nd.Dataset.range(5).window(3)))
    vals = list(w.as_numpy_iterator())
    assert vals == [0, 1, 2] and all(isinstance(v, np.int64) for v in vals)


def test_tuple_elements_give_tuple_of_datasets():
    ds = nd.Dataset.from_tensor_slices((np.array([1, 2, 3, 4, 5]), np.array([6, 7, 8, 9, 10]))).window(2)
    out = []
    for w in ds:
        assert isinstance(w, tuple) and len(w) == 2
        assert all(isinstance(d, nd.Dataset) for d in w)
        out.append(tuple([int(v) for v in d.as_numpy_iterator()] for d in w))
    assert out == [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])]


def test_dict_elements_give_dict_of_datasets():
    ds = nd.Dataset.from_tensor_slices({"a": np.array([1, 2, 3]), "b": np.array([b"x", b"y", b"z"], dtype=object)})
    out = []
    for w in ds.window(2):
        assert isinstance(w, dict) and set(w) == {"a", "b"}
        out.append({k: list(d.as_numpy_iterator()) for k, d in w.items()})
    assert out == [{"a": [1, 2], "b": [b"x", b"y"]}, {"a": [3], "b": [b"z"]}]
    assert type(out[0]["b"][0]) is bytes


def test_element_spec_is_dataset_spec():
    spec = nd.Dataset.range(5).window(2).element_spec
    assert isinstance(spec, nd.DatasetSpec)
    assert spec.element_spec == nd.TensorSpec((), np.int64)

    ds = nd.Dataset.from_tensor_slices((np.zeros((4, 3), np.float32), np.arange(4))).window(2)
    a, b = ds.element_spec
    assert isinstance(a, nd.DatasetSpec) and a.element_spec == nd.TensorSpec((3,), np.float32)
    assert isinstance(b, nd.DatasetSpec) and b.element_spec == nd.TensorSpec((), np.int64)


def test_window_dataset_spec_and_cardinality_of_inner():
    w = next(iter(nd.Dataset.from_tensor_slices(np.zeros((6, 2), np.float64)).window(4)))
    assert w.element_spec == nd.TensorSpec((2,), np.float64)
    rows = list(w.as_numpy_iterator())
    assert len(rows) == 4 and all(r.shape == (2,) and r.dtype == np.float64 for r in rows)


def test_window_can_be_iterated_twice():
    w = next(iter(nd.Dataset.range(5).window(3)))
    assert list(w.as_numpy_iterator()) == list(w.as_numpy_iterator()) == [0, 1, 2]


# ---------------------------------------------------------------- flat_map pattern

def test_flat_map_batch_sliding_windows():
    ds = nd.Dataset.range(7).window(3, shift=1, drop_remainder=True).flat_map(lambda w: w.batch(3))
    out = assert_paths_agree(ds)
    assert [b.tolist() for b in out] == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6]]
    assert all(isinstance(b, np.ndarray) and b.dtype == np.int64 for b in out)


def test_flat_map_batch_partial_windows():
    ds = nd.Dataset.range(5).window(2).flat_map(lambda w: w.batch(2))
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [[0, 1], [2, 3], [4]]


def test_flat_map_tuple_windows():
    ds = nd.Dataset.from_tensor_slices((np.arange(6), np.arange(6) * 10)).window(3, drop_remainder=True)
    ds = ds.flat_map(lambda x, y: nd.Dataset.zip((x.batch(3), y.batch(3))))
    out = [(a.tolist(), b.tolist()) for a, b in ds.as_numpy_iterator()]
    assert out == [([0, 1, 2], [0, 10, 20]), ([3, 4, 5], [30, 40, 50])]


def test_flat_map_dict_windows():
    ds = nd.Dataset.from_tensor_slices({"v": np.arange(4, dtype=np.float32)}).window(2)
    ds = ds.flat_map(lambda d: d["v"].batch(2))
    out = list(ds.as_numpy_iterator())
    assert [b.tolist() for b in out] == [[0.0, 1.0], [2.0, 3.0]]
    assert out[0].dtype == np.float32


def test_window_after_map_matches_reference():
    ds = nd.Dataset.range(9).map(lambda x: x * x).window(4, shift=3).flat_map(lambda w: w.batch(4))
    out = [b.tolist() for b in assert_reference_matches(ds)]
    assert out == [[0, 1, 4, 9], [9, 16, 25, 36], [36, 49, 64]]


# ---------------------------------------------------------------- cardinality

def test_cardinality():
    assert nd.Dataset.range(7).window(3).cardinality() == 3
    assert nd.Dataset.range(7).window(3, drop_remainder=True).cardinality() == 2
    assert nd.Dataset.range(7).window(3, shift=1).cardinality() == 7
    assert nd.Dataset.range(7).window(3, shift=1, drop_remainder=True).cardinality() == 5
    assert nd.Dataset.range(7).window(3, shift=1, stride=2, drop_remainder=True).cardinality() == 3
    assert nd.Dataset.range(2).window(5, drop_remainder=True).cardinality() == 0
    assert nd.Dataset.range(3).repeat().window(2).cardinality() == nd.INFINITE
    assert nd.Dataset.range(3).filter(lambda x: x > 0).window(2).cardinality() == nd.UNKNOWN


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs", [dict(size=0), dict(size=-1), dict(size=2, shift=0), dict(size=2, shift=-3),
                                    dict(size=2, stride=0), dict(size=2, stride=-1)])
def test_non_positive_arguments_rejected(kwargs):
    with pytest.raises(ValueError, match="(?i)window|size|shift|stride"):
        nd.Dataset.range(10).window(**kwargs)


@pytest.mark.parametrize("size", ["2", 2.5, None])
def test_non_integer_size_rejected(size):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(10).window(size)


def test_as_numpy_iterator_rejects_dataset_elements():
    # tf.data: as_numpy_iterator raises TypeError for elements that are datasets.
    with pytest.raises(TypeError):
        list(nd.Dataset.range(4).window(2).as_numpy_iterator())
