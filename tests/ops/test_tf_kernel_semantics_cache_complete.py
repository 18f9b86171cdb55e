"""A memory cache is complete once it holds as many elements as its input's known
cardinality, even if the iteration never reached the end (tf.data's rule); with an
unknown cardinality it still waits for the end. A file cache's writer takes its lock
at the first element, not when the iterator is made."""
import pytest

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


def test_a_file_cache_writer_takes_its_lock_at_the_first_element(tmp_path):
    prefix = str(tmp_path / "cache")
    one = nd.Dataset.range(4).cache(prefix)
    two = nd.Dataset.range(4).cache(prefix)
    it1, it2 = iter(one), iter(two)            # making iterators takes no lock
    assert int(next(it1)) == 0
    with pytest.raises(nd.errors.AlreadyExistsError, match="another iterator is writing"):
        next(it2)
    assert [int(x) for x in it1] == [1, 2, 3]  # the writer goes on and completes the file
    assert [int(x) for x in it2] == [0, 1, 2, 3]   # now the file is there: it2 reads it


def test_an_iterator_made_before_the_file_was_written_reads_it(tmp_path):
    prefix = str(tmp_path / "cache")
    early = iter(nd.Dataset.range(3).map(lambda x: x * 10).cache(prefix))
    assert [int(x) for x in nd.Dataset.range(3).map(lambda x: x * 10).cache(prefix)] == [0, 10, 20]
    assert [int(x) for x in early] == [0, 10, 20]
    late = iter(nd.Dataset.range(3).map(lambda x: x * 10).cache(prefix))
    assert int(next(late)) == 0
    state = late.save()
    again = iter(nd.Dataset.range(3).map(lambda x: x * 10).cache(prefix))
    again.restore(state)
    assert [int(x) for x in again] == [10, 20]
