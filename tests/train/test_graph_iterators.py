"""Dataset iterators in graph mode (TF1's tf.data iterators inside a graph): get_next()
gives tensors, initializers are operations fed through feed_dict, string handles switch
iterators, Saver saves the position; outside a graph iterators stay eager."""

import os

import numpy as np
import pytest

import nbdata as nd
from nbdata.train.iterators import GraphIterator


def test_one_shot_iterator_is_graph_tensors_inside_a_graph():
    with nd.Graph().as_default():
        it = nd.Dataset.range(3).make_one_shot_iterator()
        assert isinstance(it, GraphIterator)
        nxt = it.get_next()
        assert isinstance(nxt, nd.Tensor) and nxt.dtype == np.int64
        with nd.Session() as sess:
            assert [int(sess.run(nxt)) for _ in range(3)] == [0, 1, 2]
            for _ in range(2):
                with pytest.raises(nd.errors.OutOfRangeError):
                    sess.run(nxt)
        with nd.Session() as sess:   # each session has its own position
            assert int(sess.run(nxt)) == 0


def test_outside_a_graph_iterators_stay_eager():
    it = nd.Dataset.range(3).make_one_shot_iterator()
    assert not isinstance(it, GraphIterator) and int(it.get_next()) == 0
    with nd.Session():
        pass
    assert int(it.get_next()) == 1


def test_one_run_advances_once_however_many_tensors_it_fetches():
    with nd.Graph().as_default():
        ds = nd.Dataset.from_tensor_slices((np.arange(4), np.arange(4) * 10))
        a, b = ds.make_one_shot_iterator().get_next()
        total = np.add(a, b)   # a NumPy op on the element records a graph op
        assert isinstance(total, nd.Tensor)
        with nd.Session() as sess:
            assert [int(v) for v in sess.run([a, b, total])] == [0, 0, 0]
            assert int(sess.run(total)) == 11
            assert [int(v) for v in sess.run((b, a))] == [20, 2]


def test_initializable_iterator_feeds_placeholders_through_the_initializer():
    with nd.Graph().as_default():
        max_value = nd.placeholder(np.int64, shape=[])
        it = nd.Dataset.range(max_value).make_initializable_iterator()
        nxt = it.get_next()
        assert isinstance(it.initializer, nd.Operation)
        with nd.Session() as sess:
            with pytest.raises(nd.errors.FailedPreconditionError):
                sess.run(nxt)   # not initialized yet
            sess.run(it.initializer, feed_dict={max_value: 10})
            assert [int(sess.run(nxt)) for _ in range(10)] == list(range(10))
            with pytest.raises(nd.errors.OutOfRangeError):
                sess.run(nxt)
            sess.run(it.initializer, feed_dict={max_value: 3})
            assert [int(sess.run(nxt)) for _ in range(3)] == [0, 1, 2]


def test_slices_of_fed_arrays():
    with nd.Graph().as_default():
        features = nd.placeholder(np.float32, shape=[None, 2])
        labels = nd.placeholder(np.int64, shape=[None])
        it = nd.Dataset.from_tensor_slices((features, labels)).batch(2).make_initializable_iterator()
        x, y = it.get_next()
        with nd.Session() as sess:
            f = np.arange(6, dtype=np.float32).reshape(3, 2)
            sess.run(it.initializer, feed_dict={features: f, labels: [7, 8, 9]})
            bx, by = sess.run([x, y])
            np.testing.assert_array_equal(bx, f[:2])
            assert by.tolist() == [7, 8]


def test_reinitializable_iterator_switches_datasets():
    with nd.Graph().as_default():
        training = nd.Dataset.range(100).map(lambda x: x * 2)
        validation = nd.Dataset.range(50)
        it = nd.Iterator.from_structure(training.output_types, training.output_shapes)
        nxt = it.get_next()
        train_init, valid_init = it.make_initializer(training), it.make_initializer(validation)
        with nd.Session() as sess:
            for _ in range(2):
                sess.run(train_init)
                assert [int(sess.run(nxt)) for _ in range(3)] == [0, 2, 4]
                sess.run(valid_init)
                assert [int(sess.run(nxt)) for _ in range(2)] == [0, 1]
        with pytest.raises(ValueError, match="does not have an initializer"):
            it.initializer  # noqa: B018
        with pytest.raises(TypeError, match="output types"):
            it.make_initializer(nd.Dataset.range(3).map(lambda x: x * 0.5))


