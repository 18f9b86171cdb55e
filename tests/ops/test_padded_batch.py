"""Dataset.padded_batch: batches elements of varying shape, padding each component."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_paths_agree


def _fills():
    """The docs' dataset A: elements [1], [2, 2], [3, 3, 3], [4, 4, 4, 4]."""
    return nd.Dataset.range(1, 5, output_type=np.int32).map(lambda x: np.full(x, x))


def test_doc_example_pad_to_batch_max():
    got = list(_fills().padded_batch(2))
    assert len(got) == 2
    assert all(type(b) is np.ndarray and b.dtype == np.int32 for b in got)
    np.testing.assert_array_equal(got[0], [[1, 0], [2, 2]])
    np.testing.assert_array_equal(got[1], [[3, 3, 3, 0], [4, 4, 4, 4]])


def test_doc_example_fixed_size():
    got = list(_fills().padded_batch(2, padded_shapes=5))
    np.testing.assert_array_equal(got[0], [[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]])
    np.testing.assert_array_equal(got[1], [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]])


def test_doc_example_custom_value():
    got = list(_fills().padded_batch(2, padded_shapes=5, padding_values=-1))
    np.testing.assert_array_equal(got[0], [[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]])
    np.testing.assert_array_equal(got[1], [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]])
    assert got[0].dtype == np.int32


def test_doc_example_components_padded_independently():
    elements = [([1, 2, 3], [10]), ([4, 5], [11, 12])]
    ds = nd.Dataset.from_generator(lambda: iter(elements), (np.int32, np.int32))
    ds = ds.padded_batch(2, padded_shapes=([4], [None]), padding_values=(-1, 100))
    got = list(ds)
    assert len(got) == 1
    a, b = got[0]
    np.testing.assert_array_equal(a, [[1, 2, 3, -1], [4, 5, -1, -1]])
    np.testing.assert_array_equal(b, [[10, 100], [11, 12]])
    assert a.dtype == b.dtype == np.int32


def test_doc_example_single_value_for_all_components():
    got = list(nd.Dataset.zip((_fills(), _fills())).padded_batch(2, padding_values=-1))
    for a, b in got:
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0][0], [[1, -1], [2, 2]])
    np.testing.assert_array_equal(got[1][1], [[3, 3, 3, -1], [4, 4, 4, 4]])


def test_padded_shapes_with_none_pads_to_batch_max():
    got = list(_fills().padded_batch(3, padded_shapes=[None]))
    assert [b.shape for b in got] == [(3, 3), (1, 4)]
    np.testing.assert_array_equal(got[0], [[1, 0, 0], [2, 2, 0], [3, 3, 3]])


def test_padded_shapes_as_tuple():
    got = list(_fills().padded_batch(4, padded_shapes=(6,)))
    assert got[0].shape == (4, 6)


def test_exact_padded_shape_needs_no_padding():
    got = list(_fills().padded_batch(4, padded_shapes=[4]))
    np.testing.assert_array_equal(got[0][3], [4, 4, 4, 4])


def test_two_dimensional_padding():
    def gen():
        yield np.ones((1, 2), np.float32)
        yield np.full((2, 1), 2, np.float32)

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None, None), np.float32))
    got = list(ds.padded_batch(2))
    assert got[0].shape == (2, 2, 2) and got[0].dtype == np.float32
    np.testing.assert_array_equal(got[0][0], [[1, 1], [0, 0]])
    np.testing.assert_array_equal(got[0][1], [[2, 0], [2, 0]])
    fixed = list(ds.padded_batch(2, padded_shapes=(3, None), padding_values=np.float32(-1)))
    assert fixed[0].shape == (2, 3, 2)
    np.testing.assert_array_equal(fixed[0][1], [[2, -1], [2, -1], [-1, -1]])


def test_known_dims_and_scalars_are_not_padded():
    ds = nd.Dataset.zip((nd.Dataset.range(4), nd.Dataset.range(4).map(lambda x: np.full(x, 7.5))))
    got = list(ds.padded_batch(2))
    ints, floats = got[1]
    assert ints.tolist() == [2, 3] and ints.dtype == np.int64
    np.testing.assert_array_equal(floats, [[7.5, 7.5, 0.0], [7.5, 7.5, 7.5]])
    assert floats.dtype == np.float64


def test_explicit_shapes_for_scalar_and_vector():
    ds = nd.Dataset.zip((nd.Dataset.range(3), nd.Dataset.range(3).map(lambda x: np.full(x + 1, x))))
    got = list(ds.padded_batch(3, padded_shapes=([], [4]), padding_values=(0, -9)))
    ints, vecs = got[0]
    assert ints.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(vecs, [[0, -9, -9, -9], [1, 1, -9, -9], [2, 2, 2, -9]])


def test_dict_components():
    src = nd.Dataset.range(1, 4).map(lambda n: {"ids": np.arange(n), "len": n})
    got = list(src.padded_batch(3, padding_values={"ids": -1, "len": 0}))
    b = got[0]
    assert type(b) is dict
    np.testing.assert_array_equal(b["ids"], [[0, -1, -1], [0, 1, -1], [0, 1, 2]])
    assert b["len"].tolist() == [1, 2, 3]


