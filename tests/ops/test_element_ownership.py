"""What an element may share with what a pipeline keeps. tf.data's elements are
immutable tensors; nbdata's are NumPy arrays, so an in-place edit of one must not change
the user's array (or file), a cache, a scan's or reduce's initial state or the elements
a generator yielded before: such elements are read-only views (the edit raises), or
copies where the memory is the user's to reuse (a generator's buffer, a state a function
updates in place). Fresh arrays (a batch) stay writable."""

import numpy as np
import pytest

import nbdata as nd


def _values(ds):
    return [np.array(v, copy=True) for v in ds]


def _edit(v):
    v[...] = -7   # a user's in-place edit (x /= 255 is another)


def _epochs_after_edits(ds):
    """Epoch 1 (each element edited after it is read, where it can be) and epoch 2."""
    first, refused = [], 0
    for v in ds:
        first.append(np.array(v, copy=True))
        try:
            _edit(v)
        except ValueError:
            refused += 1
    return first, _values(ds), refused


def test_a_source_s_elements_are_read_only_views_of_the_user_s_array():
    x = np.arange(12.0).reshape(6, 2)
    kept = x.copy()
    for ds in (nd.Dataset.from_tensors(x).repeat(2), nd.Dataset.from_tensor_slices(x)):
        element = next(iter(ds))
        assert np.shares_memory(element, x) and not element.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            element += 1
        first, second, refused = _epochs_after_edits(ds)
        assert refused == len(first) > 0
        np.testing.assert_array_equal(np.stack(first), np.stack(second))
    np.testing.assert_array_equal(x, kept)
    x[0, 0] = 100   # zero-copy: the dataset reads the user's array as it is now
    assert float(next(iter(nd.Dataset.from_tensor_slices(x)))[0]) == 100
    assert x.flags.writeable   # the user's own array is untouched


def test_a_batch_is_a_fresh_writable_array():
    x = np.arange(12.0).reshape(6, 2)
    ds = nd.Dataset.from_tensor_slices(x).batch(4)
    batch = next(iter(ds))
    assert batch.flags.writeable and not np.shares_memory(batch, x)
    batch /= 2   # as NumPy code does
    np.testing.assert_array_equal(next(iter(ds)), x[:4])


def test_a_python_function_cannot_edit_the_user_s_array_through_its_argument():
    x = np.arange(6.0).reshape(3, 2)

    def bump(v):
        np.add(v, 1.0, out=v)   # an in-place edit of the element
        return v
    with pytest.raises(nd.errors.InvalidArgumentError, match="read-only"):
        list(nd.Dataset.from_tensor_slices(x).map(bump))
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize("after", ["map", "batch"])
def test_an_in_memory_cache_hands_out_read_only_rows(after):
    x = np.arange(24.0).reshape(12, 2)
    ds = nd.Dataset.from_tensor_slices(x)
    ds = (ds.map(lambda v: v * 2.0) if after == "map" else ds.batch(5)).cache()
    first, second, refused = _epochs_after_edits(ds)
    assert refused == len(first)   # epoch 1's elements are the cache's rows too
    np.testing.assert_array_equal(np.concatenate([np.ravel(v) for v in first]),
                                  np.concatenate([np.ravel(v) for v in second]))


def test_cached_ragged_and_sparse_rows_are_read_only_too():
    x = np.arange(12, dtype=np.int64)
    ragged = nd.Dataset.from_tensor_slices(x).map(lambda v: np.arange(v % 4)).ragged_batch(3)
    sparse = nd.Dataset.from_tensor_slices(x.reshape(6, 2)).sparse_batch(2, [2])
    for ds, part in ((ragged.cache(), "flat_values"), (sparse.cache(), "values")):
        for epoch in range(2):
            for element in ds:
                with pytest.raises(ValueError, match="read-only"):
                    getattr(element, part)[...] = -7


def test_rows_of_a_memory_map_cannot_write_to_the_user_s_file(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(12.0).reshape(6, 2))
    mapped = np.load(path, mmap_mode="r+")   # the user's map may write; the dataset's rows not
    row = next(iter(nd.Dataset.from_tensor_slices(mapped)))
    with pytest.raises(ValueError, match="read-only"):
        row[...] = -7
    del row, mapped
    np.testing.assert_array_equal(np.load(path), np.arange(12.0).reshape(6, 2))


