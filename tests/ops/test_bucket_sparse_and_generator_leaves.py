"""from_generator flattens a yielded value up to the declared structure (a tuple where
a tensor is declared is that tensor's value); sparse elements of varying dense shape
bucket by length (SparseTensorSpec.most_specific_compatible); pad_to_bucket_boundary's
error names bucket_boundaries."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError


def _records():
    for n in [2, 3, 1, 3]:
        yield ({"values": [1] * n, "indices": [[i] for i in range(n)], "dense_shape": (n,)},)


def _dataset():
    types = ({"values": np.int64, "indices": np.int64, "dense_shape": np.int64},)
    shapes = ({"values": [None], "indices": [None, 1], "dense_shape": [1]},)
    return nd.Dataset.from_generator(_records, types, shapes)


def test_tuple_yielded_for_a_declared_tensor_is_its_value():
    out = [e[0]["dense_shape"].tolist() for e in _dataset()]
    assert out == [[2], [3], [1], [3]]


def test_sparse_spec_merge():
    a = nd.SparseTensorSpec((2, 4), np.int64)
    assert a.most_specific_compatible(nd.SparseTensorSpec((3, 4), np.int64)) == \
        nd.SparseTensorSpec((None, 4), np.int64)
    with pytest.raises(TypeError):
        a.most_specific_compatible(nd.SparseTensorSpec((2, 4), np.float32))


def test_bucket_sparse_elements_by_length():
    ds = _dataset().map(lambda x: (nd.SparseTensor(**x),))
    ds = ds.bucket_by_sequence_length(lambda st: st.dense_shape[0], [3], [2, 2],
                                      no_padding=True)
    batches = [b[0] for b in ds]
    assert sorted(tuple(b.dense_shape.tolist()) for b in batches) == [(2, 2), (2, 3)]
    assert sorted(int(b.values.sum()) for b in batches) == [3, 6]


def test_pad_to_bucket_boundary_error_names_the_boundaries():
    ds = nd.Dataset.from_generator(lambda: iter([[1] * 5]), np.int64, [None])
    ds = ds.bucket_by_sequence_length(lambda x: np.int32(len(x)), [3], [1, 1],
                                      pad_to_bucket_boundary=True)
    with pytest.raises(InvalidArgumentError, match="bucket_boundaries"):
        list(ds)
