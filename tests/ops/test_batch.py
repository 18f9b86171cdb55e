"""Dataset.batch: stacks consecutive elements along a new leading axis."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_paths_agree, assert_reference_matches, reference

Pair = collections.namedtuple("Pair", ["x", "y"])


def test_doc_example():
    got = list(nd.Dataset.range(8).batch(3))
    assert len(got) == 3
    assert all(type(b) is np.ndarray and b.dtype == np.int64 for b in got)
    np.testing.assert_array_equal(got[0], [0, 1, 2])
    np.testing.assert_array_equal(got[1], [3, 4, 5])
    np.testing.assert_array_equal(got[2], [6, 7])


def test_doc_example_drop_remainder():
    got = list(nd.Dataset.range(8).batch(3, drop_remainder=True))
    assert [b.tolist() for b in got] == [[0, 1, 2], [3, 4, 5]]


def test_exact_multiple():
    got = list(nd.Dataset.range(6).batch(2, drop_remainder=False))
    assert [b.tolist() for b in got] == [[0, 1], [2, 3], [4, 5]]


def test_batch_larger_than_dataset():
    assert [b.tolist() for b in nd.Dataset.range(3).batch(10)] == [[0, 1, 2]]
    assert list(nd.Dataset.range(3).batch(10, drop_remainder=True)) == []


def test_batch_size_one():
    got = list(nd.Dataset.range(3).batch(1))
    assert [b.shape for b in got] == [(1,)] * 3


def test_empty_dataset():
    assert list(nd.Dataset.range(0).batch(4)) == []


def test_arrays_stack_on_new_axis():
    arr = np.arange(30, dtype=np.float32).reshape(5, 2, 3)
    got = list(nd.Dataset.from_tensor_slices(arr).batch(2))
    assert [b.shape for b in got] == [(2, 2, 3), (2, 2, 3), (1, 2, 3)]
    assert all(b.dtype == np.float32 for b in got)
    np.testing.assert_array_equal(np.concatenate(got), arr)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.float16, np.float64, np.complex128])
def test_dtype_preserved(dtype):
    arr = (np.arange(5) % 2).astype(dtype)
    got = list(nd.Dataset.from_tensor_slices(arr).batch(2))
    assert all(b.dtype == dtype for b in got)
    np.testing.assert_array_equal(np.concatenate(got), arr)


def test_tuple_structure():
    ds = nd.Dataset.from_tensor_slices((np.arange(5), np.arange(10, dtype=np.float32).reshape(5, 2))).batch(2)
    got = list(ds)
    assert all(type(b) is tuple and len(b) == 2 for b in got)
    np.testing.assert_array_equal(got[0][0], [0, 1])
    np.testing.assert_array_equal(got[0][1], [[0, 1], [2, 3]])
    assert got[2][1].shape == (1, 2) and got[2][1].dtype == np.float32


def test_dict_structure():
    ds = nd.Dataset.from_tensor_slices({"a": np.arange(4), "b": np.arange(4) * 1.5}).batch(3)
    got = list(ds)
    assert all(type(b) is dict for b in got)
    assert got[0]["a"].tolist() == [0, 1, 2]
    assert got[1]["b"].tolist() == [4.5]


def test_namedtuple_structure():
    ds = nd.Dataset.from_tensor_slices(Pair(np.arange(4), np.arange(4) * 2)).batch(2)
    got = list(ds)
    assert [type(b) for b in got] == [Pair, Pair]
    assert got[1].y.tolist() == [4, 6]


def test_nested_structure():
    src = nd.Dataset.zip((nd.Dataset.range(5), (nd.Dataset.range(5), {"k": nd.Dataset.range(5)})))
    got = list(src.batch(4))
    first = got[0]
    assert first[0].tolist() == [0, 1, 2, 3]
    assert first[1][0].tolist() == [0, 1, 2, 3]
    assert first[1][1]["k"].tolist() == [0, 1, 2, 3]
    assert got[1][1][1]["k"].tolist() == [4]


def test_strings_become_object_arrays_of_bytes():
    ds = nd.Dataset.from_tensor_slices(["a", "bb", "", "c\x00"]).batch(3)
    got = list(ds)
    assert [b.dtype for b in got] == [np.dtype(object)] * 2
    assert got[0].tolist() == [b"a", b"bb", b""]
    assert got[1].tolist() == [b"c\x00"]
    assert all(type(s) is bytes for b in got for s in b)
    assert ds.element_spec == nd.TensorSpec((None,), nd.string)


def test_string_vectors_batch_to_2d_object_arrays():
    ds = nd.Dataset.from_tensor_slices([["a", "b"], ["c", "d"], ["e", "f"]]).batch(2)
    got = list(ds)
    assert got[0].shape == (2, 2) and got[0].dtype == object
    assert got[0][1].tolist() == [b"c", b"d"]


def test_nested_batches():
    got = list(nd.Dataset.range(12).batch(3).batch(2))
    assert [b.shape for b in got] == [(2, 3), (2, 3)]
    np.testing.assert_array_equal(got[1], [[6, 7, 8], [9, 10, 11]])
    partial = list(nd.Dataset.range(7).batch(3).batch(2))
    # [[0,1,2],[3,4,5]] then [[6]]
    assert [b.shape for b in partial] == [(2, 3), (1, 1)]


def test_batches_are_independent_arrays():
    got = list(nd.Dataset.range(6).batch(2))
    got[0][0] = 100
    assert got[1].tolist() == [2, 3] and got[2].tolist() == [4, 5]
    again = list(nd.Dataset.range(6).batch(2))
    assert again[0].tolist() == [0, 1]


def test_batch_does_not_alias_user_data():
    arr = np.arange(6, dtype=np.int64)
    got = list(nd.Dataset.from_tensor_slices(arr).batch(3))
    got[0][:] = -1
    assert arr.tolist() == [0, 1, 2, 3, 4, 5]


def test_element_spec():
    src = nd.Dataset.from_tensor_slices(np.zeros((10, 4), np.float32))
    assert src.batch(3).element_spec == nd.TensorSpec((None, 4), np.float32)
    assert src.batch(3, drop_remainder=True).element_spec == nd.TensorSpec((3, 4), np.float32)
    pair = nd.Dataset.zip((nd.Dataset.range(3), src))
    assert pair.batch(2, drop_remainder=True).element_spec == (
        nd.TensorSpec((2,), np.int64),
        nd.TensorSpec((2, 4), np.float32),
    )


def test_element_spec_of_unknown_inner_dims():
    ds = nd.Dataset.range(1, 4).map(lambda n: np.ones(3, np.int64) * n)   # recorded: (3,)
    assert ds.batch(2).element_spec == nd.TensorSpec((None, 3), np.int64)
    # np.full cannot take a symbolic fill value: the spec comes from the first elements,
    # a dim static where they agree
    ds = nd.Dataset.range(1, 4).map(lambda n: np.full(3, n))
    assert ds.batch(2).element_spec == nd.TensorSpec((None, 3), np.int64)
    assert [b.tolist() for b in ds.batch(2)] == [[[1] * 3, [2] * 3], [[3] * 3]]
    ds = nd.Dataset.range(1, 4).map(lambda n: np.full(int(n), n))
    assert ds.padded_batch(2).element_spec == nd.TensorSpec((None, None), np.int64)


@pytest.mark.parametrize(
    "n, size, drop, expected",
    [(10, 3, False, 4), (10, 3, True, 3), (9, 3, False, 3), (9, 3, True, 3), (0, 2, False, 0), (2, 5, True, 0)],
)
def test_cardinality(n, size, drop, expected):
    ds = nd.Dataset.range(n).batch(size, drop_remainder=drop)
    assert ds.cardinality() == expected
    assert len(list(ds)) == expected


def test_cardinality_infinite_and_unknown():
    assert nd.Dataset.range(3).repeat().batch(2).cardinality() == nd.INFINITE
    assert nd.Dataset.range(3).filter(lambda x: x > 0).batch(2).cardinality() == nd.UNKNOWN


def test_infinite_input_with_take():
    got = list(nd.Dataset.range(3).repeat().batch(2).take(3))
    assert [b.tolist() for b in got] == [[0, 1], [2, 0], [1, 2]]


def test_numpy_integer_batch_size():
    assert len(list(nd.Dataset.range(4).batch(np.int64(2)))) == 2


def test_reference_path_matches():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 255, size=(23, 4, 4), dtype=np.uint8)
    y = rng.normal(size=23)
    ds = (
        nd.Dataset.from_tensor_slices({"x": x, "y": y})
        .map(lambda d: {"x": d["x"].astype(np.float32) / 255.0, "y": d["y"]})
        .batch(5)
    )
    got = assert_reference_matches(ds)  # dict elements fuse
    assert [b["x"].shape for b in got] == [(5, 4, 4)] * 4 + [(3, 4, 4)]
    np.testing.assert_allclose(np.concatenate([b["x"] for b in got]), x.astype(np.float32) / 255.0, rtol=1e-6)


def test_string_components_batch_on_the_default_path():
    x = np.arange(23)
    ds = (nd.Dataset.from_tensor_slices({"x": x, "s": [str(i) for i in range(23)]})
          .map(lambda d: {"x": d["x"] * 2, "s": d["s"]}).batch(5))
    got = assert_paths_agree(ds)  # strings do not fuse
    assert got[0]["s"].dtype == object and got[0]["s"].tolist() == [b"0", b"1", b"2", b"3", b"4"]


def test_reference_path_matches_drop_remainder():
    ds = nd.Dataset.range(50).map(lambda v: v * v).filter(lambda v: v % 3 == 1).batch(4, drop_remainder=True)
    got = assert_reference_matches(ds)
    kept = [v * v for v in range(50) if (v * v) % 3 == 1]
    assert [b.tolist() for b in got] == [kept[i:i + 4] for i in range(0, len(kept) - len(kept) % 4, 4)]


def test_map_after_batch_sees_whole_batch():
    got = list(nd.Dataset.range(10).batch(4).map(lambda b: b.sum()))
    assert [int(v) for v in got] == [6, 22, 17]
    assert all(type(v) is np.int64 for v in got)


def test_nested_drop_remainder_spec():
    ds = nd.Dataset.range(10).batch(2, drop_remainder=True).batch(3, drop_remainder=True)
    assert ds.element_spec == nd.TensorSpec((3, 2), np.int64)
    assert [b.shape for b in ds] == [(3, 2)]


def test_numpy_bool_drop_remainder():
    assert len(list(nd.Dataset.range(5).batch(2, drop_remainder=np.bool_(True)))) == 2


# ------------------------------------------------------------- errors

def test_differently_shaped_elements_raise_at_that_batch():
    # element shapes: (1,) for x < 4, (2,) after: batch [0,1,2] is fine, [3,4,5] mixes.
    ds = nd.Dataset.range(6).map(lambda x: np.zeros(1 + x // 4, np.int64)).batch(3)
    it = iter(ds)
    first = next(it)
    assert first.shape == (3, 1)
    with pytest.raises(nd.errors.InvalidArgumentError, match="(?i)batch"):
        next(it)


def test_differently_shaped_generator_elements_raise():
    def gen():
        yield np.zeros(2)
        yield np.zeros(3)

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None,), np.float64)).batch(2)
    with pytest.raises(nd.errors.InvalidArgumentError):
        list(ds)


def test_differently_shaped_elements_raise_on_reference_path():
    ds = nd.Dataset.range(4).map(lambda x: np.zeros(x + 1)).batch(2)
    with pytest.raises(nd.errors.InvalidArgumentError):
        list(reference(ds))


@pytest.mark.parametrize("size", [0, -1, -5])
def test_non_positive_batch_size_is_value_error(size):
    with pytest.raises(ValueError, match="(?i)batch"):
        nd.Dataset.range(5).batch(size)


@pytest.mark.parametrize("size", ["2", None, 2.5, [2]])
def test_non_integer_batch_size(size):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(5).batch(size)


@pytest.mark.parametrize("drop", ["yes", 2])
def test_non_bool_drop_remainder(drop):
    # TF converts drop_remainder to a tf.bool tensor; a string or int is a TypeError.
    with pytest.raises((TypeError, ValueError), match="drop_remainder"):
        nd.Dataset.range(5).batch(2, drop_remainder=drop)
