"""A map written with TF1's names (``import nbdata.compat.v1 as tf``) fuses exactly as
its NumPy twin: ``tf.cast`` records NumPy's ``astype`` (the op table's cast entry)
where TF's cast and NumPy's agree, so both compile to the same fused kernel."""

import re

import numpy as np

import nbdata as nd
import nbdata.compat.v1 as tf


def _kernel(fn, data):
    options = nd.Options()
    options.fusion_min_rows = 0
    pipe = nd.Dataset.from_tensor_slices(data).map(fn).with_options(options).compile()
    text = str(pipe.explain())
    assert "fused_stage[" in text and "per element" not in text, text
    source = text.split("generated source:")[1].split("==")[0]
    return re.sub(r"\bfn\d+\b", "fn", source), list(pipe)


def test_a_tf1_name_map_and_its_numpy_twin_compile_to_the_same_kernel():
    data = np.arange(64 * 12, dtype=np.uint8).reshape(64, 12)
    tf_src, tf_out = _kernel(lambda x: tf.reshape(tf.cast(x, tf.float32) / 255.0, [2, 2, 3]), data)
    np_src, np_out = _kernel(lambda x: (x.astype(np.float32) / 255.0).reshape(2, 2, 3), data)
    assert tf_src == np_src
    for a, b in zip(tf_out, np_out):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_cast_keeps_tf_semantics_where_numpy_differs():
    # float -> uint8 out of range: TF truncates, then wraps through int64
    with tf.Graph().as_default():   # on values in graph mode: a constant tensor
        c = tf.cast(np.array([300.7, -1.5], np.float32), tf.uint8)
        assert tf.Session().run(c).tolist() == [44, 255]
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2])
        y = tf.cast(x, tf.uint8)
        assert tf.Session().run(y, feed_dict={x: [300.7, -1.5]}).tolist() == [44, 255]


def test_tf1_preprocessing_ops_fuse():
    data = np.arange(64 * 12, dtype=np.uint8).reshape(64, 12)

    def preprocess(x):
        x = tf.concat([tf.stack([x[:6], x[6:]], axis=0), tf.reshape(x, [2, 6])], 0)[1:3]
        x = tf.transpose(tf.reshape(x, [3, 2, 2]), [1, 2, 0])
        x = tf.divide(tf.cast(x, tf.float32), 255.0)
        return tf.expand_dims(tf.clip_by_value(x * 2.0 - 0.5, 0.0, 1.0), 0)

    _, fused = _kernel(preprocess, data)
    want = [np.clip(((np.concatenate([np.stack([d[:6], d[6:]]), d.reshape(2, 6)])[1:3]
                      .reshape(3, 2, 2).transpose(1, 2, 0).astype(np.float32) / np.float32(255))
                     * np.float32(2) - np.float32(0.5)), 0, 1)[None] for d in data]
    for a, b in zip(fused, want):
        np.testing.assert_array_equal(a, b)
