"""Dataset.from_tensors: one element holding the whole value."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_same, fusing, reference

Point = collections.namedtuple("Point", ["x", "y"])


def _single(ds):
    elems = list(ds)
    assert len(elems) == 1
    return elems[0]


def test_array_is_one_element():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    ds = nd.Dataset.from_tensors(arr)
    got = _single(ds)
    assert type(got) is np.ndarray
    assert got.dtype == np.float32 and got.shape == (2, 3)
    np.testing.assert_array_equal(got, arr)
    assert ds.cardinality() == 1
    assert ds.element_spec == nd.TensorSpec((2, 3), np.float32)


def test_python_scalars_convert_like_numpy():
    assert type(_single(nd.Dataset.from_tensors(3))) is np.int64
    assert type(_single(nd.Dataset.from_tensors(2.5))) is np.float64
    assert type(_single(nd.Dataset.from_tensors(True))) is np.bool_
    assert nd.Dataset.from_tensors(3).element_spec == nd.TensorSpec((), np.int64)
    assert nd.Dataset.from_tensors(2.5).element_spec == nd.TensorSpec((), np.float64)
    assert nd.Dataset.from_tensors(True).element_spec == nd.TensorSpec((), np.bool_)


def test_numpy_scalar_keeps_dtype():
    got = _single(nd.Dataset.from_tensors(np.float32(1.5)))
    assert type(got) is np.float32 and got == np.float32(1.5)


def test_zero_d_array_becomes_numpy_scalar():
    got = _single(nd.Dataset.from_tensors(np.array(7, dtype=np.int16)))
    assert type(got) is np.int16 and got == 7


def test_list_is_a_tensor_not_a_structure():
    ds = nd.Dataset.from_tensors([[1, 2], [3, 4]])
    got = _single(ds)
    assert type(got) is np.ndarray and got.dtype == np.int64
    np.testing.assert_array_equal(got, [[1, 2], [3, 4]])
    assert ds.element_spec == nd.TensorSpec((2, 2), np.int64)


def test_strings_become_bytes():
    ds = nd.Dataset.from_tensors("héllo")
    got = _single(ds)
    assert type(got) is bytes and got == "héllo".encode("utf-8")
    assert ds.element_spec.dtype is nd.string
    assert ds.element_spec.shape == ()
    assert _single(nd.Dataset.from_tensors(b"a\x00b")) == b"a\x00b"


def test_string_array_becomes_object_array_of_bytes():
    ds = nd.Dataset.from_tensors(np.array(["a", "bc"]))
    got = _single(ds)
    assert type(got) is np.ndarray and got.dtype == object
    assert list(got) == [b"a", b"bc"]
    assert all(type(s) is bytes for s in got)
    assert ds.element_spec == nd.TensorSpec((2,), nd.string)


def test_tuple_structure():
    ds = nd.Dataset.from_tensors((1, np.array([1.0, 2.0], np.float32), b"s"))
    got = _single(ds)
    assert type(got) is tuple and len(got) == 3
    assert type(got[0]) is np.int64 and got[0] == 1
    assert got[1].dtype == np.float32
    np.testing.assert_array_equal(got[1], [1.0, 2.0])
    assert got[2] == b"s"
    assert ds.element_spec == (
        nd.TensorSpec((), np.int64),
        nd.TensorSpec((2,), np.float32),
        nd.TensorSpec((), nd.string),
    )


def test_dict_structure():
    ds = nd.Dataset.from_tensors({"b": np.zeros(3), "a": 4})
    got = _single(ds)
    assert type(got) is dict and set(got) == {"a", "b"}
    assert type(got["a"]) is np.int64 and got["a"] == 4
    np.testing.assert_array_equal(got["b"], np.zeros(3))
    assert ds.element_spec == {
        "a": nd.TensorSpec((), np.int64),
        "b": nd.TensorSpec((3,), np.float64),
    }


def test_namedtuple_structure():
    ds = nd.Dataset.from_tensors(Point(1, np.array([2, 3], np.int32)))
    got = _single(ds)
    assert type(got) is Point
    assert got.x == 1 and type(got.x) is np.int64
    np.testing.assert_array_equal(got.y, [2, 3])
    assert got.y.dtype == np.int32
    spec = ds.element_spec
    assert type(spec) is Point
    assert spec.y == nd.TensorSpec((2,), np.int32)


def test_nested_structure():
    value = {"img": (np.ones((2, 2), np.uint8), [1, 2]), "label": 1.0}
    got = _single(nd.Dataset.from_tensors(value))
    assert set(got) == {"img", "label"}
    img, lst = got["img"]
    assert img.dtype == np.uint8 and img.shape == (2, 2)
    np.testing.assert_array_equal(lst, [1, 2])
    assert type(got["label"]) is np.float64


def test_empty_array_element():
    ds = nd.Dataset.from_tensors(np.zeros((0, 3), np.float32))
    got = _single(ds)
    assert got.shape == (0, 3) and got.dtype == np.float32
    assert ds.element_spec == nd.TensorSpec((0, 3), np.float32)


def test_reiteration():
    ds = nd.Dataset.from_tensors(np.arange(3))
    for _ in range(2):
        np.testing.assert_array_equal(_single(ds), np.arange(3))


def test_reference_path_matches():
    value = ({"a": np.arange(4).reshape(2, 2)}, b"x", 2.5, np.float32(1))
    ds = nd.Dataset.from_tensors(value)
    assert_same(_single(fusing(ds)), _single(reference(ds)))


def test_none_is_rejected():
    with pytest.raises((TypeError, ValueError), match="from_tensors"):
        nd.Dataset.from_tensors(None)


def test_unconvertible_object_is_rejected():
    with pytest.raises((TypeError, ValueError), match="from_tensors"):
        nd.Dataset.from_tensors(object())


def test_a_repeated_array_is_handed_out_as_a_view_not_restacked():
    # from_tensors(x).repeat(n) yields x itself (a view of its memory) at every step: the
    # one-row chunk is not a np.stack copy of a (possibly 50 MB) batch per repeat
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    out = list(nd.Dataset.from_tensors(x).repeat(3))
    assert len(out) == 3
    for e in out:
        np.testing.assert_array_equal(e, x)
        assert np.shares_memory(e, x) and e.shape == x.shape and e.dtype == x.dtype
    # a map over it sees the values and leaves x alone
    doubled = list(nd.Dataset.from_tensors(x).map(lambda a: a * 2).repeat(2))
    np.testing.assert_array_equal(doubled[1], x * 2)
    np.testing.assert_array_equal(x, np.arange(24, dtype=np.float32).reshape(2, 3, 4))
