"""Tests for element_spec and the TF1 trio output_types / output_shapes / output_classes."""

import collections

import numpy as np
import pytest

import nbdata as nd

Point = collections.namedtuple("Point", "x y")


def S(shape, dtype):
    return nd.TensorSpec(shape, dtype)


# ---------------------------------------------------------------- TensorSpec itself

def test_tensor_spec_compares_by_value():
    assert S((2, 3), np.float32) == S([2, 3], "float32")
    assert S((2, 3), np.float32) == S((2, 3), np.dtype(np.float32))
    assert S((2, 3), np.float32) != S((2, 3), np.float64)
    assert S((2, 3), np.float32) != S((2, None), np.float32)
    assert S((), np.int64) == S([], np.int64)


def test_tensor_spec_attributes():
    s = S((None, 3), np.uint8)
    assert s.shape == (None, 3)
    assert s.dtype == np.dtype(np.uint8)


def test_string_dtype_spellings():
    for spelling in (nd.string, bytes, str, np.bytes_, object):
        assert S((), spelling).dtype == nd.string
        assert S((), spelling) == S((), nd.string)


# ---------------------------------------------------------------- sources

def test_from_tensors_vector():
    ds = nd.Dataset.from_tensors(np.array([1, 2, 3]))
    assert ds.element_spec == S((3,), np.int64)


def test_python_scalars_convert_as_numpy():
    assert nd.Dataset.from_tensors(1).element_spec == S((), np.int64)
    assert nd.Dataset.from_tensors(1.5).element_spec == S((), np.float64)
    assert nd.Dataset.from_tensors(True).element_spec == S((), np.bool_)
    assert nd.Dataset.from_tensors("abc").element_spec == S((), nd.string)
    assert nd.Dataset.from_tensors(b"abc").element_spec == S((), nd.string)


def test_from_tensor_slices_nested():
    ds = nd.Dataset.from_tensor_slices({
        "a": np.zeros((4, 2), np.float32),
        "b": (np.arange(4), np.array([b"w", b"x", b"y", b"z"], dtype=object)),
    })
    assert ds.element_spec == {"a": S((2,), np.float32), "b": (S((), np.int64), S((), nd.string))}


def test_namedtuple_structure():
    ds = nd.Dataset.from_tensor_slices(Point(np.zeros(3, np.int16), np.zeros((3, 4, 5), np.float64)))
    spec = ds.element_spec
    assert isinstance(spec, Point)
    assert spec.x == S((), np.int16) and spec.y == S((4, 5), np.float64)


def test_range_spec_and_output_type():
    assert nd.Dataset.range(5).element_spec == S((), np.int64)
    assert nd.Dataset.range(5, output_type=np.int32).element_spec == S((), np.int32)
    assert nd.Dataset.range(5, dtype=np.float32).element_spec == S((), np.float32)


def test_from_generator_specs():
    def gen():
        yield np.zeros(3, np.float32)

    only_types = nd.Dataset.from_generator(gen, output_types=np.float32)
    assert only_types.element_spec.dtype == np.float32
    assert only_types.element_spec.shape is None  # unknown rank

    with_shapes = nd.Dataset.from_generator(gen, output_types=np.float32, output_shapes=(None,))
    assert with_shapes.element_spec == S((None,), np.float32)

    sig = (S((None, 2), np.int32), S((), nd.string))
    with_sig = nd.Dataset.from_generator(lambda: iter([]), output_signature=sig)
    assert with_sig.element_spec == sig


# ---------------------------------------------------------------- transformations

def test_batch_dims():
    ds = nd.Dataset.from_tensor_slices(np.zeros((10, 2), np.float32))
    assert ds.batch(3).element_spec == S((None, 2), np.float32)
    assert ds.batch(3, drop_remainder=True).element_spec == S((3, 2), np.float32)
    assert nd.Dataset.range(10).batch(4).element_spec == S((None,), np.int64)


def test_batch_of_strings_is_string():
    ds = nd.Dataset.from_tensor_slices(np.array([b"a", b"b"], dtype=object)).batch(2)
    assert ds.element_spec == S((None,), nd.string)


def test_unbatch_drops_leading_dim():
    ds = nd.Dataset.from_tensors(np.zeros((4, 3), np.float64)).unbatch()
    assert ds.element_spec == S((3,), np.float64)


def test_map_keeps_known_shape():
    ds = nd.Dataset.from_tensors(np.zeros(3, np.float64)).map(lambda x: x * 2)
    assert ds.element_spec == S((3,), np.float64)


def test_map_data_dependent_shape_is_none():
    ds = nd.Dataset.range(1, 4).map(lambda n: np.full(n, n))
    assert ds.element_spec == S((None,), np.int64)


def test_map_changes_structure():
    ds = nd.Dataset.range(3).map(lambda x: {"v": x, "pair": (x, x * 0.5)})
    assert ds.element_spec == {"v": S((), np.int64), "pair": (S((), np.int64), S((), np.float64))}


def test_shape_preserving_ops():
    base = nd.Dataset.from_tensor_slices((np.zeros((6, 2), np.uint8), np.zeros(6, np.float32)))
    for ds in (base.take(2), base.skip(1), base.repeat(2), base.shuffle(3), base.prefetch(1),
               base.cache(), base.shard(2, 0), base.filter(lambda a, b: b > 0)):
        assert ds.element_spec == (S((2,), np.uint8), S((), np.float32))


