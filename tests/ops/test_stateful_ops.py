"""take_while, scan, unique, group_by_window, group_by_reducer,
bucket_by_sequence_length, rebatch, rejection_resample, sparse_batch (tf.data's
semantics; values recorded from TensorFlow's documented behaviour)."""

import numpy as np
import pytest

import nbdata as nd


def ints(ds):
    return [int(x) for x in ds]


def test_take_while():
    assert ints(nd.Dataset.range(10).take_while(lambda x: x < 4)) == [0, 1, 2, 3]
    assert ints(nd.Dataset.range(10).apply(nd.experimental.take_while(lambda x: x > 4))) == []
    # the predicate is not called past the first False
    seen = []
    ds = nd.Dataset.range(10).map(lambda x: seen.append(int(x)) or x).take_while(lambda x: x < 2)
    del seen[:]
    assert ints(ds) == [0, 1] and max(seen) <= 2
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(3).take_while(lambda x: x * 2)
    assert nd.Dataset.range(5).take_while(lambda x: x < 2).cardinality() == nd.UNKNOWN


def test_take_while_infinite_input():
    assert ints(nd.Dataset.range(3).repeat().take_while(lambda x: x < 2)) == [0, 1]


def test_scan():
    assert ints(nd.Dataset.range(5).scan(0, lambda s, x: (s + x, s + x))) == [0, 1, 3, 6, 10]
    # tuple state and element, output structure of its own
    ds = nd.Dataset.from_tensor_slices((np.arange(4), np.arange(4) * 10)).apply(
        nd.experimental.scan((np.int64(0), np.int64(1)),
                             lambda s, e: ((s[0] + e[0], s[1] * 2), {"a": s[0], "b": e[1]})))
    out = list(ds)
    assert [int(e["a"]) for e in out] == [0, 0, 1, 3] and [int(e["b"]) for e in out] == [0, 10, 20, 30]
    assert ds.cardinality() == 4


def test_scan_state_shape_may_change():
    ds = nd.Dataset.range(3).scan(np.zeros(0, np.int64),
                                  lambda s, x: (np.append(s, x), np.int64(len(s))))
    assert ints(ds) == [0, 1, 2]


def test_scan_errors():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).scan(np.int64(0), lambda s, x: (s + 0.5, x))
    with pytest.raises(TypeError):
        nd.Dataset.range(3).scan(np.int64(0), lambda s, x: x)
    with pytest.raises(TypeError):
        nd.Dataset.range(3).scan((np.int64(0), np.int64(0)), lambda s, x: (s[0], x))


def test_unique():
    assert ints(nd.Dataset.from_list([1, 3, 1, 2, 3, 2, 5]).unique()) == [1, 3, 2, 5]
    ds = nd.Dataset.from_list(["b", "a", "b", "c"]).apply(nd.experimental.unique())
    assert list(ds) == [b"b", b"a", b"c"]
    i32 = nd.Dataset.range(6).map(lambda x: (x % 2).astype(np.int32)).unique()
    assert [int(x) for x in i32] == [0, 1]
    with pytest.raises(TypeError):
        nd.Dataset.from_list([1.0, 2.0]).unique()
    with pytest.raises(TypeError):
        nd.Dataset.zip((nd.Dataset.range(2), nd.Dataset.range(2))).unique()


def test_group_by_window():
    ds = nd.Dataset.range(10).group_by_window(lambda x: x % 2, lambda k, w: w.batch(3),
                                              window_size=3)
    assert [b.tolist() for b in ds] == [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
    # window_size_func and keys flushed in ascending order at the end
    ds = nd.Dataset.from_list([5, 3, 7, 1, 8]).apply(nd.experimental.group_by_window(
        lambda x: x % 3, lambda k, w: w.batch(10), window_size_func=lambda k: k + 2))
    assert [b.tolist() for b in ds] == [[3], [7, 1], [5, 8]]
    with pytest.raises(ValueError):
        nd.Dataset.range(3).group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError):
        nd.Dataset.range(3).group_by_window(lambda x: x.astype(np.float32), lambda k, w: w, 2)
    # an int32 (or Python int) key is converted to int64
    ds = nd.Dataset.range(4).group_by_window(lambda x: (x % 2).astype(np.int32),
                                             lambda k, w: w.batch(2), 2)
    assert [b.tolist() for b in ds] == [[0, 2], [1, 3]]
    with pytest.raises(nd.errors.InvalidArgumentError, match="greater than zero, but got 0"):
        list(nd.Dataset.range(4).group_by_window(lambda _: 0, lambda _, xs: xs, 0))
    # windows go out as soon as they are full (an endless input)
    src = nd.Dataset.from_tensor_slices(np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0]))
    ds = src.repeat().group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(4), 4)
    it = iter(ds)
    assert [next(it).tolist() for _ in range(4)] == [[0] * 4, [1] * 4, [2] * 4, [0] * 4]


