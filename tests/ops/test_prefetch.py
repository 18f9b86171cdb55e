"""Tests for Dataset.prefetch: same elements, AUTOTUNE, argument checks, errors pass through."""

import gc

import numpy as np
import pytest

import nbdata as nd

from equivalence import Boom, assert_reference_matches, fusing, reference, values


def test_doc_example():
    out = values(nd.Dataset.range(3).prefetch(2))
    assert out == [0, 1, 2]
    assert all(isinstance(v, np.int64) for v in out)


@pytest.mark.parametrize("buffer_size", [1, 2, 7, 1000])
def test_same_elements(buffer_size):
    assert values(nd.Dataset.range(50).prefetch(buffer_size)) == list(range(50))


def test_autotune_accepted():
    assert nd.AUTOTUNE == -1
    assert values(nd.Dataset.range(20).prefetch(nd.AUTOTUNE)) == list(range(20))
    assert values(nd.Dataset.range(20).prefetch(-1)) == list(range(20))


def test_numpy_integer_buffer_size():
    assert values(nd.Dataset.range(4).prefetch(np.int64(2))) == [0, 1, 2, 3]


def test_empty():
    assert values(nd.Dataset.range(0).prefetch(3)) == []


def test_nested_elements_and_dtypes_kept():
    ds = nd.Dataset.from_tensor_slices({
        "img": np.arange(24, dtype=np.uint8).reshape(4, 2, 3),
        "label": np.array([b"a", b"b", b"c", b"d"], dtype=object),
        "w": np.array([0.5, 1.5, 2.5, 3.5], np.float32),
    }).batch(2).prefetch(1)
    out = values(ds)
    assert len(out) == 2
    assert out[0]["img"].dtype == np.uint8 and out[0]["img"].shape == (2, 2, 3)
    assert out[0]["label"].dtype == object and out[0]["label"].tolist() == [b"a", b"b"]
    assert out[1]["w"].dtype == np.float32 and out[1]["w"].tolist() == [2.5, 3.5]


def test_after_map_filter_batch_matches_reference():
    ds = (nd.Dataset.range(40).map(lambda x: x * 3).filter(lambda x: x % 2 == 0)
          .batch(4).prefetch(nd.AUTOTUNE))
    got = [b.tolist() for b in assert_reference_matches(ds)]
    want = [list(range(0, 120, 6))[i:i + 4] for i in range(0, 20, 4)]
    assert got == want


def test_prefetch_of_generator():
    def gen():
        for i in range(10):
            yield np.full(i % 3, i, np.int32)

    ds = nd.Dataset.from_generator(gen, output_types=np.int32, output_shapes=(None,)).prefetch(2)
    out = values(ds)
    assert [o.tolist() for o in out] == [[i] * (i % 3) for i in range(10)]
    assert all(o.dtype == np.int32 for o in out)


def test_prefetch_infinite_then_take():
    assert values(nd.Dataset.range(3).repeat().prefetch(4).take(7)) == [0, 1, 2, 0, 1, 2, 0]


def test_take_after_prefetch():
    assert values(nd.Dataset.range(1000).prefetch(10).take(3)) == [0, 1, 2]


def test_chained_prefetches():
    assert values(nd.Dataset.range(10).prefetch(1).map(lambda x: x + 1).prefetch(2)) == list(range(1, 11))


def test_iterate_twice_and_abandon_partial_iterator():
    ds = nd.Dataset.range(100).prefetch(5)
    it = iter(ds)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    del it
    gc.collect()
    assert values(ds) == list(range(100))
    assert values(ds) == list(range(100))


def test_end_of_sequence_repeats():
    it = iter(nd.Dataset.range(2).prefetch(4))
    assert it.get_next() == 0 and it.get_next() == 1
    for _ in range(3):
        with pytest.raises(nd.errors.OutOfRangeError):
            it.get_next()


def test_cardinality_and_spec_preserved():
    ds = nd.Dataset.from_tensor_slices(np.zeros((5, 2), np.float64))
    p = ds.prefetch(2)
    assert p.cardinality() == 5
    assert p.element_spec == ds.element_spec
    assert nd.Dataset.range(1).repeat().prefetch(1).cardinality() == nd.INFINITE


# ---------------------------------------------------------------- errors through prefetch

def _fails_at_3(x):
    if x == 3:
        raise Boom("element three")
    return x


@pytest.mark.parametrize("fusion", [True, False])
def test_upstream_error_surfaces_after_good_elements(fusion):
    ds = nd.Dataset.range(6).map(_fails_at_3).prefetch(2)
    ds = fusing(ds) if fusion else reference(ds)
    it = iter(ds)
    assert [it.get_next() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(nd.errors.OpError) as info:
        it.get_next()
    assert "map" in str(info.value)
    assert isinstance(info.value.__cause__, Boom)


def test_upstream_error_in_for_loop():
    seen = []
    with pytest.raises(nd.errors.OpError) as info:
        for x in nd.Dataset.range(6).map(_fails_at_3).prefetch(nd.AUTOTUNE):
            seen.append(int(x))
    assert seen == [0, 1, 2]
    assert isinstance(info.value.__cause__, Boom)


def test_generator_error_surfaces():
    def gen():
        yield 1
        raise Boom("generator broke")

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=()).prefetch(3)
    it = iter(ds)
    assert it.get_next() == 1
    with pytest.raises(Exception) as info:
        it.get_next()
    err = info.value
    assert isinstance(err, Boom) or isinstance(err.__cause__, Boom)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("buffer_size", [-2, -5])
def test_negative_buffer_size_other_than_autotune_rejected(buffer_size):
    with pytest.raises(ValueError, match="(?i)prefetch|buffer"):
        nd.Dataset.range(3).prefetch(buffer_size)


@pytest.mark.parametrize("buffer_size", ["2", 1.5])
def test_non_integer_buffer_size_rejected(buffer_size):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(3).prefetch(buffer_size)


def test_none_buffer_size_is_autotune():
    """tf.data accepts prefetch(None) as AUTOTUNE (issue 35)."""
    assert [int(x) for x in nd.Dataset.range(3).prefetch(None)] == [0, 1, 2]


def test_concurrent_iterators_are_independent():
    ds = nd.Dataset.range(10).map(lambda x: x * 2).prefetch(3)
    a, b = iter(ds), iter(ds)
    got_a, got_b = [], []
    for _ in range(5):
        got_a.append(int(a.get_next()))
        got_b.append(int(b.get_next()))
        got_b.append(int(b.get_next()))
    assert got_a == [0, 2, 4, 6, 8]
    assert got_b == list(range(0, 20, 2))
    assert [int(x) for x in a] == [10, 12, 14, 16, 18]
