"""TF1 names of ``nbdata.compat.v1`` input programs use, against TensorFlow's
``tf.compat.v1``: each case of tests/data/make_tf_v1_names.py is evaluated with
``tf = nbdata.compat.v1`` in graph mode (fetched with ``Session.run``, as TF1 code
does) and inside a map function, and must give TensorFlow's dtype, shape and values
(exactly, except where noted) as recorded in tests/data/tf_v1_names.json; where
TensorFlow is importable, it is run live too and must give the recorded values."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import nbdata.compat.v1 as tf

DATA = Path(__file__).resolve().parent.parent / "data"
_spec = importlib.util.spec_from_file_location("make_tf_v1_names", DATA / "make_tf_v1_names.py")
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
RECORDED = json.loads((DATA / "tf_v1_names.json").read_text())["cases"]
LIVE = importlib.util.find_spec("tensorflow") is not None

# float32 reductions (the per-image mean and deviation) and the hue's HSV arithmetic
# differ from Eigen's in the last bits
CLOSE = {"per_image_standardization": 1e-5, "adjust_hue_f32": 1e-6}


def expected(name: str, src: str) -> dict:
    if LIVE:   # the live TensorFlow gives what was recorded
        live = GEN.tf_result(src)
        assert (live["dtype"], live["shape"]) == (RECORDED[name]["dtype"], RECORDED[name]["shape"])
        np.testing.assert_array_equal(np.asarray(live["value"]), np.asarray(RECORDED[name]["value"]))
    return RECORDED[name]


def _check(name: str, got, want: dict) -> None:
    got = GEN.encode(got)
    assert (got["dtype"], got["shape"]) == (want["dtype"], want["shape"]), (got, want)
    if name in CLOSE:
        np.testing.assert_allclose(np.asarray(got["value"], np.float64),
                                   np.asarray(want["value"], np.float64), atol=CLOSE[name])
    else:
        np.testing.assert_array_equal(np.asarray(got["value"]), np.asarray(want["value"]))


@pytest.mark.parametrize("name,src", GEN.CASES, ids=[c[0] for c in GEN.CASES])
def test_graph_mode_gives_tensorflow_values(name, src):
    with tf.Graph().as_default():
        out = eval(src, {"tf": tf, **GEN.inputs()})
        assert isinstance(out, tf.Tensor), type(out)   # graph mode: a tensor, as in TF1
        got = tf.Session().run(out)
    _check(name, got, expected(name, src))


@pytest.mark.parametrize("name,src", [c for c in GEN.CASES if "img" in c[1] and "boxes" not in c[1]],
                         ids=[c[0] for c in GEN.CASES if "img" in c[1] and "boxes" not in c[1]])
def test_inside_a_map_function(name, src):
    inputs = GEN.inputs()
    key = "imgf" if "imgf" in src else "img"
    ds = tf.data.Dataset.from_tensors(inputs[key]).map(
        lambda x: eval(src, {"tf": tf, **inputs, key: x}))
    got = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        _check(name, sess.run(got), expected(name, src))


def test_every_case_has_a_recording():
    assert sorted(RECORDED) == sorted(c[0] for c in GEN.CASES)


def test_random_image_ops_take_optional_seeds_and_draw_per_run():
    with tf.Graph().as_default():
        img = tf.placeholder(tf.float32, [8, 8, 3])
        ops = [tf.image.random_flip_left_right(img), tf.image.random_flip_up_down(img, seed=1),
               tf.image.random_brightness(img, 0.3), tf.image.random_contrast(img, 0.5, 1.5),
               tf.image.random_saturation(img, 0.5, 1.5, seed=2), tf.image.random_hue(img, 0.2),
               tf.random_crop(img, [4, 4, 3]), tf.image.random_crop(img, [5, 5, 3], seed=4)]
        x = np.random.RandomState(0).rand(8, 8, 3).astype(np.float32)
        with tf.Session() as sess:
            # 16 runs: an unseeded flip gives one result in all of them with
            # probability 2**-15 (with 8 runs, 1/128: a failure in CI)
            runs = [sess.run(ops, {img: x}) for _ in range(16)]
    for k in range(len(ops)):
        assert len({r[k].tobytes() for r in runs}) > 1, k   # drawn anew per run
    with pytest.raises(ValueError):
        tf.image.random_hue(x, 0.6)


def _seeded_draws():
    with tf.Graph().as_default():
        tf.set_random_seed(42)
        img = tf.placeholder(tf.float32, [8, 8, 3])
        ops = [tf.image.random_brightness(img, 0.3, seed=7), tf.random_uniform([3]),
               tf.image.random_crop(img, [4, 4, 3], seed=3)]
        x = np.random.RandomState(0).rand(8, 8, 3).astype(np.float32)
        with tf.Session() as sess:
            return [[v.tobytes() for v in sess.run(ops, {img: x})] for _ in range(3)]


def test_graph_and_op_seeds_make_programs_repeat():
    try:
        assert _seeded_draws() == _seeded_draws()
    finally:
        tf.set_random_seed(None)


def test_gfile_logging_summary_compat(tmp_path):
    d = str(tmp_path / "a" / "b")
    assert not tf.gfile.Exists(d)
    tf.gfile.MakeDirs(d)
    with tf.gfile.GFile(d + "/x.txt", "w") as f:
        f.write("hi")
    with tf.gfile.Open(d + "/x.txt", "rb") as f:
        assert f.read() == b"hi"
    assert tf.gfile.Glob(d + "/*.txt") == [d + "/x.txt"]
    assert tf.gfile.ListDirectory(d) == ["x.txt"] and tf.gfile.IsDirectory(d)
    tf.gfile.Copy(d + "/x.txt", d + "/y.txt")
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.gfile.Copy(d + "/x.txt", d + "/y.txt")
    with pytest.raises(tf.errors.NotFoundError):
        tf.gfile.GFile(d + "/missing")
    assert tf.io.gfile.exists(d + "/y.txt")
    tf.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert not tf.gfile.Exists(d)
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.logging.info("input pipeline ready")
    with tf.Graph().as_default():
        s = tf.summary.image("images", tf.zeros([1, 2, 2, 3]))
        assert isinstance(s, tf.Tensor) and tf.summary.merge_all() is not None
        with tf.Session() as sess:
            sess.run(s)
    tf.summary.FileWriter(str(tmp_path)).add_summary(b"")
    assert tf.compat.as_bytes("x") == b"x" and tf.compat.as_text(b"y") == "y"
    assert tf.compat.v1 is tf


def test_assert_and_control_dependencies():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.int32, [None])
        check = tf.Assert(tf.reduce_all(x > 0), [x])
        with tf.control_dependencies([check]):
            y = tf.identity(x)
        with tf.Session() as sess:
            assert sess.run(y, {x: [1, 2]}).tolist() == [1, 2]
            with pytest.raises(tf.errors.InvalidArgumentError, match="assertion failed"):
                sess.run(y, {x: [1, -2]})


def test_slice_of_a_short_record_builds_in_a_queue_graph(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(bytes(range(7)) * 2)
    with tf.Graph().as_default():
        q = tf.train.string_input_producer([str(path)], num_epochs=1, shuffle=False)
        _, value = tf.FixedLengthRecordReader(record_bytes=7).read(q)
        rb = tf.decode_raw(value, tf.uint8)
        body = tf.slice(rb, [1], [6])   # no sample probe: the record's size is the rule
        assert body.shape.as_list() == [6]
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            assert sess.run(body).tolist() == [1, 2, 3, 4, 5, 6]
            coord.request_stop()
            coord.join(threads)


def test_example_bytes_are_tensorflows_deterministic_serialization():
    # TF's default SerializeToString orders map entries by a hash seeded per process
    # (protobuf's upb), so its bytes vary from run to run; its deterministic=True bytes
    # (keys sorted) are fixed, and are nbdata's.
    ex = tf.train.Example(features=tf.train.Features(feature={
        k: tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
        for i, k in enumerate(["label", "image_raw", "height", "width", "depth"])}))
    ours = ex.SerializeToString()
    assert ours.index(b"depth") < ours.index(b"height") < ours.index(b"label")
    if importlib.util.find_spec("tensorflow") is not None:
        from tensorflow.core.example import example_pb2
        theirs = example_pb2.Example()
        for i, k in enumerate(["label", "image_raw", "height", "width", "depth"]):
            theirs.features.feature[k].int64_list.value.append(i)
        assert theirs.SerializeToString(deterministic=True) == ours
