"""A function over window datasets when there is no window (an input shorter than the
window with drop_remainder): tf.data knows its output spec and yields nothing; the
spec comes from what the function builds out of empty datasets of the windows' specs."""
import numpy as np

import nbdata as nd


def test_flat_map_over_no_window_is_empty_with_the_built_spec():
    windows = nd.Dataset.range(7).window(10, drop_remainder=True)
    assert windows.cardinality() == 0
    ds = windows.flat_map(lambda w: w.batch(10))
    assert ds.element_spec == nd.TensorSpec((None,), np.int64)
    assert list(ds) == []


def test_nested_window_components_keep_their_structure_and_static_dims():
    rows = nd.Dataset.from_tensor_slices((np.arange(3), np.ones((3, 2), np.float32)))
    ds = rows.window(5, drop_remainder=True).flat_map(
        lambda a, b: nd.Dataset.zip((a.batch(4, drop_remainder=True), b)))
    assert ds.element_spec == (nd.TensorSpec((4,), np.int64), nd.TensorSpec((2,), np.float32))
    assert list(ds) == []
    # the same pipeline over an input long enough for one window
    rows = nd.Dataset.from_tensor_slices((np.arange(5), np.ones((5, 2), np.float32)))
    ds = rows.window(5, drop_remainder=True).flat_map(
        lambda a, b: nd.Dataset.zip((a.batch(4, drop_remainder=True), b)))
    (only,) = list(ds)
    assert only[0].tolist() == [0, 1, 2, 3] and only[1].tolist() == [1.0, 1.0]


def test_interleave_over_no_window():
    ds = nd.Dataset.range(2).window(3, drop_remainder=True).interleave(
        lambda w: w.map(lambda x: x * 2), cycle_length=2)
    assert ds.element_spec == nd.TensorSpec((), np.int64)
    assert list(ds) == []
