"""A memory cache is complete once it holds as many elements as its input's known
cardinality, even if the iteration never reached the end (tf.data's rule); with an
unknown cardinality it still waits for the end."""
import nbdata as nd


def first(it, k):
    return [int(next(it)) for _ in range(k)]


def test_reading_every_element_without_the_end_fills_the_cache():
    ds = nd.Dataset.range(10).shuffle(10, reshuffle_each_iteration=True).cache()
    assert ds.cardinality() == 10
    order = first(iter(ds), 10)      # no StopIteration asked for
    assert sorted(order) == list(range(10))
    assert first(iter(ds), 10) == order
    assert [int(x) for x in ds] == order


def test_a_cache_of_unknown_cardinality_needs_the_end():
    calls = []

    def gen():
        calls.append(1)
        yield from range(4)

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((), "int64")).cache()
    assert ds.cardinality() == nd.UNKNOWN
    assert first(iter(ds), 4) == [0, 1, 2, 3]
    assert [int(x) for x in ds] == [0, 1, 2, 3]     # the first iteration did not finish
    assert len(calls) == 2
    assert [int(x) for x in ds] == [0, 1, 2, 3]     # the second did: read from the cache
    assert len(calls) == 2


def test_a_completed_cache_saves_and_restores_mid_iteration():
    ds = nd.Dataset.range(6).shuffle(6, seed=3).cache()
    it = iter(ds)
    order = first(it, 6)
    it = iter(ds)
    first(it, 2)
    state = it.save()
    again = iter(ds)
    again.restore(state)
    assert [int(x) for x in again] == order[2:]