def test_group_by_window_bad_size():
    ds = nd.Dataset.range(3).group_by_window(lambda x: x, lambda k, w: w.batch(2),
                                             window_size_func=lambda k: k - 5)
    with pytest.raises(nd.errors.InvalidArgumentError, match="greater than zero"):
        list(ds)


def test_group_by_reducer():
    r = nd.experimental.Reducer(lambda k: np.int64(0), lambda s, x: s + x, lambda s: s * 10)
    assert ints(nd.Dataset.range(6).apply(nd.experimental.group_by_reducer(lambda x: x % 2, r))) == [60, 90]
    # tuple state
    r2 = nd.experimental.Reducer(lambda k: (np.int64(0), np.int64(0)),
                                 lambda s, x: (s[0] + 1, s[1] + x), lambda c, t: t // c)
    assert ints(nd.Dataset.range(7).group_by_reducer(lambda x: x % 3, r2)) == [3, 2, 3]


def test_bucket_by_sequence_length():
    ds = nd.Dataset.from_list([[1], [2, 2], [3], [4, 4], [5, 5, 5]]).apply(
        nd.experimental.bucket_by_sequence_length(lambda x: np.int64(len(x)), [2], [2, 2]))
    assert [b.tolist() for b in ds] == [[[1], [3]], [[2, 2], [4, 4]], [[5, 5, 5]]]
    with pytest.raises(ValueError):
        nd.Dataset.range(3).bucket_by_sequence_length(lambda x: x, [2], [1])


def test_bucket_pad_to_boundary_and_no_padding():
    src = nd.Dataset.from_list([[1], [2, 2], [3, 3, 3]])
    ds = src.bucket_by_sequence_length(lambda x: np.int64(len(x)), [3, 5], [2, 2, 2],
                                       pad_to_bucket_boundary=True)
    assert [b.tolist() for b in ds] == [[[1, 0], [2, 2]], [[3, 3, 3, 0]]]
    same = nd.Dataset.from_list([[1, 1], [2, 2], [3, 3]]).bucket_by_sequence_length(
        lambda x: np.int64(len(x)), [5], [2, 2], no_padding=True)
    assert [b.tolist() for b in same] == [[[1, 1], [2, 2]], [[3, 3]]]


def test_rebatch():
    assert [b.tolist() for b in nd.Dataset.range(7).batch(4).rebatch([2, 1])] == \
        [[0, 1], [2], [3, 4], [5], [6]]
    ds = nd.Dataset.range(8).batch(4).apply(nd.experimental.rebatch(3, drop_remainder=True))
    assert [b.tolist() for b in ds] == [[0, 1, 2], [3, 4, 5]]
    assert ds.element_spec.shape == (3,)
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(4).batch(2).rebatch([0, 0])
    full = nd.Dataset.range(8).batch(4, drop_remainder=True)
    assert full.rebatch([2, 2]).element_spec.shape == (2,)
    assert nd.Dataset.range(10).batch(5, drop_remainder=True).rebatch(2).element_spec.shape == (None,)
    assert [b.tolist() for b in nd.Dataset.range(12).batch(4).rebatch([6])] == \
        [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]


def test_rebatch_empty_splits():
    full = nd.Dataset.range(4).batch(2, drop_remainder=True)
    assert [b.tolist() for b in full.rebatch([1, 1, 0])] == [[0], [1], [], [2], [3], []]
    assert [b.tolist() for b in full.rebatch([0, 1])] == [[], [0], [], [1], [], [2], [], [3], []]
    assert [b.tolist() for b in full.rebatch([1, 0], drop_remainder=True)] == \
        [[0], [], [1], [], [2], [], [3], []]


def test_rejection_resample():
    target = [0.5, 0.5]
    ds = nd.Dataset.range(4000).rejection_resample(lambda x: x % 4 // 3, target,
                                                   initial_dist=[0.75, 0.25], seed=3)
    classes = [int(c) for c, _ in ds]
    share = sum(classes) / len(classes)
    assert 0.4 < share < 0.6
    again = nd.Dataset.range(4000).rejection_resample(lambda x: x % 4 // 3, target,
                                                      initial_dist=[0.75, 0.25], seed=3)
    assert [int(c) for c, _ in again] == classes


def test_sparse_batch():
    ds = nd.Dataset.from_list([[1], [2, 3], [4, 5, 6]]).apply(
        nd.experimental.dense_to_sparse_batch(2, [3]))
    a, b = list(ds)
    assert a.indices.tolist() == [[0, 0], [1, 0], [1, 1]] and a.values.tolist() == [1, 2, 3]
    assert a.dense_shape.tolist() == [2, 3] and b.dense_shape.tolist() == [1, 3]
    with pytest.raises(nd.errors.DataLossError):     # TF 2.21's error class for it
        list(nd.Dataset.from_list([[1, 2, 3, 4]]).sparse_batch(1, [2]))
    # an unknown dim is the batch's largest (checked against TF 2.21)
    grown = nd.Dataset.range(1, 5).map(lambda n: np.full(int(n), n)).sparse_batch(2, [None])
    assert [(s.values.tolist(), s.dense_shape.tolist()) for s in grown] == \
        [([1, 2, 2], [2, 2]), ([3, 3, 3, 4, 4, 4, 4], [2, 4])]


def test_counter_and_random():
    assert ints(nd.experimental.Counter(2, -1).take(3)) == [2, 1, 0]
    c = nd.Dataset.counter(dtype=np.int32)
    assert c.element_spec.dtype == np.int32 and c.cardinality() == nd.INFINITE
    r = nd.experimental.RandomDataset(seed=1)
    a = ints(r.take(5))
    assert a == ints(r.take(5)) and len(set(a)) == 5 and min(a) >= 0
    assert r.cardinality() == nd.INFINITE
    re = nd.Dataset.random(seed=1, rerandomize_each_iteration=True).take(5)
    assert ints(re) != ints(re)


def test_get_single_element():
    assert int(nd.Dataset.range(1).get_single_element()) == 0
    assert int(nd.experimental.get_single_element(nd.Dataset.range(5, 6))) == 5
    with pytest.raises(nd.errors.InvalidArgumentError, match="empty"):
        nd.Dataset.range(0).get_single_element()
    with pytest.raises(nd.errors.InvalidArgumentError, match="more than one"):
        nd.Dataset.range(2).get_single_element()


def test_ragged_batch():
    ds = nd.Dataset.from_list([[1], [2, 3], [4, 5, 6]]).ragged_batch(2)
    assert isinstance(ds.element_spec, nd.RaggedTensorSpec)
    assert ds.element_spec.ragged_rank == 1 and ds.element_spec.shape == (None, None)
    a, b = list(ds)
    assert a.to_list() == [[1], [2, 3]] and a.row_splits.tolist() == [0, 1, 3]
    assert b.to_list() == [[4, 5, 6]] and a.to_tensor().tolist() == [[1, 0], [2, 3]]
    # a known trailing dim stays uniform, dense components batch densely
    mixed = nd.Dataset.range(1, 4).map(lambda n: (np.ones((n, 2), np.int32) * n, n))
    r, n = next(iter(mixed.apply(nd.experimental.dense_to_ragged_batch(3))))
    assert r.shape == (3, None, 2) and r.to_list()[1] == [[2, 2], [2, 2]] and n.tolist() == [1, 2, 3]
    # dims up to the last unknown one are ragged
    inner = nd.Dataset.range(1, 3).map(lambda n: np.ones((2, n))).ragged_batch(2)
    (x,) = list(inner)
    assert x.ragged_rank == 2 and x.to_list() == [[[1.0], [1.0]], [[1.0, 1.0], [1.0, 1.0]]]
    assert [b.tolist() for b in nd.Dataset.range(3).ragged_batch(2)] == [[0, 1], [2]]


def test_ragged_batch_restores():
    def make():
        return nd.Dataset.from_list([np.full(i % 3, i) for i in range(9)]).ragged_batch(2)
    full = [b.to_list() for b in make()]
    it = iter(make())
    head = [next(it).to_list() for _ in range(2)]
    again = iter(make())
    again.restore(it.save())
    assert head + [b.to_list() for b in again] == full