def test_feedable_iterator_switches_on_feed_dict_without_restarting():
    with nd.Graph().as_default():
        handle = nd.placeholder(nd.string, shape=[])
        training = nd.Dataset.range(10).repeat()
        validation = nd.Dataset.range(100, 103)
        it = nd.Iterator.from_string_handle(handle, training.output_types, training.output_shapes)
        nxt = it.get_next()
        train_it = training.make_one_shot_iterator()
        valid_it = validation.make_initializable_iterator()
        with nd.Session() as sess:
            th, vh = sess.run(train_it.string_handle()), sess.run(valid_it.string_handle())
            assert isinstance(th, bytes) and th != vh
            sess.run(valid_it.initializer)
            got = [int(sess.run(nxt, feed_dict={handle: h})) for h in (th, th, vh, th, vh)]
            assert got == [0, 1, 100, 2, 101]
            with pytest.raises(nd.errors.InvalidArgumentError, match="no iterator has the string handle"):
                sess.run(nxt, feed_dict={handle: b"nothing"})


def test_disable_eager_execution_makes_graph_iterators_everywhere():
    from nbdata.trace import graph
    graph.disable_eager_execution()
    try:
        assert not graph.executing_eagerly()
        it = nd.Dataset.range(2).make_one_shot_iterator()
        assert isinstance(it, GraphIterator)
        nxt = it.get_next()
        with nd.Session() as sess:
            assert [int(sess.run(nxt)) for _ in range(2)] == [0, 1]
    finally:
        graph.enable_eager_execution()
    assert graph.executing_eagerly()
    assert int(nd.Dataset.range(2).make_one_shot_iterator().get_next()) == 0


def test_saver_saves_and_restores_the_position_from_the_collection(tmp_path):
    path = str(tmp_path / "model.ckpt")
    with nd.Graph().as_default() as g:
        it = nd.Dataset.range(10).shuffle(10, seed=3).make_initializable_iterator()
        nxt = it.get_next()
        g.add_to_collection(nd.GraphKeys.SAVEABLE_OBJECTS, nd.make_saveable_from_iterator(it))
        saver = nd.train.Saver()
        with nd.Session() as sess:
            sess.run(it.initializer)
            first = [int(sess.run(nxt)) for _ in range(4)]
            assert saver.save(sess, path) == path and os.path.exists(path)
            rest = [int(sess.run(nxt)) for _ in range(6)]
        with nd.Session() as sess:
            with pytest.raises(nd.errors.FailedPreconditionError, match="not been initialized"):
                saver.restore(sess, path)   # as TF: initialize first
            sess.run(it.initializer)
            saver.restore(sess, path)
            assert [int(sess.run(nxt)) for _ in range(6)] == rest
        assert sorted(first + rest) == list(range(10))


def test_fetching_a_value_is_a_clear_type_error():
    with nd.Session() as sess:
        with pytest.raises(TypeError, match=r"Can not convert a int64 into a Tensor"):
            sess.run(np.int64(0))


def test_a_session_runs_the_initializer_of_an_eager_iterator():
    # An initializable iterator made outside a graph is eager; sess.run(it.initializer,
    # feed_dict=...) still starts it with its placeholders fed, as TF1 code does.
    n = nd.placeholder(np.int64, shape=[])
    it = nd.Dataset.range(n).make_initializable_iterator()
    with nd.Session() as sess:
        assert sess.run(it.initializer, feed_dict={n: 3}) is None
        assert [int(x) for x in it] == [0, 1, 2]
        assert sess.run([it.initializer, nd.constant(5)], feed_dict={n: 1})[1] == 5
        assert [int(x) for x in it] == [0]


def test_iterating_a_graph_iterator_in_python_says_how_to_fetch():
    with nd.Graph().as_default():
        it = nd.Dataset.range(2).make_one_shot_iterator()
        with pytest.raises(TypeError, match=r"graph-mode iterator.*sess.run\(iterator.get_next\(\)\)"):
            list(it)
