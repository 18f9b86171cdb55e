"""as_numpy_iterator: arrays come as read-only views (the dataset's own values stay
writable); datasets of datasets are refused with tf.data's wording."""
import numpy as np
import pytest

import nbdata as nd


def test_arrays_are_read_only_views():
    src = np.array([1, 2, 3])
    arr = next(nd.Dataset.from_tensors(src).as_numpy_iterator())
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = 0
    src[0] = 9            # the value the dataset was made from is not frozen
    assert arr.tolist() in ([1, 2, 3], [9, 2, 3])


def test_nested_elements_keep_their_structure():
    ds = nd.Dataset.from_tensor_slices({"a": (np.ones((2, 2)), np.arange(2)), "b": [b"x", b"y"]})
    first = next(ds.as_numpy_iterator())
    assert isinstance(first["a"], tuple) and first["b"] == b"x"
    assert not first["a"][0].flags.writeable


def test_dataset_elements_are_refused():
    ds = nd.Dataset.range(3).window(2)
    with pytest.raises(TypeError, match="is not supported for datasets that"):
        ds.as_numpy_iterator()


def test_iterator_saves_and_restores():
    it = nd.Dataset.range(5).as_numpy_iterator()
    assert [int(next(it)) for _ in range(2)] == [0, 1]
    state = it.save()
    it2 = nd.Dataset.range(5).as_numpy_iterator()
    it2.restore(state)
    assert [int(x) for x in it2] == [2, 3, 4]
