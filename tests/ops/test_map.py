"""Dataset.map: argument unpacking, NumPy dtype rules, specs and errors."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_reference_matches, fused, fusing, reference

Point = collections.namedtuple("Point", ["x", "y"])


def _python_only(x):
    """A helper Numba cannot compile (forces the Python path for the stage)."""
    return int(str(int(x))[::-1])


# ---------------------------------------------------------------- basics

def test_scalar_map():
    ds = nd.Dataset.range(5).map(lambda x: x * 2 + 1)
    got = list(ds)
    assert [int(x) for x in got] == [1, 3, 5, 7, 9]
    assert all(type(x) is np.int64 for x in got)
    assert ds.cardinality() == 5
    assert ds.element_spec == nd.TensorSpec((), np.int64)


def test_array_map():
    arr = np.arange(12, dtype=np.float64).reshape(4, 3)
    ds = nd.Dataset.from_tensor_slices(arr).map(lambda r: r * 2)
    got = list(ds)
    assert all(type(r) is np.ndarray and r.shape == (3,) and r.dtype == np.float64 for r in got)
    np.testing.assert_array_equal(np.stack(got), arr * 2)
    assert ds.element_spec == nd.TensorSpec((3,), np.float64)


def test_map_does_not_modify_user_array():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    before = arr.copy()
    list(nd.Dataset.from_tensor_slices(arr).map(lambda r: r + 1))
    np.testing.assert_array_equal(arr, before)


def test_chained_maps():
    ds = nd.Dataset.range(4).map(lambda x: x + 1).map(lambda x: x * x).map(lambda x: x - 1)
    assert [int(x) for x in ds] == [0, 3, 8, 15]


def test_named_function():
    def square(x):
        return x * x

    assert [int(x) for x in nd.Dataset.range(4).map(square)] == [0, 1, 4, 9]


def test_closure_constant():
    k = 7
    assert [int(x) for x in nd.Dataset.range(3).map(lambda x: x + k)] == [7, 8, 9]


def test_python_only_function_still_works():
    ds = nd.Dataset.range(10, 14).map(_python_only)
    assert [int(x) for x in ds] == [1, 11, 21, 31]
    assert all(type(x) is np.int64 for x in ds)


def test_string_elements_are_bytes_in_the_function():
    seen = []

    def f(s):
        seen.append(type(s))
        return s + b"!"

    ds = nd.Dataset.from_tensor_slices(["a", "bc"]).map(f)
    seen.clear()  # tracing called f with stand-ins; running calls it with bytes
    assert list(ds) == [b"a!", b"bc!"]
    assert set(seen) == {bytes}


# ------------------------------------------------------- unpacking rules

def test_tuple_elements_are_unpacked():
    ds = nd.Dataset.from_tensor_slices((np.arange(3), np.arange(3) * 10)).map(lambda x, y: x + y)
    assert [int(v) for v in ds] == [0, 11, 22]


def test_returning_tuple_gives_tuple_elements():
    ds = nd.Dataset.from_tensor_slices((np.arange(3), np.arange(3) * 10)).map(lambda x, y: (y, x))
    got = list(ds)
    assert [tuple(int(v) for v in e) for e in got] == [(0, 0), (10, 1), (20, 2)]
    assert all(type(e) is tuple for e in got)


def test_single_dataset_to_tuple():
    ds = nd.Dataset.range(3).map(lambda x: (x, x * 0.5))
    got = list(ds)
    assert [(type(a), type(b)) for a, b in got] == [(np.int64, np.float64)] * 3
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((), np.float64))


def test_nested_tuple_is_unpacked_one_level():
    src = nd.Dataset.from_tensor_slices(((np.arange(2), np.arange(2) + 5), np.arange(2) + 10))
    ds = src.map(lambda ab, c: ab[0] + ab[1] + c)
    assert [int(v) for v in ds] == [15, 18]


def test_dict_element_is_one_argument():
    src = nd.Dataset.from_tensor_slices({"a": np.arange(3), "b": np.arange(3) * 2})
    ds = src.map(lambda d: d["a"] - d["b"])
    assert [int(v) for v in ds] == [0, -1, -2]


def test_returning_dict():
    ds = nd.Dataset.range(2).map(lambda x: {"x": x, "sq": x * x})
    got = list(ds)
    assert [type(e) for e in got] == [dict, dict]
    assert [(int(e["x"]), int(e["sq"])) for e in got] == [(0, 0), (1, 1)]
    assert ds.element_spec == {"x": nd.TensorSpec((), np.int64), "sq": nd.TensorSpec((), np.int64)}


def test_namedtuple_elements_are_unpacked():
    # nbdata API decision (documented in Dataset.map): namedtuples unpack like tuples.
    src = nd.Dataset.from_tensor_slices(Point(np.arange(3), np.arange(3) * 3))
    ds = src.map(lambda x, y: x * y)
    assert [int(v) for v in ds] == [0, 3, 12]


def test_returning_namedtuple_keeps_type():
    ds = nd.Dataset.range(2).map(lambda v: Point(v, v + 1))
    got = list(ds)
    assert [type(e) for e in got] == [Point, Point]
    assert [(int(e.x), int(e.y)) for e in got] == [(0, 1), (1, 2)]


def test_returning_list_gives_a_tuple_like_tf_data():
    assert [tuple(int(v) for v in e) for e in nd.Dataset.range(2).map(lambda x: [x, x])] == \
        [(0, 0), (1, 1)]


# ------------------------------------------------------------- dtypes

def _numpy_expected(arr, fn):
    """What NumPy itself gives when ``fn`` is applied to each slice of ``arr``."""
    return [fn(arr[i]) for i in range(len(arr))]


@pytest.mark.parametrize(
    "dtype, fn",
    [
        (np.float32, lambda x: x * 2.0),
        (np.float32, lambda x: x + 1),
        (np.float32, lambda x: x / 3),
        (np.int32, lambda x: x + 1),
        (np.int32, lambda x: x * 2),
        (np.int64, lambda x: x / 2),
        (np.int64, lambda x: x * 0.5),
        (np.int8, lambda x: x + 1),
        (np.uint8, lambda x: x // 2),
        (np.float32, lambda x: x + np.float64(1.0)),
        (np.int32, lambda x: x + np.int64(1)),
        (np.int64, lambda x: x > 2),
        (np.float32, lambda x: np.sqrt(x)),
    ],
)
def test_scalar_dtype_follows_numpy(dtype, fn):
    arr = np.arange(1, 6).astype(dtype)
    expected = _numpy_expected(arr, fn)
    ds = nd.Dataset.from_tensor_slices(arr).map(fn)
    got = list(ds)
    assert [type(g) for g in got] == [type(e) for e in expected]
    np.testing.assert_allclose(np.array(got, dtype=np.float64), np.array(expected, dtype=np.float64), rtol=1e-6)
    assert ds.element_spec.dtype == np.asarray(expected[0]).dtype


@pytest.mark.parametrize(
    "dtype, fn",
    [
        (np.float32, lambda x: x * 2.0),
        (np.float32, lambda x: x - x.mean()),
        (np.int32, lambda x: x * 3),
        (np.uint8, lambda x: x.astype(np.float32) / 255.0),
        (np.int16, lambda x: x.sum()),
    ],
)
def test_array_dtype_follows_numpy(dtype, fn):
    arr = np.arange(12).reshape(4, 3).astype(dtype)
    expected = _numpy_expected(arr, fn)
    ds = nd.Dataset.from_tensor_slices(arr).map(fn)
    got = list(ds)
    for g, e in zip(got, expected):
        assert type(g) is type(e)
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=1e-6)
    assert ds.element_spec.dtype == np.asarray(expected[0]).dtype


def test_float32_times_python_float_stays_float32_everywhere():
    ds = nd.Dataset.from_tensor_slices(np.ones((3, 2), np.float32)).map(lambda x: x * 2.0).batch(3)
    for out in (fused(ds), list(reference(ds))):
        assert out[0].dtype == np.float32
    assert ds.element_spec.dtype == np.float32


def test_python_scalar_results_convert_like_numpy():
    assert [type(v) for v in nd.Dataset.range(2).map(lambda x: 1)] == [np.int64] * 2
    assert [type(v) for v in nd.Dataset.range(2).map(lambda x: 1.5)] == [np.float64] * 2
    assert [type(v) for v in nd.Dataset.range(2).map(lambda x: True)] == [np.bool_] * 2
    assert [v for v in nd.Dataset.range(2).map(lambda x: "s")] == [b"s", b"s"]


def test_small_int_arrays_wrap_like_numpy():
    arr = np.full((4, 3), 120, np.int8)
    ds = nd.Dataset.from_tensor_slices(arr).map(lambda x: x + 10)
    for out in (fused(ds), list(reference(ds))):
        assert all(o.dtype == np.int8 for o in out)
        np.testing.assert_array_equal(np.stack(out), arr + 10)


def test_small_int_chain_then_batch_keeps_dtype():
    arr = np.arange(10, dtype=np.uint8)
    ds = nd.Dataset.from_tensor_slices(arr).map(lambda x: x // 2).map(lambda x: x + 1).batch(4)
    for out in (fused(ds), list(reference(ds))):
        assert [b.dtype for b in out] == [np.dtype(np.uint8)] * 3
        np.testing.assert_array_equal(np.concatenate(out), arr // 2 + 1)
    assert ds.element_spec == nd.TensorSpec((None,), np.uint8)


def test_float32_arithmetic_is_bit_exact():
    x = np.random.default_rng(0).random(1000).astype(np.float32)
    ds = nd.Dataset.from_tensor_slices(x).map(lambda v: v / 3 + 0.7).batch(1000)
    for out in (fused(ds), list(reference(ds))):
        assert out[0].dtype == np.float32
        np.testing.assert_array_equal(out[0], x / 3 + 0.7)


# ------------------------------------------------------------- specs

def test_spec_keeps_static_shape():
    ds = nd.Dataset.from_tensor_slices(np.zeros((5, 3), np.int64)).map(lambda x: x * 2)
    assert ds.element_spec == nd.TensorSpec((3,), np.int64)


def test_spec_data_dependent_shape_is_none():
    ds = nd.Dataset.range(1, 4).map(lambda n: np.full(n, n))
    assert ds.element_spec == nd.TensorSpec((None,), np.int64)
    got = list(ds)
    assert [g.shape for g in got] == [(1,), (2,), (3,)]
    np.testing.assert_array_equal(got[2], [3, 3, 3])


def test_spec_reduction_gives_scalar():
    ds = nd.Dataset.from_tensor_slices(np.zeros((2, 4), np.float32)).map(lambda x: x.sum())
    assert ds.element_spec.shape == ()
    assert ds.element_spec.dtype == np.float32


def test_cardinality_is_preserved():
    assert nd.Dataset.range(7).map(lambda x: x).cardinality() == 7
    assert nd.Dataset.range(7).repeat().map(lambda x: x).cardinality() == nd.INFINITE
    unknown = nd.Dataset.range(7).filter(lambda x: x > 2).map(lambda x: x)
    assert unknown.cardinality() == nd.UNKNOWN


# --------------------------------------------------- parallel / options

@pytest.mark.parametrize("npc", [None, 1, 4, nd.AUTOTUNE])
def test_num_parallel_calls_keeps_order(npc):
    ds = nd.Dataset.range(50).map(lambda x: x * 3, num_parallel_calls=npc)
    assert [int(v) for v in ds] == [3 * i for i in range(50)]


def test_parallel_python_function_keeps_order_when_deterministic():
    ds = nd.Dataset.range(40).map(_python_only, num_parallel_calls=4, deterministic=True)
    assert [int(v) for v in ds] == [_python_only(i) for i in range(40)]


def test_nondeterministic_gives_same_multiset():
    ds = nd.Dataset.range(40).map(_python_only, num_parallel_calls=4, deterministic=False)
    assert sorted(int(v) for v in ds) == sorted(_python_only(i) for i in range(40))


def test_reference_path_matches_for_fused_chain():
    arr = np.random.default_rng(0).normal(size=(37, 4)).astype(np.float32)
    ds = (
        nd.Dataset.from_tensor_slices((arr, np.arange(37)))
        .map(lambda x, i: (x * 2.0 + 1, i % 5))
        .map(lambda x, k: (np.sqrt(np.abs(x)) - x[::-1], k, x.max()))
        .batch(8)
    )
    assert_reference_matches(ds)


def test_transcendental_functions_agree_within_a_few_ulp():
    # Numba's float32 tanh is libm's, NumPy's is its own SIMD code: the fused path
    # agrees with the reference path to within 2 ULP (documented in Dataset.map).
    arr = np.random.default_rng(0).normal(size=(37, 4)).astype(np.float32)
    ds = nd.Dataset.from_tensor_slices(arr).map(lambda x: (np.tanh(x), x.max())).batch(8)
    got, want = fused(ds), list(reference(ds))
    for (a, amax), (b, bmax) in zip(got, want):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_max_ulp(a, b, maxulp=2)
        np.testing.assert_array_equal(amax, bmax)


def test_reference_path_matches_for_python_function():
    # the first map fuses; the chain is split before the function Numba cannot compile
    ds = nd.Dataset.range(20).map(lambda x: x * 3).map(_python_only).map(lambda x: x + 1)
    got = assert_reference_matches(ds)
    assert [int(v) for v in got] == [_python_only(i * 3) + 1 for i in range(20)]


# ------------------------------------------------------------- errors

def test_not_callable_is_type_error():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).map(5)


@pytest.mark.parametrize("npc", [0, -2, -7])
def test_bad_num_parallel_calls(npc):
    with pytest.raises(ValueError, match="(?i)map|num_parallel_calls"):
        nd.Dataset.range(3).map(lambda x: x, num_parallel_calls=npc)


def test_exception_in_python_function_is_chained():
    boom = KeyError("missing")

    def f(x):
        if _python_only(x) == 3:
            raise boom
        return x

    it = iter(nd.Dataset.range(10).map(f))
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(nd.errors.OpError, match="map") as info:
        next(it)
    assert isinstance(info.value, nd.errors.InvalidArgumentError)
    assert info.value.__cause__ is boom


def test_exception_in_compilable_function_is_chained():
    def f(x):
        if x == 4:
            raise ValueError("four is not allowed")
        return x + 1

    ds = nd.Dataset.range(10).map(f)
    with pytest.raises(nd.errors.OpError, match="map") as info:
        list(ds)
    cause = info.value.__cause__
    assert isinstance(cause, ValueError)
    assert "four is not allowed" in str(cause)


def test_exception_in_reference_path_is_chained():
    boom = ZeroDivisionError("zero")

    def f(x):
        if x == 2:
            raise boom
        return x

    with pytest.raises(nd.errors.OpError, match="map") as info:
        list(reference(nd.Dataset.range(5).map(f)))
    assert info.value.__cause__ is boom


def test_changing_structure_is_an_error():
    def f(x):
        return (x, x) if _python_only(x) > 2 else x

    with pytest.raises((nd.errors.OpError, TypeError, ValueError)):
        list(nd.Dataset.range(5).map(f))


def test_wrong_arity_is_an_error():
    src = nd.Dataset.from_tensor_slices((np.arange(3), np.arange(3)))
    with pytest.raises((TypeError, nd.errors.OpError)):
        list(src.map(lambda x: x))


def test_stack_of_scalars_is_lifted_and_matches_numpy():
    # The TF1 guide's `stack([col1, col2, col3])` after decode_csv: a vector built from
    # scalars becomes one lifted expression per position, in NumPy's result dtype.
    a = np.arange(50, dtype=np.float32)
    b = np.arange(50, dtype=np.int64) * 3
    for axis in (0, -1):
        ds = nd.Dataset.from_tensor_slices((a, b)).map(
            lambda x, y, axis=axis: (np.stack([x, y * 2, x - 1.5], axis=axis), y)).batch(8)
        got = assert_reference_matches(ds)
        assert got[0][0].dtype == np.float64 and got[0][0].shape == (8, 3)
        text = fusing(ds).compile().explain()
        assert "elementwise, inlined" in text, text