def test_strings_pad_with_empty_bytes():
    def gen():
        yield ["a"]
        yield ["b", "cc"]

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None,), nd.string))
    got = list(ds.padded_batch(2))
    assert got[0].dtype == object and got[0].shape == (2, 2)
    assert got[0].tolist() == [[b"a", b""], [b"b", b"cc"]]
    assert all(type(s) is bytes for s in got[0].ravel())
    custom = list(ds.padded_batch(2, padded_shapes=[3], padding_values=b"<pad>"))
    assert custom[0].tolist() == [[b"a", b"<pad>", b"<pad>"], [b"b", b"cc", b"<pad>"]]


def test_mixed_string_and_numeric_defaults():
    def gen():
        yield ["x"], [1.5]
        yield ["y", "z"], [2.5, 3.5]

    sig = (nd.TensorSpec((None,), nd.string), nd.TensorSpec((None,), np.float32))
    got = list(nd.Dataset.from_generator(gen, output_signature=sig).padded_batch(2))
    s, f = got[0]
    assert s.tolist() == [[b"x", b""], [b"y", b"z"]]
    np.testing.assert_array_equal(f, np.array([[1.5, 0], [2.5, 3.5]], np.float32))
    assert f.dtype == np.float32


def test_drop_remainder():
    got = list(_fills().padded_batch(3, drop_remainder=True))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], [[1, 0, 0], [2, 2, 0], [3, 3, 3]])


def test_element_spec():
    assert _fills().padded_batch(2).element_spec == nd.TensorSpec((None, None), np.int32)
    assert _fills().padded_batch(2, padded_shapes=5).element_spec == nd.TensorSpec((None, 5), np.int32)
    assert _fills().padded_batch(2, padded_shapes=[5], drop_remainder=True).element_spec == nd.TensorSpec(
        (2, 5), np.int32
    )
    fixed = nd.Dataset.from_tensor_slices(np.zeros((4, 3)))
    assert fixed.padded_batch(2).element_spec == nd.TensorSpec((None, 3), np.float64)


def test_cardinality():
    assert _fills().padded_batch(3).cardinality() == 2
    assert _fills().padded_batch(3, drop_remainder=True).cardinality() == 1
    assert _fills().repeat().padded_batch(3).cardinality() == nd.INFINITE


def test_reference_path_matches():
    ds = nd.Dataset.range(17).map(lambda n: (np.arange(n % 5), n)).padded_batch(
        4, padded_shapes=([None], []), padding_values=(-1, 0)
    )
    got = assert_paths_agree(ds)  # rows of varying shape do not fuse
    assert len(got) == 5
    np.testing.assert_array_equal(got[0][0], [[-1, -1, -1], [0, -1, -1], [0, 1, -1], [0, 1, 2]])


# ------------------------------------------------------------- errors

def test_element_larger_than_padded_shape_is_data_loss_as_in_tf():
    ds = _fills().padded_batch(2, padded_shapes=[3])
    it = iter(ds)
    np.testing.assert_array_equal(next(it), [[1, 0, 0], [2, 2, 0]])
    with pytest.raises(nd.errors.DataLossError,
                       match="Attempted to pad to a smaller size than the input element."):
        next(it)


def test_padded_shape_smaller_than_static_shape_is_value_error():
    src = nd.Dataset.from_tensor_slices(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="padded_batch"):
        list(src.padded_batch(2, padded_shapes=[2]))


def test_padded_shape_wrong_rank_is_value_error():
    with pytest.raises(ValueError, match="padded_batch"):
        _fills().padded_batch(2, padded_shapes=[None, None])


def test_padded_shapes_wrong_structure():
    with pytest.raises((TypeError, ValueError), match="padded_batch"):
        _fills().padded_batch(2, padded_shapes=([None], [None]))


def test_padding_values_wrong_structure():
    with pytest.raises((TypeError, ValueError), match="padded_batch"):
        _fills().padded_batch(2, padding_values=(0, 0))


def test_non_scalar_padding_value_is_value_error():
    with pytest.raises(ValueError, match="padded_batch"):
        _fills().padded_batch(2, padding_values=np.array([1, 2], np.int32))


def test_padding_value_that_does_not_fit_dtype_is_rejected():
    # 0.5 cannot be an int32 padding value; TF raises TypeError rather than truncating.
    with pytest.raises((TypeError, ValueError), match="padded_batch"):
        list(_fills().padded_batch(2, padding_values=0.5))
    with pytest.raises((TypeError, ValueError), match="padded_batch"):
        list(_fills().padded_batch(2, padding_values=b"x"))


def test_unknown_rank_requires_padded_shapes():
    ds = nd.Dataset.from_generator(lambda: iter([[1], [2, 3]]), output_types=np.int64)
    with pytest.raises(ValueError, match="padded_batch"):
        ds.padded_batch(2)
    got = list(ds.padded_batch(2, padded_shapes=[None]))
    np.testing.assert_array_equal(got[0], [[1, 0], [2, 3]])


@pytest.mark.parametrize("size", [0, -2])
def test_non_positive_batch_size_is_value_error(size):
    with pytest.raises(ValueError, match="(?i)batch"):
        _fills().padded_batch(size)
