"""Counts TF accepts that earlier versions refused (issue 19): any negative count of
``take``/``skip``/``repeat`` means -1, and ``enumerate`` near the int64 maximum ends
where TF's does. Expected values were recorded with TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import nbdata as nd


def _values(ds):
    return [x.tolist() if isinstance(x, np.ndarray) else
            tuple(int(v) for v in x) if isinstance(x, tuple) else int(x) for x in ds]


@pytest.mark.parametrize("count", [-1, -5, -(2**40)])
def test_take_with_any_negative_count_takes_everything(count):
    ds = nd.Dataset.range(5).take(count)
    assert _values(ds) == [0, 1, 2, 3, 4]
    # TF's TakeDataset gives min(n, count): -5 for range(5).take(-5), -1 for -1.
    assert ds.cardinality() == (5 if count == -1 else count)


def test_take_negative_count_fuses_and_batches():
    ds = nd.Dataset.range(10).map(lambda x: x * 2).take(-7).batch(4)
    assert _values(ds) == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]


@pytest.mark.parametrize("count", [-1, -5])
def test_skip_with_any_negative_count_skips_everything(count):
    ds = nd.Dataset.range(5).skip(count)
    assert _values(ds) == []
    assert ds.cardinality() == 0
    assert _values(nd.Dataset.range(5).map(lambda x: x + 1).skip(count)) == []


@pytest.mark.parametrize("count", [-1, -3])
def test_repeat_with_any_negative_count_repeats_forever(count):
    ds = nd.Dataset.range(5).repeat(count)
    assert ds.cardinality() == -1   # INFINITE_CARDINALITY
    assert _values(ds.take(12)) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert nd.Dataset.range(0).repeat(count).cardinality() == 0
    assert _values(nd.Dataset.range(0).repeat(count)) == []


def test_negative_counts_from_placeholders():
    n = nd.placeholder(np.int64, shape=[])
    it = nd.Dataset.range(4).take(n).make_initializable_iterator()
    it.initializer.run(feed_dict={n: -3})
    assert [int(it.get_next()) for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(nd.errors.OutOfRangeError):
        it.get_next()
    it = nd.Dataset.range(4).skip(n).make_initializable_iterator()
    it.initializer.run(feed_dict={n: -3})
    with pytest.raises(nd.errors.OutOfRangeError):
        it.get_next()


def test_enumerate_near_the_int64_maximum_ends_like_tf():
    """TF's enumerate zips with range(start, 2**63 - 1): two elements, then the end."""
    ds = nd.Dataset.range(5).enumerate(start=2**63 - 3)
    assert _values(ds) == [(2**63 - 3, 0), (2**63 - 2, 1)]
    assert ds.cardinality() == 2
    fused = nd.Dataset.range(5).map(lambda x: x + 1).enumerate(start=2**63 - 3).batch(8)
    batches = list(fused)
    assert len(batches) == 1 and batches[0][0].tolist() == [2**63 - 3, 2**63 - 2]
    assert batches[0][1].tolist() == [1, 2]


def test_enumerate_negative_start_and_out_of_range_start():
    assert _values(nd.Dataset.range(3).enumerate(start=-2)) == [(-2, 0), (-1, 1), (0, 2)]
    with pytest.raises(nd.errors.InvalidArgumentError, match="int64"):
        nd.Dataset.range(3).enumerate(start=2**63)
