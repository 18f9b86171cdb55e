"""Sparse elements and error classes/messages as TensorFlow's kernel tests define them."""

import numpy as np
import pytest

import nbdata as nd

S = nd.SparseTensor


def parts(st):
    return st.indices.tolist(), st.values.tolist(), st.dense_shape.tolist()


def test_from_tensor_slices_slices_a_sparse_tensor_along_dim_0():
    st = S(indices=np.array([[0, 0], [1, 1], [2, 0], [2, 2]]), values=np.array([1, 2, 3, 4]),
           dense_shape=np.array([4, 3]))
    ds = nd.Dataset.from_tensor_slices(st)
    assert ds.element_spec == nd.SparseTensorSpec((3,), np.int64)
    assert ds.cardinality() == 4
    assert [parts(x) for x in ds] == [([[0]], [1], [3]), ([[1]], [2], [3]),
                                     ([[0], [2]], [3, 4], [3]), ([], [], [3])]
    pairs = nd.Dataset.from_tensor_slices((np.arange(4), st))
    assert [(int(a), b.values.tolist()) for a, b in pairs] == [(0, [1]), (1, [2]), (2, [3, 4]),
                                                             (3, [])]


def test_batched_sparse_elements_unbatch_into_their_rows():
    ds = nd.Dataset.range(4).map(lambda i: S(indices=[[0]], values=i * np.array([1]),
                                             dense_shape=[1]))
    batched = ds.batch(2)
    assert batched.element_spec == nd.SparseTensorSpec((None, 1), np.int64)
    assert [parts(x) for x in batched.unbatch()] == [([[0]], [i], [1]) for i in range(4)]


def test_sparse_maps_through_filter_and_nested_batches():
    def pair(i):
        return S(indices=[[0, 0]], values=i * np.array([1]), dense_shape=[1, 1]), i

    kept = nd.Dataset.range(10).map(pair).filter(lambda _, i: i % 2 == 0).map(lambda x, i: x)
    assert [x.values.tolist() for x in kept] == [[0], [2], [4], [6], [8]]
    floats = nd.Dataset.range(10).map(
        lambda i: S(indices=[[0]], values=i * np.array([1.5]), dense_shape=[1])).batch(5)
    assert [(x.values.dtype, x.values.tolist()) for x in floats] == [
        (np.float64, [0.0, 1.5, 3.0, 4.5, 6.0]), (np.float64, [7.5, 9.0, 10.5, 12.0, 13.5])]
    nested = nd.Dataset.range(10).map(
        lambda i: S(indices=[[0]], values=i * np.array([1]), dense_shape=[1])).batch(5).batch(2)
    (only,) = list(nested)
    assert only.dense_shape.tolist() == [2, 5, 1] and only.values.tolist() == list(range(10))
    assert only.indices[:3].tolist() == [[0, 0, 0], [0, 1, 0], [0, 2, 0]]

    def ragged(i):
        return S(indices=np.arange(i, dtype=np.int64)[:, None], values=np.full([int(i)], i),
                 dense_shape=[i])

    assert [x.dense_shape.tolist() for x in nd.Dataset.range(10).map(ragged).batch(5)] == \
        [[5, 4], [5, 9]]


def test_batch_shape_error_uses_tfs_words():
    def gen():
        yield [1.0, 2.0, 3.0]
        yield [4.0, 5.0, 6.0]
        yield [7.0, 8.0, 9.0, 10.0]

    ds = nd.Dataset.from_generator(gen, np.float32, output_shapes=[None]).batch(3)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Cannot batch tensors with different shapes in component 0. First "
                             r"element had shape \[3\] and element 2 had shape \[4\]."):
        list(ds)


def test_global_shuffle_refuses_a_batch_keeping_its_remainder():
    with pytest.raises(nd.errors.FailedPreconditionError,
                       match="does not support global shuffling with `drop_remainder=False`."):
        nd.experimental.global_shuffle(nd.Dataset.range(10).batch(3).prefetch(1))
    whole = nd.experimental.global_shuffle(nd.Dataset.range(10).batch(3, drop_remainder=True),
                                           seed=2).unbatch()
    assert sorted(int(x) for x in whole) == list(range(9))


@pytest.mark.parametrize("op", ["flat_map", "interleave"])
def test_a_function_not_returning_a_dataset_is_refused_with_tfs_words(op):
    with pytest.raises(TypeError, match="The `map_func` argument must return a `Dataset` object."):
        getattr(nd.Dataset.from_tensors(42), op)(lambda x: [x])


def _fills(values):
    return nd.Dataset.from_tensor_slices(np.array(values)).map(lambda x: np.full([int(x)], x))


def test_padded_batch_errors_use_tfs_classes_and_words():
    with pytest.raises(nd.errors.DataLossError,
                       match="Attempted to pad to a smaller size than the input element."):
        list(_fills([6, 5, 5, 5, 5]).padded_batch(4, padded_shapes=[5]))
    with pytest.raises(ValueError, match=r"The padded shape \(1,\) is not compatible with the "
                                         r"shape \(\) of the corresponding input component."):
        nd.Dataset.from_tensor_slices(np.array([1, 2])).padded_batch(2, padded_shapes=[1])
    with pytest.raises(TypeError, match="Invalid `padding_values`."):
        _fills([1, 2]).padded_batch(2, padded_shapes=[5], padding_values="x")
    assert [b.tolist() for b in _fills([0, 0, 0, 0]).padded_batch(4, padded_shapes=[-1])] == \
        [[[], [], [], []]]


@pytest.mark.parametrize("op", ["batch", "padded_batch"])
def test_batch_size_zero_is_invalid_argument_in_tfs_words(op):
    with pytest.raises(nd.errors.InvalidArgumentError, match="Batch size must be greater than zero."):
        getattr(nd.Dataset.range(10), op)(0)


def _checked(values):
    import nbdata.compat.v1 as tf
    return nd.Dataset.from_tensor_slices(np.float32(values)).map(
        lambda x: tf.check_numerics(x, "message"))


def test_window_errors_count_only_for_the_windows_holding_them():
    ds = _checked([1.0, np.nan, 2.0, np.nan, 3.0])
    skipping = ds.window(2, shift=2, stride=2, drop_remainder=True).flat_map(lambda w: w.batch(2))
    assert [b.tolist() for b in skipping] == [[1.0, 2.0], [2.0, 3.0]]
    it, out = iter(ds.window(2, shift=1)), []
    while True:
        try:
            out.append([float(v) for v in next(it)])
        except StopIteration:
            break
        except nd.errors.InvalidArgumentError as e:
            out.append(str(e).split(":")[-1].strip())
    assert out == ["Tensor had NaN values"] * 4 + [[3.0]]
