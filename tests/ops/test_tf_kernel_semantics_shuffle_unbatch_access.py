"""Random access (``nd.experimental.at``) through ``shuffle`` and ``unbatch``, which
tf.data offers: a shuffle's position ``i`` is element ``i`` of the dataset's first
iteration, the same on every call; unbatch gives row ``i % b`` of batch ``i // b``
when the batch size ``b`` is static."""
import numpy as np
import pytest

import nbdata as nd

at = nd.experimental.at


def values(ds):
    return [int(x) for x in ds]


@pytest.mark.parametrize("buffer_size", [1, 3, 10, nd.UNKNOWN])
def test_shuffle_positions_are_the_first_iterations_elements(buffer_size):
    ds = nd.Dataset.from_tensor_slices(np.arange(1, 8)).shuffle(buffer_size, seed=2)
    first = values(ds)
    assert [int(at(ds, i)) for i in range(7)] == first
    if buffer_size == 1:
        assert first == list(range(1, 8))
    # later iterations reshuffle; random access keeps the first iteration's order
    values(ds)
    assert [int(at(ds, i)) for i in range(7)] == first


def test_shuffle_without_seed_is_one_order_across_calls():
    ds = nd.Dataset.range(50).shuffle(20)
    once = [int(at(ds, i)) for i in range(50)]
    assert sorted(once) == list(range(50)) and once != list(range(50))
    assert [int(at(ds, i)) for i in range(50)] == once


def test_shuffle_under_batch_and_repeat():
    ds = nd.Dataset.from_tensor_slices(np.arange(7)).shuffle(10, seed=5)
    order = values(ds)
    batches = ds.batch(2)
    assert [at(batches, i).tolist() for i in range(4)] == [order[0:2], order[2:4], order[4:6], order[6:]]
    twice = nd.Dataset.range(5).shuffle(5, seed=1).repeat(2)
    assert [int(at(twice, i)) for i in range(10)] == values(twice)   # each epoch its own order
    with pytest.raises(nd.errors.OutOfRangeError):
        at(ds, 7)
    with pytest.raises(nd.errors.OutOfRangeError):
        at(nd.Dataset.from_tensor_slices(np.zeros(0)).shuffle(4), 0)


def test_shuffle_of_an_input_without_random_access_is_refused():
    ds = nd.Dataset.range(10).filter(lambda x: x > 2).shuffle(4, seed=1)
    with pytest.raises(nd.errors.FailedPreconditionError, match="filter"):
        at(ds, 0)


def test_unbatch_of_static_batches():
    ds = nd.Dataset.range(10).batch(4, drop_remainder=True).unbatch()
    assert [int(at(ds, i)) for i in range(8)] == list(range(8))
    for index in (-1, 8):
        with pytest.raises(nd.errors.OutOfRangeError):
            at(ds, index)
    rows = nd.Dataset.from_tensor_slices(({"a": np.arange(12).reshape(6, 2)},
                                          np.array([b"x", b"yy", b"z", b"w", b"v", b"u"])))
    ds = rows.batch(3, drop_remainder=True).unbatch()
    element = at(ds, 4)
    assert element[0]["a"].tolist() == [8, 9] and element[1] == b"v"


def test_unbatch_of_batches_of_varying_size_is_refused():
    ds = nd.Dataset.range(10).batch(4).unbatch()
    with pytest.raises(nd.errors.FailedPreconditionError, match="unbatch of batches whose size"):
        at(ds, 0)
