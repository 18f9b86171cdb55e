"""sparse_batch errors as tf.data's: a negative row_shape dim other than -1 is a
ValueError at once; an element of another rank is an InvalidArgumentError and one larger
than row_shape a DataLossError, both when its batch is built."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import DataLossError, InvalidArgumentError


def test_negative_dimension_is_a_value_error():
    with pytest.raises(ValueError, match="Dimension -2 must be >= 0"):
        nd.Dataset.from_tensors(np.array([[1]])).sparse_batch(4, [-2])


def test_rank_mismatch_fails_at_iteration():
    ds = nd.Dataset.from_tensors(np.array([[1]])).sparse_batch(4, [12])
    with pytest.raises(InvalidArgumentError, match="incompatible with the row shape"):
        next(iter(ds))


def test_larger_element_is_data_loss():
    ds = nd.Dataset.from_tensors(np.arange(13, dtype=np.int32)).sparse_batch(4, [12])
    with pytest.raises(DataLossError, match="larger than the row shape"):
        next(iter(ds))


def test_unknown_dims_take_the_largest_row():
    ds = nd.Dataset.from_list([[1], [2, 3]]).sparse_batch(2, [-1])
    st = next(iter(ds))
    assert st.dense_shape.tolist() == [2, 2] and st.values.tolist() == [1, 2, 3]
