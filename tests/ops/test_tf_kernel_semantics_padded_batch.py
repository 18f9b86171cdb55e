"""padded_batch as tf.data defines it: a None in ``padding_values`` stands for the
default padding of the whole substructure it covers; sparse and None components,
which have no dense shape to pad, are refused with TypeError."""
import numpy as np
import pytest

import nbdata as nd


def _rows():
    return nd.Dataset.range(1, 4).map(lambda n: (np.full(n, n), {"s": np.full(n, b"x"), "t": n * np.ones(n)}))


def test_none_padding_value_for_a_substructure_is_its_default_padding():
    ds = _rows().padded_batch(3, padded_shapes=([-1], {"s": [-1], "t": [4]}),
                              padding_values=(np.int64(-1), None))
    (ints, rest), = list(ds)
    assert ints.tolist() == [[1, -1, -1], [2, 2, -1], [3, 3, 3]]
    assert rest["s"].tolist() == [[b"x", b"", b""], [b"x", b"x", b""], [b"x", b"x", b"x"]]
    assert rest["t"].tolist() == [[1, 0, 0, 0], [2, 2, 0, 0], [3, 3, 3, 0]]
    # the same element written out leaf by leaf
    same = _rows().padded_batch(3, padded_shapes=([-1], {"s": [-1], "t": [4]}),
                                padding_values=(np.int64(-1), {"s": None, "t": None}))
    (ints2, rest2), = list(same)
    assert ints2.tolist() == ints.tolist() and rest2["t"].tolist() == rest["t"].tolist()
    with pytest.raises(TypeError, match="padding_values"):
        _rows().padded_batch(3, padding_values=(np.int64(-1), {"s": None}))


def test_sparse_components_are_refused():
    st = nd.SparseTensor(indices=[[0, 0]], values=[42], dense_shape=[1, 1])
    with pytest.raises(TypeError, match=r"not a subclass of TensorSpec: `SparseTensorSpec.*`\.$"):
        nd.Dataset.from_tensors(st).repeat(4).padded_batch(2)


def test_none_components_are_refused():
    ds = nd.Dataset.from_tensor_slices((np.arange(4), None))
    with pytest.raises(TypeError, match="padded_batch: a None component"):
        ds.padded_batch(2)
    assert [b[0].tolist() for b in ds.batch(2)] == [[0, 1], [2, 3]]   # batch keeps it