def test_enumerate_and_zip():
    a = nd.Dataset.range(3)
    b = nd.Dataset.from_tensor_slices(np.zeros((3, 2), np.float32))
    assert a.enumerate().element_spec == (S((), np.int64), S((), np.int64))
    assert nd.Dataset.zip((a, b)).element_spec == (S((), np.int64), S((2,), np.float32))
    assert nd.Dataset.zip({"a": a, "b": b}).element_spec == {"a": S((), np.int64), "b": S((2,), np.float32)}


def test_concatenate_relaxes_differing_dims():
    a = nd.Dataset.from_tensors(np.zeros(3, np.int64))
    b = nd.Dataset.from_tensors(np.zeros(4, np.int64))
    assert a.concatenate(b).element_spec == S((None,), np.int64)
    assert a.concatenate(a).element_spec == S((3,), np.int64)


def test_window_gives_dataset_spec():
    spec = nd.Dataset.range(5).window(2).element_spec
    assert isinstance(spec, nd.DatasetSpec)
    assert spec.element_spec == S((), np.int64)


def test_padded_batch_dims():
    ds = nd.Dataset.range(1, 4).map(lambda n: np.full(n, n)).padded_batch(2)
    assert ds.element_spec == S((None, None), np.int64)


# ---------------------------------------------------------------- TF1 trio

def test_output_types_shapes_classes_nested():
    ds = nd.Dataset.from_tensor_slices({
        "a": np.zeros((4, 2), np.float32),
        "b": (np.arange(4), np.array([b"w", b"x", b"y", b"z"], dtype=object)),
    }).batch(2)
    assert ds.output_types == {"a": np.dtype(np.float32), "b": (np.dtype(np.int64), nd.string)}
    assert ds.output_shapes == {"a": (None, 2), "b": ((None,), (None,))}
    assert ds.output_classes == {"a": np.ndarray, "b": (np.ndarray, np.ndarray)}
    assert isinstance(ds.output_shapes["a"], nd.TensorShape)   # as TF1's get_output_shapes
    assert iter(ds).output_shapes == ds.output_shapes


def test_output_trio_of_a_sparse_component_is_its_dtype_and_shape():
    example = nd.io.encode_example({"tags": np.array([3, 4], np.int64)})
    ds = nd.Dataset.from_tensors(example).map(
        lambda s: nd.io.parse_single_example(s, {"tags": nd.io.VarLenFeature(np.int64)}))
    for obj in (ds, iter(ds), ds.make_initializable_iterator()):
        assert obj.output_types == {"tags": np.dtype(np.int64)}
        assert obj.output_shapes == {"tags": nd.TensorShape([None])}
        assert isinstance(obj.output_shapes["tags"], nd.TensorShape)
        assert obj.output_classes == {"tags": nd.SparseTensor}
    # the trio round-trips through from_structure
    it = nd.Iterator.from_structure(ds.output_types, ds.output_shapes)
    assert it.output_shapes == ds.output_shapes


def test_output_trio_of_windows_is_their_spec():
    ds = nd.Dataset.range(5).window(2)
    assert ds.output_types == ds.output_shapes == ds.output_classes == ds.element_spec


def test_output_trio_scalar():
    ds = nd.Dataset.range(3)
    assert ds.output_types == np.int64
    assert ds.output_shapes == ()
    assert ds.output_classes is np.ndarray


def test_output_trio_namedtuple():
    ds = nd.Dataset.from_tensor_slices(Point(np.zeros(3, np.int16), np.zeros(3, np.float64)))
    assert isinstance(ds.output_types, Point)
    assert ds.output_types.x == np.int16
    assert ds.output_shapes == Point((), ())


def test_element_spec_does_not_read_data():
    def gen():
        raise AssertionError("generator must not run for element_spec")
        yield  # pragma: no cover

    calls = []

    def f(x):
        calls.append(x)
        return x

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=()).map(f).batch(2)
    traced = len(calls)  # building the map traces f on sample inputs, as tf.data does
    assert ds.element_spec == S((None,), np.int64)
    assert ds.output_types == np.int64 and ds.output_shapes == (None,)
    assert len(calls) == traced


def test_elements_match_their_spec():
    ds = nd.Dataset.from_tensor_slices({
        "img": np.zeros((5, 4, 4, 3), np.uint8),
        "label": np.arange(5, dtype=np.int32),
        "name": np.array([b"a"] * 5, dtype=object),
    }).batch(2, drop_remainder=True)
    spec = ds.element_spec
    for elem in ds.as_numpy_iterator():
        for key in ("img", "label"):
            assert elem[key].dtype == spec[key].dtype
            assert elem[key].shape == spec[key].shape
        assert elem["name"].dtype == object and spec["name"].dtype == nd.string
        assert all(type(v) is bytes for v in elem["name"])


@pytest.mark.parametrize("bad", [(2, -3), ("a",), (1.5,)])
def test_tensor_spec_rejects_bad_shapes(bad):
    with pytest.raises((ValueError, TypeError)):
        nd.TensorSpec(bad, np.float32)
