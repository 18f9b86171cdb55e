"""Dataset.from_tensor_slices: slices along axis 0, zero-copy over the user's arrays."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_same, fusing, reference

Pair = collections.namedtuple("Pair", ["image", "label"])


def test_1d_array_gives_numpy_scalars():
    arr = np.array([3, 1, 4], dtype=np.int64)
    ds = nd.Dataset.from_tensor_slices(arr)
    elems = list(ds)
    assert [type(x) for x in elems] == [np.int64] * 3
    assert [int(x) for x in elems] == [3, 1, 4]
    assert ds.cardinality() == 3
    assert ds.element_spec == nd.TensorSpec((), np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.bool_, np.int16, np.complex64])
def test_dtype_is_preserved(dtype):
    arr = np.array([1, 0, 1], dtype=dtype)
    elems = list(nd.Dataset.from_tensor_slices(arr))
    assert [type(x) for x in elems] == [dtype] * 3
    np.testing.assert_array_equal(np.array(elems), arr)


def test_2d_array_rows_are_views_of_user_array():
    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    ds = nd.Dataset.from_tensor_slices(arr)
    elems = list(ds)
    assert len(elems) == 4
    for i, row in enumerate(elems):
        assert type(row) is np.ndarray
        assert row.dtype == np.float32 and row.shape == (3,)
        np.testing.assert_array_equal(row, arr[i])
        assert np.shares_memory(row, arr), "from_tensor_slices must not copy"
    assert ds.element_spec == nd.TensorSpec((3,), np.float32)


def test_tuple_components_are_views():
    images = np.arange(24, dtype=np.uint8).reshape(4, 2, 3)
    masks = np.ones((4, 5), dtype=np.float64)
    elems = list(nd.Dataset.from_tensor_slices((images, masks)))
    assert len(elems) == 4
    for i, (img, mask) in enumerate(elems):
        np.testing.assert_array_equal(img, images[i])
        np.testing.assert_array_equal(mask, masks[i])
        assert np.shares_memory(img, images)
        assert np.shares_memory(mask, masks)


def test_strided_input_values():
    base = np.arange(40, dtype=np.int32).reshape(8, 5)
    arr = base[::2, 1::2]  # non-contiguous view
    elems = list(nd.Dataset.from_tensor_slices(arr))
    assert len(elems) == 4
    for i, row in enumerate(elems):
        np.testing.assert_array_equal(row, arr[i])
        assert row.dtype == np.int32


def test_fortran_order_input_values():
    arr = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(3, 2))
    elems = list(nd.Dataset.from_tensor_slices(arr))
    for i, row in enumerate(elems):
        np.testing.assert_array_equal(row, arr[i])


def test_tuple_structure():
    ds = nd.Dataset.from_tensor_slices((np.array([1, 2]), np.array([[1.0], [2.0]], np.float32)))
    elems = list(ds)
    assert len(elems) == 2
    for i, (a, b) in enumerate(elems):
        assert type(a) is np.int64 and a == i + 1
        assert type(b) is np.ndarray and b.dtype == np.float32 and b.shape == (1,)
        assert b[0] == i + 1
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((1,), np.float32))


def test_dict_structure():
    ds = nd.Dataset.from_tensor_slices({"a": np.array([1, 2, 3]), "b": np.array([[1, 2], [3, 4], [5, 6]])})
    elems = list(ds)
    assert len(elems) == 3
    assert all(type(e) is dict and set(e) == {"a", "b"} for e in elems)
    assert [int(e["a"]) for e in elems] == [1, 2, 3]
    np.testing.assert_array_equal(elems[2]["b"], [5, 6])
    assert ds.element_spec == {"a": nd.TensorSpec((), np.int64), "b": nd.TensorSpec((2,), np.int64)}


def test_namedtuple_structure():
    ds = nd.Dataset.from_tensor_slices(Pair(np.zeros((2, 3, 3)), np.array([7, 8])))
    elems = list(ds)
    assert [type(e) for e in elems] == [Pair, Pair]
    assert [int(e.label) for e in elems] == [7, 8]
    assert elems[0].image.shape == (3, 3)
    assert type(ds.element_spec) is Pair
    assert ds.element_spec.image == nd.TensorSpec((3, 3), np.float64)


def test_nested_structure():
    value = ((np.arange(3), {"k": np.arange(3) * 10}), np.array([b"x", b"y", b"z"], dtype=object))
    elems = list(nd.Dataset.from_tensor_slices(value))
    assert len(elems) == 3
    (a, d), s = elems[1]
    assert int(a) == 1 and int(d["k"]) == 10 and s == b"y"


def test_list_is_a_tensor():
    ds = nd.Dataset.from_tensor_slices([[1, 2], [3, 4], [5, 6]])
    elems = list(ds)
    assert len(elems) == 3
    assert all(type(e) is np.ndarray and e.dtype == np.int64 and e.shape == (2,) for e in elems)
    np.testing.assert_array_equal(elems[1], [3, 4])
    assert ds.element_spec == nd.TensorSpec((2,), np.int64)


def test_python_float_list_is_float64():
    elems = list(nd.Dataset.from_tensor_slices([0.5, 1.5]))
    assert [type(x) for x in elems] == [np.float64, np.float64]


def test_strings_become_bytes():
    ds = nd.Dataset.from_tensor_slices(["a", "héllo", ""])
    elems = list(ds)
    assert elems == [b"a", "héllo".encode("utf-8"), b""]
    assert all(type(e) is bytes for e in elems)
    assert ds.element_spec.dtype is nd.string
    assert ds.element_spec.shape == ()


def test_unicode_array_becomes_bytes():
    elems = list(nd.Dataset.from_tensor_slices(np.array(["ab", "c"])))
    assert elems == [b"ab", b"c"]
    assert all(type(e) is bytes for e in elems)


def test_bytes_keep_trailing_nul():
    elems = list(nd.Dataset.from_tensor_slices([b"a\x00", b"\x00\x00", b"b"]))
    assert elems == [b"a\x00", b"\x00\x00", b"b"]


def test_2d_string_slices_are_object_arrays():
    ds = nd.Dataset.from_tensor_slices([["a", "b"], ["c", "d"]])
    elems = list(ds)
    assert len(elems) == 2
    assert elems[0].dtype == object and list(elems[0]) == [b"a", b"b"]
    assert ds.element_spec == nd.TensorSpec((2,), nd.string)


def test_empty_leading_dimension():
    ds = nd.Dataset.from_tensor_slices(np.zeros((0, 3), np.float32))
    assert list(ds) == []
    assert ds.cardinality() == 0
    assert ds.element_spec == nd.TensorSpec((3,), np.float32)


def test_reiteration_and_reference_path():
    arr = np.arange(20, dtype=np.int32).reshape(5, 4)
    ds = nd.Dataset.from_tensor_slices((arr, arr[:, 0].astype(np.float64), ["a", "b", "c", "d", "e"]))
    fds = fusing(ds)
    first, ref, second = list(fds), list(reference(ds)), list(fds)
    assert_same(first, ref)
    assert_same(first, second)


def test_mismatched_lengths_rejected():
    with pytest.raises(ValueError, match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices((np.arange(3), np.arange(4)))
    with pytest.raises(ValueError, match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices({"a": np.arange(3), "b": np.zeros((2, 2))})


def test_scalar_cannot_be_sliced():
    with pytest.raises(ValueError, match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices(3)
    with pytest.raises(ValueError, match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices((np.arange(2), np.float32(1)))


def test_none_is_rejected():
    with pytest.raises((TypeError, ValueError), match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices(None)


def test_ragged_list_is_rejected_naming_the_op():
    with pytest.raises(ValueError, match="from_tensor_slices"):
        nd.Dataset.from_tensor_slices([[1, 2], [3]])