def test_a_scan_or_reduce_may_update_its_state_in_place_but_not_the_initial_state():
    init = np.zeros(2)

    def running(s, x):
        s += np.float64(x)   # in place: the state is the function's, a copy per run
        return s, s.copy()
    ds = nd.Dataset.range(4).scan(init, running)
    first, second, _ = _epochs_after_edits(ds)
    assert [v.tolist() for v in first] == [v.tolist() for v in second] == \
        [[0.0, 0.0], [1.0, 1.0], [3.0, 3.0], [6.0, 6.0]]
    total = lambda s, x: s.__iadd__(np.float64(x))   # noqa: E731
    assert nd.Dataset.range(4).reduce(init, total).tolist() == [6.0, 6.0]
    assert nd.Dataset.range(4).reduce(init, total).tolist() == [6.0, 6.0]
    empty = nd.Dataset.range(0).reduce(init, total)
    assert not np.shares_memory(empty, init)
    assert init.tolist() == [0.0, 0.0]
    # the first element a scan hands out is its run's copy: an edit changes no epoch
    ds = nd.Dataset.range(4).scan(init, lambda s, x: (s + np.float64(x), s))
    first, second, _ = _epochs_after_edits(ds)
    assert [v.tolist() for v in first] == [v.tolist() for v in second] == \
        [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [3.0, 3.0]]
    assert init.tolist() == [0.0, 0.0]


def _reusing_generator():
    buf = np.zeros(2)
    for i in range(6):
        buf[:] = i   # one buffer, filled again for each element
        yield buf


@pytest.mark.parametrize("tail", ["none", "batch", "shuffle", "prefetch", "map"])
def test_a_generator_that_reuses_its_buffer_gives_each_element_as_yielded(tail):
    ds = nd.Dataset.from_generator(_reusing_generator,
                                   output_signature=nd.TensorSpec((2,), np.float64))
    ds = {"none": ds, "batch": ds.batch(3).unbatch(), "shuffle": ds.shuffle(6, seed=1),
          "prefetch": ds.prefetch(3), "map": ds.map(lambda v: v + 0.0)}[tail]
    got = sorted(float(v[0]) for v in ds) if tail == "shuffle" else [float(v[0]) for v in ds]
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_scan_that_updates_its_state_in_place_and_returns_it_gives_each_output():
    def running(s, x):
        s += x       # in place, and the state is the output too
        return s, s
    ds = nd.Dataset.range(4).scan(np.zeros(2, np.int64), running)
    assert [v.tolist() for v in ds] == [[0, 0], [1, 1], [3, 3], [6, 6]]
    assert [b.tolist() for b in ds.batch(4)] == [[[0, 0], [1, 1], [3, 3], [6, 6]]]


def test_arrays_handed_over_are_taken_when_handed_over():
    """tf.data and TF1 convert a value to a tensor when it is handed over (a copy): the
    user may change or refill their array afterwards."""
    import nbdata.compat.v1 as tf
    args = np.array([1, 2, 3])
    ds = nd.Dataset.from_generator(lambda a: iter(a.tolist()), args=(args,),
                                   output_signature=nd.TensorSpec((), np.int64))
    args[:] = 9   # before the dataset is iterated
    assert [int(v) for v in ds] == [1, 2, 3]

    values = np.arange(3)
    const = tf.constant(values)
    values[:] = 9
    assert tf.Session().run(const).tolist() == [0, 1, 2]

    x = nd.placeholder(np.int64, [None])
    it = nd.Dataset.from_tensor_slices(x).make_initializable_iterator()
    buf = np.arange(4)
    it.initializer.run({x: buf})
    buf[:] = 50   # refilled before the iterator is read
    assert [int(v) for v in it] == [0, 1, 2, 3]


def test_a_py_func_that_refills_one_buffer():
    import nbdata.compat.v1 as tf
    buf = np.zeros(2, np.int64)

    def fill(v):
        buf[:] = v
        return buf
    ds = tf.data.Dataset.range(4).map(lambda v: tf.py_func(fill, [v], tf.int64)).batch(4)
    assert [b.tolist() for b in ds] == [[[0, 0], [1, 1], [2, 2], [3, 3]]]
    p = nd.placeholder(np.int64, [])
    y = nd.train.py_func(fill, [p], np.int64)
    with tf.Session() as session:
        a, b = session.run(y, {p: 1}), session.run(y, {p: 2})
    assert a.tolist() == [1, 1] and b.tolist() == [2, 2]


def test_a_stateful_py_func_in_a_graph_mode_dataset_function():
    import nbdata.compat.v1 as tf
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(4).map(
            lambda x: tf.py_func(lambda v: (v * 2).astype(np.int64), [x], tf.int64))
        nxt = ds.make_one_shot_iterator().get_next()
        with tf.Session() as session:
            assert [int(session.run(nxt)) for _ in range(4)] == [0, 2, 4, 6]
