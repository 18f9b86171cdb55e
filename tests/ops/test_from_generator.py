"""Dataset.from_generator: output_types/output_shapes, output_signature, args, errors."""

import numba
import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_paths_agree


def _unknown_shape(shape):
    return shape is None or any(d is None for d in shape)


def test_output_types_only():
    def gen():
        yield 1
        yield 2
        yield 3

    ds = nd.Dataset.from_generator(gen, output_types=np.int64)
    elems = list(ds)
    assert [type(x) for x in elems] == [np.int64] * 3
    assert [int(x) for x in elems] == [1, 2, 3]
    spec = ds.element_spec
    assert spec.dtype == np.int64
    assert _unknown_shape(spec.shape), "shape is unknown when only output_types is given"


def test_output_types_converts_values():
    def gen():
        yield [1, 2]
        yield np.array([3, 4, 5], dtype=np.int32)

    ds = nd.Dataset.from_generator(gen, output_types=np.float32, output_shapes=(None,))
    elems = list(ds)
    assert all(type(e) is np.ndarray and e.dtype == np.float32 for e in elems)
    np.testing.assert_array_equal(elems[0], [1, 2])
    np.testing.assert_array_equal(elems[1], [3, 4, 5])
    assert ds.element_spec == nd.TensorSpec((None,), np.float32)


def test_tuple_types_and_shapes():
    def gen():
        for i in range(3):
            yield i, [i] * (i + 1)

    ds = nd.Dataset.from_generator(gen, output_types=(np.int64, np.int32), output_shapes=((), (None,)))
    elems = list(ds)
    assert len(elems) == 3
    for i, (a, b) in enumerate(elems):
        assert type(a) is np.int64 and a == i
        assert b.dtype == np.int32 and b.shape == (i + 1,)
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((None,), np.int32))


def test_output_signature():
    def gen():
        yield np.ones((2, 3)), b"a"
        yield np.zeros((2, 3)), "b"

    sig = (nd.TensorSpec((2, 3), np.float64), nd.TensorSpec((), nd.string))
    ds = nd.Dataset.from_generator(gen, output_signature=sig)
    elems = list(ds)
    assert len(elems) == 2
    np.testing.assert_array_equal(elems[0][0], np.ones((2, 3)))
    assert elems[0][1] == b"a" and elems[1][1] == b"b"
    assert type(elems[1][1]) is bytes
    assert ds.element_spec == sig


def test_output_signature_dict():
    def gen():
        for i in range(2):
            yield {"x": np.full(2, i, np.float32), "y": i}

    sig = {"x": nd.TensorSpec((2,), np.float32), "y": nd.TensorSpec((), np.int64)}
    ds = nd.Dataset.from_generator(gen, output_signature=sig)
    elems = list(ds)
    assert [type(e) for e in elems] == [dict, dict]
    assert [int(e["y"]) for e in elems] == [0, 1]
    assert elems[1]["x"].dtype == np.float32
    assert ds.element_spec == sig


def test_output_signature_with_unknown_dim_accepts_any_length():
    def gen():
        for n in (1, 3, 0):
            yield np.arange(n)

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None,), np.int64))
    assert [e.shape for e in ds] == [(1,), (3,), (0,)]


def test_string_elements():
    def gen():
        yield "x"
        yield b"y\x00"

    ds = nd.Dataset.from_generator(gen, output_types=nd.string, output_shapes=())
    assert list(ds) == [b"x", b"y\x00"]


def test_args_are_passed():
    def gen(n, start):
        for i in range(int(n)):
            yield start + i

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=(), args=(3, 10))
    assert [int(x) for x in ds] == [10, 11, 12]


def test_string_args_arrive_as_bytes():
    seen = []

    def gen(s):
        seen.append(s)
        yield 1

    list(nd.Dataset.from_generator(gen, output_types=np.int64, args=("abc",)))
    assert seen == [b"abc"]


def test_generator_is_reinvoked_per_iteration():
    calls = []

    def gen():
        calls.append(1)
        yield from range(3)

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=())
    assert [int(x) for x in ds] == [0, 1, 2]
    assert [int(x) for x in ds] == [0, 1, 2]
    assert len(calls) == 2


def test_generator_not_called_at_construction():
    calls = []

    def gen():
        calls.append(1)
        yield 1

    ds = nd.Dataset.from_generator(gen, output_types=np.int64)
    _ = ds.element_spec
    assert calls == []


def test_callable_class_instance():
    class Source:
        def __call__(self):
            return iter([5, 6])

    ds = nd.Dataset.from_generator(Source(), output_types=np.int64, output_shapes=())
    assert [int(x) for x in ds] == [5, 6]


def test_empty_generator():
    ds = nd.Dataset.from_generator(lambda: iter([]), output_types=np.int64)
    assert list(ds) == []


def test_cardinality_is_unknown():
    ds = nd.Dataset.from_generator(lambda: iter([1, 2]), output_types=np.int64)
    assert ds.cardinality() == nd.UNKNOWN


