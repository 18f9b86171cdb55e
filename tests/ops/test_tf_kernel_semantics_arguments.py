"""Arguments and specs as TensorFlow's kernel tests use them: map's threading flags,
shuffle's unknown-cardinality buffer, and elements of unknown rank."""

import collections

import numpy as np
import pytest

import nbdata as nd


def test_map_accepts_tf_threading_flags_without_changing_values():
    for flags in ({"use_unbounded_threadpool": True}, {"use_unbounded_threadpool": False},
                  {"synchronous": True}, {"num_parallel_calls": 2, "synchronous": False,
                                          "use_unbounded_threadpool": True}):
        ds = nd.Dataset.range(7).map(lambda x: x * x, **flags)
        assert [int(v) for v in ds] == [i * i for i in range(7)]
    with pytest.raises(TypeError):
        nd.Dataset.range(3).map(lambda x: x, use_unbounded_threadpool="yes")


def test_shuffle_with_the_unknown_sentinel_buffers_the_whole_dataset():
    ds = nd.Dataset.from_tensor_slices([0, 1, 2, 3, 4]).shuffle(nd.UNKNOWN).repeat()
    it = iter(ds)
    epochs = [[int(next(it)) for _ in range(5)] for _ in range(10)]
    assert all(sorted(e) == [0, 1, 2, 3, 4] for e in epochs)
    counts = collections.Counter(v for e in epochs for v in e)
    assert all(counts[i] == 10 for i in range(5))
    # A whole-dataset buffer draws like shuffle(cardinality).
    full = [int(x) for x in nd.Dataset.range(50).shuffle(nd.UNKNOWN, seed=3)]
    assert full == [int(x) for x in nd.Dataset.range(50).shuffle(50, seed=3)]
    assert sorted(full) == list(range(50)) and full != list(range(50))


def test_shuffle_with_the_unknown_sentinel_over_an_unknown_length_counts_it():
    ds = nd.Dataset.range(30).filter(lambda x: x % 3 != 0).shuffle(nd.UNKNOWN, seed=4)
    out = [int(x) for x in ds]
    assert sorted(out) == [x for x in range(30) if x % 3] and out != sorted(out)
    pipe = ds.compile()
    it = iter(pipe)
    head = [int(next(it)) for _ in range(5)]
    state = it.save()
    rest = [int(x) for x in it]
    again = iter(pipe)
    again.restore(state)
    assert [int(x) for x in again] == rest and sorted(head + rest) == sorted(out)
    assert list(nd.Dataset.range(5).filter(lambda x: x < 0).shuffle(nd.UNKNOWN)) == []
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(5).repeat().shuffle(nd.UNKNOWN)


def test_shuffle_refuses_other_negative_buffer_sizes():
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(3).shuffle(-1)
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(3).shuffle(0)


def _ints(n):
    def gen():
        for i in range(n):
            yield i
    return gen


def test_generator_without_shapes_has_unknown_rank_through_map():
    ds = nd.Dataset.from_generator(_ints(4), output_types=np.int64)
    assert ds.element_spec.shape is None
    mapped = ds.map(lambda x: x * 10)
    assert mapped.element_spec.shape is None
    assert mapped.element_spec.dtype == np.int64
    assert [int(x) for x in mapped] == [0, 10, 20, 30]

    def ragged():
        for i in range(4):
            yield np.arange(i)

    out = nd.Dataset.from_generator(ragged, output_types=np.int64).map(lambda x: x + 1)
    assert [x.tolist() for x in out] == [[], [1], [1, 2], [1, 2, 3]]


def test_unknown_rank_survives_tuples_and_batches():
    ds = nd.Dataset.from_generator(_ints(5), output_types=np.int64).map(lambda x: (x, x * 2))
    assert [s.shape for s in ds.element_spec] == [None, None]
    batches = [(a.tolist(), b.tolist()) for a, b in ds.batch(2)]
    assert batches == [([0, 1], [0, 2]), ([2, 3], [4, 6]), ([4], [8])]


def test_tf1_legacy_function_variants_are_map_and_filter():
    ds = nd.Dataset.range(10).map(lambda x: {"foo": x * 2, "bar": x ** 2})
    kept = ds.filter_with_legacy_function(lambda d: d["bar"] % 2 == 0)
    out = kept.map_with_legacy_function(lambda d: d["foo"] + d["bar"], num_parallel_calls=2)
    assert [int(x) for x in out] == [i * 2 + i ** 2 for i in range(10) if not (i ** 2) % 2]
