"""A function's scalar arguments multiply Python lists elementwise, as tf.data's tensors
do: ``i * [1, -1]`` is ``[i, -i]`` (a NumPy integer alone would repeat the list ``i``
times, which made the first element's ``0 * [1]`` an empty float64 array)."""

import numpy as np

import nbdata as nd


def _sparse(i):
    return nd.SparseTensor(indices=[[0]], values=i * [1], dense_shape=[1])


def test_sparse_values_from_a_list_times_the_element():
    ds = nd.Dataset.range(10).map(_sparse)
    assert ds.element_spec == nd.SparseTensorSpec((1,), np.int64)
    got = list(ds.batch(5))
    for b, batch in enumerate(got):
        assert batch.values.tolist() == [b * 5 + k for k in range(5)]
        assert batch.indices.tolist() == [[k, 0] for k in range(5)]
        assert batch.dense_shape.tolist() == [5, 1]


def test_list_times_element_in_tuples_dicts_and_floats():
    ds = nd.Dataset.range(3).map(lambda i: ([1, -1] * i, i))
    assert [v.tolist() for v, _ in ds] == [[0, 0], [1, -1], [2, -2]]
    ds = nd.Dataset.from_tensor_slices({"x": np.array([0.5, 2.0])}).map(lambda d: d["x"] * [2, 4])
    assert ds.element_spec == nd.TensorSpec((2,), np.float64)
    assert [v.tolist() for v in ds] == [[1.0, 2.0], [4.0, 8.0]]


def test_arguments_still_compute_as_numpy_scalars():
    seen = []

    def f(i):
        seen.append((isinstance(i, np.int64), i * 3, hash(i) == hash(int(i))))
        return i + 1

    assert [int(v) for v in nd.Dataset.range(3).map(f)] == [1, 2, 3]
    assert all(s[0] and s[2] for s in seen)