def test_take_stops_an_infinite_generator():
    def gen():
        i = 0
        while True:
            yield i
            i += 1

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=()).take(4)
    assert [int(x) for x in ds] == [0, 1, 2, 3]


def test_shape_mismatch_raises_invalid_argument_after_good_elements():
    def gen():
        yield np.zeros(2)
        yield np.zeros(3)

    ds = nd.Dataset.from_generator(gen, output_types=np.float64, output_shapes=(2,))
    it = iter(ds)
    np.testing.assert_array_equal(next(it), np.zeros(2))
    with pytest.raises(nd.errors.InvalidArgumentError, match="(?i)generator"):
        next(it)


def test_rank_mismatch_raises_invalid_argument():
    def gen():
        yield np.zeros((2, 2))

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None,), np.float64))
    with pytest.raises(nd.errors.InvalidArgumentError, match="(?i)generator"):
        list(ds)


def test_structure_mismatch_raises():
    def gen():
        yield 1, 2, 3

    ds = nd.Dataset.from_generator(gen, output_types=(np.int64, np.int64))
    with pytest.raises((TypeError, nd.errors.InvalidArgumentError), match="(?i)generator"):
        list(ds)


def test_unconvertible_value_raises():
    def gen():
        yield "not a number"

    ds = nd.Dataset.from_generator(gen, output_types=np.int64)
    with pytest.raises((TypeError, nd.errors.InvalidArgumentError), match="(?i)generator"):
        list(ds)


def test_exception_in_generator_surfaces_chained():
    boom = RuntimeError("generator exploded")

    def gen():
        yield 1
        raise boom

    it = iter(nd.Dataset.from_generator(gen, output_types=np.int64))
    assert int(next(it)) == 1
    with pytest.raises(Exception) as info:
        next(it)
    err = info.value
    assert isinstance(err, nd.errors.OpError)
    assert err.__cause__ is boom


def test_reference_path_matches():
    def gen():
        for i in range(4):
            yield {"a": np.arange(i), "b": (i * 0.5, str(i))}

    sig = {"a": nd.TensorSpec((None,), np.int64),
           "b": (nd.TensorSpec((), np.float64), nd.TensorSpec((), nd.string))}
    ds = nd.Dataset.from_generator(gen, output_signature=sig).map(lambda d: (d["a"] * 2, d["b"]))
    assert len(assert_paths_agree(ds)) == 4


def test_not_callable_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator([1, 2, 3], output_types=np.int64)


def test_missing_types_and_signature_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator(lambda: iter([1]))


def test_signature_with_types_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator(
            lambda: iter([1]), output_types=np.int64, output_signature=nd.TensorSpec((), np.int64)
        )


def test_signature_with_shapes_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator(
            lambda: iter([1]), output_shapes=(), output_signature=nd.TensorSpec((), np.int64)
        )


def test_signature_of_non_specs_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator(lambda: iter([1]), output_signature=(np.int64,))


def test_shapes_without_types_is_type_error():
    with pytest.raises(TypeError, match="from_generator"):
        nd.Dataset.from_generator(lambda: iter([1]), output_shapes=())


def _raises_at_five():
    for i in range(10):
        if i == 5:
            raise ValueError("boom")
        yield np.full(3, i, np.float32)


@numba.njit
def _row_sum(x):
    return x.sum()


def _fused():
    o = nd.Options()
    o.fusion_min_rows = 0
    return o


@pytest.mark.parametrize("build", [
    lambda ds: ds,
    lambda ds: ds.map(lambda x: x * 2),
    lambda ds: ds.map(lambda x: x.sum()),
    lambda ds: ds.map(_row_sum),
    lambda ds: ds.map(_row_sum).with_options(_fused()),
    lambda ds: ds.map(lambda x: x * 2).with_options(_fused()),
    lambda ds: ds.map(lambda x: x * 2, num_parallel_calls=3),
    lambda ds: ds.map(lambda x: x * 2).prefetch(2),
    lambda ds: ds.map(lambda x: x * 2, num_parallel_calls=nd.AUTOTUNE).prefetch(nd.AUTOTUNE),
], ids=["alone", "lifted", "compiled", "njit", "njit-fused", "lifted-fused", "parallel",
        "prefetch", "autotune"])
def test_elements_before_a_generator_error_are_delivered(build):
    """tf.data yields 0..4 and then the generator's error, with or without a map."""
    ds = build(nd.Dataset.from_generator(_raises_at_five,
                                         output_signature=nd.TensorSpec((3,), np.float32)))
    got = []
    with pytest.raises(nd.errors.InvalidArgumentError, match="boom") as info:
        for x in ds:
            got.append(np.asarray(x))
    assert len(got) == 5
    assert [float(np.sum(g)) for g in got] == [float(np.sum(x)) for x in
                                               [build_ref(i, build) for i in range(5)]]
    assert isinstance(info.value.__cause__, ValueError)


def build_ref(i, build):
    """Element ``i`` of the same pipeline over a generator that does not raise."""
    def gen():
        yield np.full(3, i, np.float32)
    return next(iter(build(nd.Dataset.from_generator(
        gen, output_signature=nd.TensorSpec((3,), np.float32)))))
