"""Tests for iteration: for-loops, as_numpy_iterator, and the four TF1 iterator kinds
(one-shot, initializable, reinitializable, feedable), end-of-sequence and errors."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import Boom, fusing, reference


def drain(it, n):
    return [it.get_next() for _ in range(n)]


def assert_exhausted(it, times=3):
    for _ in range(times):
        with pytest.raises(nd.errors.OutOfRangeError):
            it.get_next()


# ---------------------------------------------------------------- errors module

def test_error_hierarchy():
    e = nd.errors
    assert issubclass(e.OutOfRangeError, e.OpError)
    assert issubclass(e.FailedPreconditionError, e.OpError)
    assert issubclass(e.InvalidArgumentError, e.OpError)
    assert issubclass(e.InvalidArgumentError, ValueError)
    assert issubclass(e.NotFoundError, FileNotFoundError)
    assert issubclass(e.UnimplementedError, NotImplementedError)


# ---------------------------------------------------------------- for-loops and numpy iterator

def test_for_loop():
    out = [x for x in nd.Dataset.range(4)]
    assert out == [0, 1, 2, 3]
    assert all(isinstance(x, np.int64) for x in out)


def test_for_loop_twice_restarts():
    ds = nd.Dataset.range(3).map(lambda x: x * 2)
    assert [int(x) for x in ds] == [int(x) for x in ds] == [0, 2, 4]


def test_iter_returns_iterator():
    it = iter(nd.Dataset.range(2))
    assert isinstance(it, nd.Iterator)
    assert iter(it) is it
    assert it.get_next() == 0
    assert next(it) == 1
    with pytest.raises(StopIteration):
        next(it)


def test_next_raises_stop_iteration_repeatedly():
    it = iter(nd.Dataset.range(1))
    assert next(it) == 0
    for _ in range(3):
        with pytest.raises(StopIteration):
            next(it)


def test_get_next_raises_out_of_range_repeatedly():
    it = iter(nd.Dataset.range(2))
    assert drain(it, 2) == [0, 1]
    assert_exhausted(it)


def test_out_of_range_is_op_error_with_message():
    it = iter(nd.Dataset.range(0))
    with pytest.raises(nd.errors.OpError) as info:
        it.get_next()
    assert isinstance(info.value, nd.errors.OutOfRangeError)
    assert isinstance(info.value.message, str)


def test_as_numpy_iterator_structures():
    Pair = collections.namedtuple("Pair", "a b")
    ds = nd.Dataset.from_tensor_slices({
        "p": Pair(np.arange(2, dtype=np.int32), np.array([b"x", b"y"], dtype=object)),
        "v": np.ones((2, 3), np.float32),
    })
    it = ds.as_numpy_iterator()
    first = next(it)
    assert set(first) == {"p", "v"}
    assert isinstance(first["p"], Pair)
    assert isinstance(first["p"].a, np.int32) and first["p"].a == 0
    assert type(first["p"].b) is bytes and first["p"].b == b"x"
    assert isinstance(first["v"], np.ndarray) and first["v"].dtype == np.float32 and first["v"].shape == (3,)
    rest = list(it)
    assert len(rest) == 1 and rest[0]["p"].b == b"y"


def test_as_numpy_iterator_doc_examples():
    assert list(nd.Dataset.from_tensor_slices([1, 2, 3]).as_numpy_iterator()) == [1, 2, 3]
    ds = nd.Dataset.from_tensor_slices({"a": ([1, 2], [3, 4]), "b": [5, 6]})
    assert list(ds.as_numpy_iterator()) == [{"a": (1, 3), "b": 5}, {"a": (2, 4), "b": 6}]


def test_compiled_pipeline_iterates_many_times():
    pipe = nd.Dataset.range(5).map(lambda x: x + 1).compile()
    assert [int(x) for x in pipe] == [1, 2, 3, 4, 5]
    assert [int(x) for x in pipe] == [1, 2, 3, 4, 5]
    assert isinstance(pipe.explain(), str)


# ---------------------------------------------------------------- one-shot

def test_one_shot_iterator():
    it = nd.Dataset.range(3).map(lambda x: x * 10).make_one_shot_iterator()
    assert isinstance(it, nd.Iterator)
    out = drain(it, 3)
    assert out == [0, 10, 20] and all(isinstance(v, np.int64) for v in out)
    assert_exhausted(it)


def test_one_shot_iterators_are_independent():
    ds = nd.Dataset.range(4)
    a, b = ds.make_one_shot_iterator(), ds.make_one_shot_iterator()
    assert a.get_next() == 0 and a.get_next() == 1
    assert b.get_next() == 0
    assert a.get_next() == 2


def test_one_shot_iterator_rejects_unbound_placeholder():
    n = nd.placeholder(np.int64, shape=[])
    with pytest.raises((nd.errors.OpError, ValueError, TypeError)):
        it = nd.Dataset.range(n).make_one_shot_iterator()
        it.get_next()


# ---------------------------------------------------------------- initializable

def test_initializable_without_placeholders():
    it = nd.Dataset.range(3).make_initializable_iterator()
    with pytest.raises(nd.errors.FailedPreconditionError):
        it.get_next()
    it.initialize()
    assert drain(it, 3) == [0, 1, 2]
    assert_exhausted(it)
    it.initializer.run()
    assert it.get_next() == 0


def test_initializable_with_placeholder_reinitialized():
    max_value = nd.placeholder(np.int64, shape=[])
    ds = nd.Dataset.range(max_value)
    it = ds.make_initializable_iterator()

    it.initialize(feed_dict={max_value: 10})
    out = drain(it, 10)
    assert out == list(range(10)) and all(isinstance(v, np.int64) for v in out)
    assert_exhausted(it)

    it.initialize(feed_dict={max_value: 100})
    assert drain(it, 100) == list(range(100))
    assert_exhausted(it)

    it.initializer.run(feed_dict={max_value: 2})
    assert drain(it, 2) == [0, 1]
    assert_exhausted(it)

    it.initialize(feed_dict={max_value: 0})
    assert_exhausted(it, times=1)


def test_reinitialize_mid_iteration_restarts():
    n = nd.placeholder(np.int64, shape=[])
    it = nd.Dataset.range(n).make_initializable_iterator()
    it.initialize(feed_dict={n: 5})
    assert drain(it, 2) == [0, 1]
    it.initialize(feed_dict={n: 3})
    assert drain(it, 3) == [0, 1, 2]
    assert_exhausted(it)


def test_placeholder_as_source_data():
    x = nd.placeholder(np.float32, shape=[None, 2])
    ds = nd.Dataset.from_tensor_slices(x).map(lambda r: r * 2)
    it = ds.make_initializable_iterator()

    it.initialize(feed_dict={x: np.arange(6, dtype=np.float32).reshape(3, 2)})
    rows = drain(it, 3)
    assert [r.tolist() for r in rows] == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    assert all(isinstance(r, np.ndarray) and r.dtype == np.float32 for r in rows)
    assert_exhausted(it)

    it.initialize(feed_dict={x: np.ones((1, 2), np.float32)})
    assert it.get_next().tolist() == [2.0, 2.0]
    assert_exhausted(it)


def test_placeholders_in_take_skip_batch():
    take_n = nd.placeholder(np.int64, shape=[])
    skip_n = nd.placeholder(np.int64, shape=[])
    bs = nd.placeholder(np.int64, shape=[])
    ds = nd.Dataset.range(20).skip(skip_n).take(take_n).batch(bs)
    it = ds.make_initializable_iterator()
    it.initialize(feed_dict={take_n: 5, skip_n: 2, bs: 2})
    assert [b.tolist() for b in drain(it, 3)] == [[2, 3], [4, 5], [6]]
    assert_exhausted(it)
    it.initialize(feed_dict={take_n: 3, skip_n: 10, bs: 3})
    assert it.get_next().tolist() == [10, 11, 12]
    assert_exhausted(it)


def test_placeholder_in_repeat_and_shuffle():
    count = nd.placeholder(np.int64, shape=[])
    buf = nd.placeholder(np.int64, shape=[])
    it = nd.Dataset.range(4).shuffle(buf, seed=1).repeat(count).make_initializable_iterator()
    it.initialize(feed_dict={count: 2, buf: 1})
    assert drain(it, 8) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert_exhausted(it)
    it.initialize(feed_dict={count: 1, buf: 4})
    assert sorted(drain(it, 4)) == [0, 1, 2, 3]
    assert_exhausted(it)


def test_get_next_before_initialize_fails():
    n = nd.placeholder(np.int64, shape=[])
    it = nd.Dataset.range(n).make_initializable_iterator()
    with pytest.raises(nd.errors.FailedPreconditionError):
        it.get_next()


def test_initialize_without_feeding_placeholder_fails_naming_it():
    n = nd.placeholder(np.int64, shape=[], name="max_value")
    it = nd.Dataset.range(n).make_initializable_iterator()
    with pytest.raises(nd.errors.FailedPreconditionError, match="max_value"):
        it.initialize()
    with pytest.raises(nd.errors.FailedPreconditionError):
        it.get_next()


def test_feed_with_wrong_shape_rejected():
    x = nd.placeholder(np.float32, shape=[None, 2])
    it = nd.Dataset.from_tensor_slices(x).make_initializable_iterator()
    with pytest.raises((ValueError, TypeError)):
        it.initialize(feed_dict={x: np.zeros((3, 5), np.float32)})


def test_placeholder_dataset_spec():
    x = nd.placeholder(np.float32, shape=[None, 2])
    assert nd.Dataset.from_tensor_slices(x).element_spec == nd.TensorSpec((2,), np.float32)
    assert nd.Dataset.from_tensors(x).element_spec == nd.TensorSpec((None, 2), np.float32)


# ---------------------------------------------------------------- reinitializable

def test_reinitializable_switches_datasets():
    training = nd.Dataset.range(100).map(lambda x: x + 1000)
    validation = nd.Dataset.range(50)
    it = nd.Iterator.from_structure(training.output_types, training.output_shapes)
    assert isinstance(it, nd.Iterator)
    training_init = it.make_initializer(training)
    validation_init = it.make_initializer(validation)

    with pytest.raises(nd.errors.FailedPreconditionError):
        it.get_next()

    for _ in range(2):
        training_init.run()
        assert drain(it, 100) == list(range(1000, 1100))
        assert_exhausted(it)
        validation_init.run()
        assert drain(it, 50) == list(range(50))
        assert_exhausted(it)


def test_reinitializable_initializer_restarts_mid_stream():
    a, b = nd.Dataset.range(10), nd.Dataset.range(20, 30)
    it = nd.Iterator.from_structure(a.output_types, a.output_shapes)
    init_a, init_b = it.make_initializer(a), it.make_initializer(b)
    init_a()
    assert drain(it, 3) == [0, 1, 2]
    init_b()
    assert it.get_next() == 20
    init_a.run()
    assert it.get_next() == 0


def test_reinitializable_nested_structure_and_partial_shapes():
    types = (np.int64, np.float32)
    shapes = ((), (None,))
    it = nd.Iterator.from_structure(types, shapes)
    d3 = nd.Dataset.from_tensor_slices((np.arange(2), np.ones((2, 3), np.float32)))
    d5 = nd.Dataset.from_tensor_slices((np.arange(2), np.zeros((2, 5), np.float32)))
    it.make_initializer(d3).run()
    i, v = it.get_next()
    assert isinstance(i, np.int64) and v.shape == (3,) and v.dtype == np.float32
    it.make_initializer(d5).run()
    i, v = it.get_next()
    assert v.shape == (5,)


def test_reinitializable_spec_properties():
    it = nd.Iterator.from_structure({"a": np.int64}, {"a": (2,)})
    assert it.output_types == {"a": np.dtype(np.int64)}
    assert it.output_shapes == {"a": (2,)}
    assert it.element_spec == {"a": nd.TensorSpec((2,), np.int64)}


@pytest.mark.parametrize("make", [
    lambda: nd.Dataset.range(3).map(lambda x: x * 1.5),                       # float64, not int64
    lambda: nd.Dataset.from_tensor_slices((np.arange(3), np.arange(3))),      # tuple, not scalar
    lambda: nd.Dataset.from_tensor_slices(np.zeros((3, 2), np.int64)),        # shape (2,), not ()
    lambda: nd.Dataset.from_tensor_slices(np.array([b"a"], dtype=object)),    # string
])
def test_reinitializable_rejects_incompatible_dataset(make):
    it = nd.Iterator.from_structure(np.int64, ())
    with pytest.raises((TypeError, ValueError), match="(?i)type|shape|structure|compatible"):
        it.make_initializer(make())


# ---------------------------------------------------------------- feedable

def test_feedable_switches_between_iterators_keeping_positions():
    training = nd.Dataset.range(100).repeat()
    validation = nd.Dataset.range(50, 60)
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, training.output_types, training.output_shapes)
    assert isinstance(it, nd.Iterator)

    train_it = training.make_one_shot_iterator()
    val_it = validation.make_initializable_iterator()
    th, vh = train_it.string_handle(), val_it.string_handle()
    assert isinstance(th, (bytes, str)) and th != vh

    assert [it.get_next(feed_dict={handle: th}) for _ in range(5)] == [0, 1, 2, 3, 4]
    val_it.initialize()
    assert [it.get_next(feed_dict={handle: vh}) for _ in range(3)] == [50, 51, 52]
    assert it.get_next(feed_dict={handle: th}) == 5
    assert it.get_next(feed_dict={handle: vh}) == 53
    # The underlying iterators share their position with the feedable one.
    assert train_it.get_next() == 6
    assert it.get_next(feed_dict={handle: th}) == 7
    assert val_it.get_next() == 54
    rest = [it.get_next(feed_dict={handle: vh}) for _ in range(5)]
    assert rest == [55, 56, 57, 58, 59]
    for _ in range(2):
        with pytest.raises(nd.errors.OutOfRangeError):
            it.get_next(feed_dict={handle: vh})
    # Re-initializing the validation iterator through its own initializer restarts it.
    val_it.initialize()
    assert it.get_next(feed_dict={handle: vh}) == 50
    assert it.get_next(feed_dict={handle: th}) == 8


def test_feedable_element_types():
    ds = nd.Dataset.from_tensor_slices((np.arange(3, dtype=np.int32), np.array([b"a", b"b", b"c"], dtype=object)))
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, ds.output_types, ds.output_shapes)
    src = ds.make_one_shot_iterator()
    i, s = it.get_next(feed_dict={handle: src.string_handle()})
    assert isinstance(i, np.int32) and i == 0 and type(s) is bytes and s == b"a"


def test_feedable_uninitialized_target_fails():
    ds = nd.Dataset.range(3)
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, ds.output_types, ds.output_shapes)
    target = ds.make_initializable_iterator()
    with pytest.raises(nd.errors.FailedPreconditionError):
        it.get_next(feed_dict={handle: target.string_handle()})


def test_feedable_without_feed_fails():
    ds = nd.Dataset.range(3)
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, ds.output_types, ds.output_shapes)
    with pytest.raises((nd.errors.OpError, ValueError, TypeError)):
        it.get_next()


def test_feedable_bogus_handle_fails():
    ds = nd.Dataset.range(3)
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, ds.output_types, ds.output_shapes)
    with pytest.raises((nd.errors.OpError, ValueError, TypeError, KeyError)):
        it.get_next(feed_dict={handle: b"no-such-iterator"})


def test_feedable_incompatible_handle_fails():
    ints = nd.Dataset.range(3)
    floats = nd.Dataset.from_tensor_slices(np.array([1.5, 2.5]))
    handle = nd.placeholder(nd.string, shape=[])
    it = nd.Iterator.from_string_handle(handle, ints.output_types, ints.output_shapes)
    h = floats.make_one_shot_iterator().string_handle()
    with pytest.raises((nd.errors.OpError, ValueError, TypeError)):
        it.get_next(feed_dict={handle: h})


# ---------------------------------------------------------------- errors inside the pipeline

def _fails_at_3(x):
    if x == 3:
        raise Boom("element three is bad")
    return x * 2


@pytest.mark.parametrize("fusion", [True, False])
def test_map_error_names_op_and_chains_cause(fusion):
    ds = nd.Dataset.range(6).map(_fails_at_3)
    ds = fusing(ds) if fusion else reference(ds)
    it = ds.make_one_shot_iterator()
    assert drain(it, 3) == [0, 2, 4]
    with pytest.raises(nd.errors.OpError) as info:
        it.get_next()
    err = info.value
    assert "map" in str(err)
    assert isinstance(err.__cause__, Boom)
    assert "element three is bad" in str(err.__cause__)
    # The iterator stays usable (next element) or ends cleanly; never wrong data.
    try:
        nxt = it.get_next()
    except nd.errors.OutOfRangeError:
        pass
    else:
        assert nxt == 8


def test_map_error_in_for_loop_and_numpy_iterator():
    ds = nd.Dataset.range(6).map(_fails_at_3)
    seen = []
    with pytest.raises(nd.errors.OpError) as info:
        for x in ds:
            seen.append(int(x))
    assert seen == [0, 2, 4]
    assert isinstance(info.value.__cause__, Boom)

    with pytest.raises(nd.errors.OpError) as info:
        list(ds.as_numpy_iterator())
    assert isinstance(info.value.__cause__, Boom)


def test_map_error_is_invalid_argument():
    with pytest.raises(nd.errors.InvalidArgumentError):
        list(nd.Dataset.range(6).map(_fails_at_3))


def test_python_error_in_python_only_map():
    table = {0: "a", 1: "b"}

    def lookup(x):
        return np.int64(len(table[int(x)]))  # KeyError for x == 2

    it = iter(nd.Dataset.range(3).map(lookup))
    assert it.get_next() == 1 and it.get_next() == 1
    with pytest.raises(nd.errors.OpError) as info:
        it.get_next()
    assert "map" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)
