"""``import nbdata.compat.v1 as tf``: graph mode by default for its datasets, TF1's names,
and a clear AttributeError for model-building names; nd's own datasets stay eager."""

import numpy as np
import pytest

import nbdata as nd
import nbdata.compat.v1 as tf
from nbdata.train.iterators import GraphIterator


def test_the_namespace_holds_what_input_code_uses():
    for name in ["Session", "InteractiveSession", "placeholder", "constant", "Graph", "train",
                 "errors", "GraphKeys", "add_to_collection", "global_variables_initializer",
                 "local_variables_initializer", "initialize_all_variables", "int32", "float32",
                 "string", "io", "image", "decode_csv", "decode_raw", "parse_single_example",
                 "py_func", "add", "cast", "reshape", "stack", "concat", "one_hot",
                 "random_uniform", "random_shuffle", "string_split", "TextLineReader",
                 "TFRecordReader", "FixedLengthRecordReader"]:
        assert getattr(tf, name) is not None, name
    for name in ["Dataset", "Iterator", "TFRecordDataset", "TextLineDataset",
                 "FixedLengthRecordDataset"]:
        assert getattr(tf.data, name) is not None, name
    assert tf.data.experimental.make_saveable_from_iterator is nd.make_saveable_from_iterator
    assert tf.contrib.data.make_saveable_from_iterator is nd.make_saveable_from_iterator


def test_its_datasets_make_graph_iterators_without_a_graph_block():
    ds = tf.data.Dataset.range(6).map(lambda x: x * 2).filter(lambda x: x > 2).batch(2)
    assert isinstance(ds, tf.data.Dataset)   # transformations stay in the namespace
    it = ds.make_one_shot_iterator()
    assert isinstance(it, GraphIterator)
    nxt = it.get_next()
    with tf.Session() as sess:
        assert [sess.run(nxt).tolist() for _ in range(2)] == [[4, 6], [8, 10]]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
    # nbdata's own datasets keep eager iterators outside a graph
    assert int(nd.Dataset.range(3).make_one_shot_iterator().get_next()) == 0


def test_file_datasets_of_the_namespace(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(3):
            w.write(b"r%d" % i)
    ds = tf.data.TFRecordDataset([path]).repeat(2)
    assert isinstance(ds, tf.data.Dataset)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert [sess.run(nxt) for _ in range(6)] == [b"r0", b"r1", b"r2"] * 2


def test_interactive_session_and_eval():
    nxt = tf.data.Dataset.from_tensor_slices(np.array([1.5, 2.5])).make_one_shot_iterator().get_next()
    sess = tf.InteractiveSession()
    try:
        assert float(nxt.eval()) == 1.5 and float(nxt.eval()) == 2.5
    finally:
        sess.close()


@pytest.mark.parametrize("name", ["layers", "nn", "keras", "estimator", "get_variable"])
def test_model_names_say_nbdata_is_the_input_pipeline(name):
    with pytest.raises(AttributeError, match=rf"{name}.*input pipeline"):
        getattr(tf, name)
    with pytest.raises(AttributeError, match="input pipeline"):
        tf.train.AdamOptimizer  # noqa: B018


def test_the_namespace_starts_in_graph_mode_so_random_ops_draw_per_run():
    # Only the import changed: a random op with constant arguments combined with an
    # iterator's tensor draws anew at every Session.run, as in TF1.
    assert tf.executing_eagerly() is False
    r = tf.random_uniform([])
    assert isinstance(r, tf.Tensor)
    nxt = tf.data.Dataset.range(3).make_one_shot_iterator().get_next()
    y = tf.cast(nxt, tf.float32) + r
    with tf.Session() as sess:
        draws = [float(sess.run(y)) - k for k in range(3)]
        assert len({round(d, 6) for d in draws}) == 3
    # nd itself stays eager
    from nbdata.trace.graph import executing_eagerly
    assert executing_eagerly() is True
    with tf.name_scope(None, "input", [nxt]) as scope:
        assert scope.endswith("input/")


def test_readme_feedable_block_runs_as_written():
    # The handle of a temporary one-shot iterator stays valid: the graph holds it.
    training = tf.data.Dataset.range(100).map(lambda x: x + tf.random_uniform([], -10, 10, tf.int64))
    handle = tf.placeholder(tf.string, shape=[])
    feedable = tf.data.Iterator.from_string_handle(handle, training.output_types,
                                                   training.output_shapes)
    import gc
    with tf.Session() as sess:
        h = sess.run(training.repeat().make_one_shot_iterator().string_handle())
        gc.collect()
        xs = [int(sess.run(feedable.get_next(), feed_dict={handle: h})) for _ in range(3)]
    assert all(k - 10 <= x < k + 10 for k, x in enumerate(xs))


def test_map_functions_are_traced_once_with_tensor_methods_and_constants():
    seen = []

    def parse(x):
        x.set_shape([2])                       # Tensor methods TF1 code calls in a map
        seen.append((x.get_shape().as_list(), x.shape.as_list()))
        return tf.cast(x, tf.float32) * 2.0, tf.constant(3)   # a constant returned

    data = np.arange(8, dtype=np.uint8).reshape(4, 2)
    nxt = tf.data.Dataset.from_tensor_slices(data).map(parse).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        outs = [sess.run(nxt) for _ in range(4)]
    assert seen == [([2], [2])]                # traced once, as TF1 does
    assert [o[0].tolist() for o in outs] == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0], [12.0, 14.0]]
    assert all(int(o[1]) == 3 for o in outs)


def test_random_op_in_a_map_function_draws_per_element():
    ds = tf.data.Dataset.range(50).map(lambda x: tf.random_uniform([], 0, 1000, tf.int64))
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert len({int(sess.run(nxt)) for _ in range(50)}) > 10


def test_graph_constants_feed_dataset_sources():
    paths = tf.constant(["a", "b"])
    nxt = tf.data.Dataset.from_tensor_slices((paths, tf.constant([1, 2]))).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert [sess.run(nxt) for _ in range(2)] == [(b"a", 1), (b"b", 2)]


def test_py_func_on_constants_runs_per_session_run_in_graph_mode():
    r = tf.py_func(lambda: np.random.rand(), [], tf.float64)
    assert isinstance(r, tf.Tensor)
    with tf.Session() as sess:
        assert sess.run(r) != sess.run(r)
