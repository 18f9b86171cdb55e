"""Dataset.from_list / nd.experimental.from_list (tf.data's semantics, recorded values:
TensorFlow is not a test dependency)."""

import numpy as np
import pytest

import nbdata as nd


def test_values_structure_and_spec():
    ds = nd.experimental.from_list([(1, "a"), (2, "b")])
    assert [(int(a), s) for a, s in ds] == [(1, b"a"), (2, b"b")]
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((), nd.string))
    assert ds.cardinality() == 2


def test_dicts_and_arrays():
    ds = nd.Dataset.from_list([{"x": np.ones(2, np.float32), "y": 1},
                               {"x": np.zeros(2, np.float32), "y": 2}])
    out = list(ds)
    assert out[0]["x"].dtype == np.float32 and out[1]["x"].tolist() == [0.0, 0.0]
    assert ds.element_spec["x"] == nd.TensorSpec((2,), np.float32)


def test_shapes_that_differ_give_unknown_dims():
    ds = nd.Dataset.from_list([[1], [2, 3]])
    assert ds.element_spec == nd.TensorSpec((None,), np.int64)
    assert [x.tolist() for x in ds] == [[1], [2, 3]]


def test_errors():
    with pytest.raises(ValueError):
        nd.Dataset.from_list([])
    with pytest.raises((ValueError, TypeError)):
        nd.Dataset.from_list([1, (1, 2)])
    with pytest.raises(TypeError):
        nd.Dataset.from_list([np.int32(1), np.float32(2.0)])
    with pytest.raises(ValueError):
        nd.Dataset.from_list(np.arange(3))
    with pytest.raises(ValueError):
        nd.experimental.from_list((1, 2, 3))


def test_elements_of_different_ranks():
    elements = [np.tile(np.array([[1], [2]]), 3), np.array([7, 8])]
    ds = nd.Dataset.from_list(elements)
    assert ds.element_spec.shape is None
    assert [e.tolist() for e in ds] == [e.tolist() for e in elements]


def test_random_access_and_global_shuffle():
    ds = nd.experimental.global_shuffle(nd.Dataset.from_list(list(range(10))), seed=3)
    assert sorted(int(x) for x in ds) == list(range(10))
