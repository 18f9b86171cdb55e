"""``nd.RaggedTensor.from_row_lengths`` and ``to_sparse`` (tf.RaggedTensor's API), and
a sparse tensor made that way sliced and batched by a dataset."""
import numpy as np
import pytest

import nbdata as nd


def test_from_row_lengths_and_to_sparse():
    rt = nd.RaggedTensor.from_row_lengths(np.array([7, 8, 9, 10]), [2, 0, 1, 1])
    assert rt.to_list() == [[7, 8], [], [9], [10]]
    st = rt.to_sparse()
    assert st.indices.tolist() == [[0, 0], [0, 1], [2, 0], [3, 0]]
    assert st.values.tolist() == [7, 8, 9, 10] and st.dense_shape.tolist() == [4, 2]
    assert (st.to_dense() == rt.to_tensor()).all()
    nested = nd.RaggedTensor.from_row_lengths(
        nd.RaggedTensor.from_row_lengths(np.arange(6), [1, 2, 0, 3]), [3, 1])
    assert nested.to_list() == [[[0], [1, 2], []], [[3, 4, 5]]]
    assert (nested.to_sparse().to_dense() == nested.to_tensor()).all()
    assert nested.to_sparse().dense_shape.tolist() == [2, 3, 3]
    with pytest.raises(ValueError, match="add up to 3, but there are 4 values"):
        nd.RaggedTensor.from_row_lengths(np.arange(4), [1, 2])


def test_a_sparse_tensor_from_rows_batches_with_its_static_width():
    lengths = np.array([1, 3, 0, 2] * 8)
    st = nd.RaggedTensor.from_row_lengths(np.ones(lengths.sum()), lengths).to_sparse()
    ds = nd.Dataset.from_tensor_slices(st).batch(8, drop_remainder=True).map(lambda x: x)
    assert ds.element_spec == nd.SparseTensorSpec((8, 3), np.float64)
    first = next(iter(ds))
    assert first.to_dense().sum(axis=1).tolist() == [1, 3, 0, 2] * 2
