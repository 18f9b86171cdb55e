"""Random access through repeat, concatenate and cache (``nd.experimental.at`` and
``global_shuffle``), as TensorFlow's own kernel tests of those ops define it."""

import numpy as np
import pytest

import nbdata as nd

at = nd.experimental.at
gshuffle = nd.experimental.global_shuffle


def values(ds):
    return [int(x) for x in ds]


def test_at_of_repeat_zero_is_out_of_range():
    with pytest.raises(nd.errors.OutOfRangeError):
        at(nd.Dataset.range(5).repeat(0), 0)


@pytest.mark.parametrize("elements,count", [(0, 3), (5, 3), (10, 8)])
def test_at_through_finite_repeat(elements, count):
    ds = nd.Dataset.range(elements).repeat(count)
    expected = np.tile(np.arange(elements), count)
    assert [int(at(ds, i)) for i in range(len(expected))] == expected.tolist()
    for index in (-1, len(expected)):
        with pytest.raises(nd.errors.OutOfRangeError):
            at(ds, index)


def test_at_through_nested_repeats():
    ds = nd.Dataset.range(3).repeat(2).repeat(4)
    assert [int(at(ds, i)) for i in range(24)] == [0, 1, 2] * 8


@pytest.mark.parametrize("count", [None, -1, -2])
def test_at_of_an_infinite_repeat_is_a_failed_precondition(count):
    with pytest.raises(nd.errors.FailedPreconditionError):
        at(nd.Dataset.range(3).repeat(count), 0)


def test_at_through_concatenate_and_take_skip():
    ds = nd.Dataset.from_tensor_slices([0, 1, 2]).concatenate(nd.Dataset.from_tensor_slices([3, 4]))
    assert [int(at(ds, i)) for i in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(nd.errors.OutOfRangeError):
        at(ds, 5)
    assert [int(at(nd.Dataset.range(10).take(4), i)) for i in range(4)] == [0, 1, 2, 3]
    assert [int(at(nd.Dataset.range(10).skip(7), i)) for i in range(3)] == [7, 8, 9]
    with pytest.raises(nd.errors.OutOfRangeError):
        at(nd.Dataset.range(4).skip(5), 0)


def test_at_of_a_cache_over_a_filter_iterates_to_the_index():
    ds = nd.Dataset.range(20).filter(lambda x: x % 2 == 0).cache()
    assert [int(at(ds, i)) for i in range(10)] == list(range(0, 20, 2))
    with pytest.raises(nd.errors.OutOfRangeError):
        at(ds, 10)
    endless = nd.Dataset.range(20).filter(lambda x: x % 2 == 0).repeat(-1).cache()
    assert int(at(endless, 11)) == 2
    with pytest.raises(nd.errors.FailedPreconditionError):
        at(nd.Dataset.range(20).filter(lambda x: x % 2 == 0), 0)


@pytest.mark.parametrize("reshuffle", [True, False])
def test_global_shuffle_over_repeat(reshuffle):
    ds = nd.Dataset.range(41).repeat(27).prefetch(nd.AUTOTUNE)
    out = values(gshuffle(ds, seed=19, reshuffle_each_iteration=reshuffle))
    assert sorted(out) == sorted(list(range(41)) * 27)
    assert out != list(range(41)) * 27
    parts = [out[i:i + 41] for i in range(0, len(out), 41)]
    assert all(p != list(range(41)) for p in parts)
    assert all(a != b for a, b in zip(parts, parts[1:]))


@pytest.mark.parametrize("count", [None, 0])
def test_global_shuffle_refuses_repeat_forever_or_zero_times(count):
    with pytest.raises(nd.errors.FailedPreconditionError,
                       match=r"`repeat.*` does not support random access"):
        gshuffle(nd.Dataset.range(10).repeat(count).prefetch(nd.AUTOTUNE))


def test_global_shuffle_refuses_a_filter_as_tf_does():
    with pytest.raises(nd.errors.FailedPreconditionError,
                       match="requires all upstream transformations be compatible with random access"):
        gshuffle(nd.Dataset.range(100).filter(lambda x: x % 2 == 0))


def test_global_shuffle_over_concatenate_then_batch_keeps_batches_whole():
    ds = nd.Dataset.range(0, 5).concatenate(nd.Dataset.range(5, 17))
    out = values(gshuffle(ds, seed=3))
    assert sorted(out) == list(range(17)) and out != list(range(17))
    batched = nd.Dataset.range(0, 4).concatenate(nd.Dataset.range(4, 10)).batch(3, drop_remainder=True)
    got = [b.tolist() for b in gshuffle(batched, seed=5)]
    assert sorted(got) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


@pytest.mark.parametrize("reshuffle", [True, False])
def test_global_shuffle_over_cache_repeat_take_skip(reshuffle):
    for ds, expected in (
            (nd.Dataset.range(10).cache().prefetch(nd.AUTOTUNE).repeat(2), list(range(10)) * 2),
            (nd.Dataset.range(100).take(200).repeat(2), list(range(100)) * 2),
            (nd.Dataset.range(100).take(20).repeat(2), list(range(20)) * 2),
            (nd.Dataset.range(10).skip(2).repeat(2), list(range(2, 10)) * 2)):
        shuffled = gshuffle(ds, seed=42, reshuffle_each_iteration=reshuffle)
        first, second = values(shuffled), values(shuffled)
        assert sorted(first) == sorted(expected) and first != expected
        assert len(first) == shuffled.cardinality() == len(expected)
        assert (first == second) == (not reshuffle)


def test_global_shuffle_over_repeat_resumes_from_a_saved_state():
    ds = gshuffle(nd.Dataset.range(41).repeat(3).prefetch(2), seed=42)
    pipe = ds.compile()
    it = iter(pipe)
    head = [int(next(it)) for _ in range(50)]
    state = it.save()
    rest = [int(x) for x in it]
    again = iter(pipe)
    again.restore(state)
    assert [int(x) for x in again] == rest
    assert sorted(head + rest) == sorted(list(range(41)) * 3)

