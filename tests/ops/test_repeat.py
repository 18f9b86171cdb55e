"""Tests for Dataset.repeat: counts, forever, empty inputs and cardinality (tf.data semantics)."""

import threading

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_reference_matches, values


def run_with_timeout(fn, seconds=20.0):
    """Run fn in a daemon thread so that a hang fails the test instead of the suite."""
    result, error = [], []

    def target():
        try:
            result.append(fn())
        except BaseException as e:  # noqa: BLE001 - re-raised below
            error.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "iteration did not finish (hang)"
    if error:
        raise error[0]
    return result[0]


def test_repeat_n():
    out = values(nd.Dataset.range(3).repeat(3))
    assert out == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert all(isinstance(v, np.int64) for v in out)


def test_repeat_one_is_identity():
    assert values(nd.Dataset.range(4).repeat(1)) == [0, 1, 2, 3]


def test_repeat_one_draws_what_its_input_alone_draws():
    """Noop elimination drops repeat(1) from fused plans: random ops below it must draw
    the same with fusion on or off, and as without the repeat."""
    def plan(fusion):
        o = nd.Options()
        o.experimental_optimization.apply_default_optimizations = fusion
        o.fusion = fusion
        return nd.Dataset.range(10).shuffle(10, seed=1).repeat(1).with_options(o)
    alone = [int(x) for x in nd.Dataset.range(10).shuffle(10, seed=1)]
    assert [int(x) for x in plan(True)] == [int(x) for x in plan(False)] == alone
    two = [int(x) for x in nd.Dataset.range(10).shuffle(10, seed=1).repeat(2)]
    assert two[:10] != two[10:]     # a real repeat still draws anew per epoch


def test_repeat_zero_is_empty():
    assert values(nd.Dataset.range(4).repeat(0)) == []


@pytest.mark.parametrize("count", [None, -1])
def test_repeat_forever(count):
    ds = nd.Dataset.range(3).repeat() if count is None else nd.Dataset.range(3).repeat(count)
    assert values(ds.take(10)) == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]


def test_repeat_forever_explicit_none():
    assert values(nd.Dataset.range(2).repeat(None).take(5)) == [0, 1, 0, 1, 0]


def test_repeat_forever_via_iterator_prefix():
    it = iter(nd.Dataset.from_tensor_slices(np.array([1.5, 2.5])).repeat())
    got = [next(it) for _ in range(1001)]
    assert got[-1] == 1.5 and got[-2] == 2.5
    assert all(isinstance(v, np.float64) for v in got)


def test_repeat_forever_of_empty_terminates():
    # tf.data ends a forever-repeat whose input produced nothing in an epoch.
    assert run_with_timeout(lambda: values(nd.Dataset.range(0).repeat().take(5))) == []


def test_repeat_n_of_empty():
    assert values(nd.Dataset.range(0).repeat(5)) == []


def test_repeat_nested():
    assert values(nd.Dataset.range(2).repeat(2).repeat(3)) == [0, 1] * 6


def test_repeat_tuple_and_dict_elements():
    ds = nd.Dataset.from_tensor_slices((np.array([1, 2], np.int32), np.array([b"a", b"b"], dtype=object)))
    out = values(ds.repeat(2))
    assert out == [(1, b"a"), (2, b"b"), (1, b"a"), (2, b"b")]
    assert all(isinstance(a, np.int32) and type(b) is bytes for a, b in out)

    ds = nd.Dataset.from_tensor_slices({"k": np.arange(2)})
    assert values(ds.repeat(2)) == [{"k": 0}, {"k": 1}, {"k": 0}, {"k": 1}]


def test_repeat_array_elements():
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = values(nd.Dataset.from_tensor_slices(data).repeat(2))
    assert len(out) == 6
    for got, want in zip(out, list(data) * 2):
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_repeat_reinvokes_generator():
    calls = []

    def gen():
        calls.append(1)
        yield from range(3)

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=())
    assert values(ds.repeat(3)) == [0, 1, 2] * 3
    assert len(calls) == 3


def test_repeat_after_map_matches_reference():
    ds = nd.Dataset.range(5).map(lambda x: x * x).repeat(2)
    out = assert_reference_matches(ds)
    assert out == [0, 1, 4, 9, 16] * 2


def test_repeat_then_batch_crosses_epochs():
    out = values(nd.Dataset.range(3).repeat(2).batch(4))
    assert [list(b) for b in out] == [[0, 1, 2, 0], [1, 2]]


def test_batch_then_repeat():
    out = values(nd.Dataset.range(3).batch(2).repeat(2))
    assert [list(b) for b in out] == [[0, 1], [2], [0, 1], [2]]


def test_numpy_integer_count():
    assert values(nd.Dataset.range(2).repeat(np.int64(2))) == [0, 1, 0, 1]


def test_iterating_twice():
    ds = nd.Dataset.range(2).repeat(2)
    assert values(ds) == values(ds) == [0, 1, 0, 1]


# ---------------------------------------------------------------- cardinality

def test_cardinality():
    assert nd.Dataset.range(3).repeat(4).cardinality() == 12
    assert nd.Dataset.range(3).repeat(1).cardinality() == 3
    assert nd.Dataset.range(3).repeat(0).cardinality() == 0
    assert nd.Dataset.range(3).repeat().cardinality() == nd.INFINITE
    assert nd.Dataset.range(3).repeat(-1).cardinality() == nd.INFINITE
    assert nd.Dataset.range(3).repeat().repeat(2).cardinality() == nd.INFINITE


def test_cardinality_of_empty_forever_is_zero():
    assert nd.Dataset.range(0).repeat().cardinality() == 0
    assert nd.Dataset.range(0).repeat(7).cardinality() == 0


def test_cardinality_unknown_input():
    filtered = nd.Dataset.range(10).filter(lambda x: x > 3)
    assert filtered.repeat(2).cardinality() == nd.UNKNOWN
    assert filtered.repeat().cardinality() == nd.INFINITE
    assert filtered.repeat(0).cardinality() == 0


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("count", ["3", 2.5, [2]])
def test_bad_count_rejected(count):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(3).repeat(count)
