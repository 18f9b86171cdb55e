"""Every ``nd.image`` entry of the op table, through each interpreter of it: eagerly
against TensorFlow (where installed; adjust_hue also against recorded values), inside
one fused map (no Python call), in a TF1 graph of ``nbdata.compat.v1``, and, where the
entry has a GPU rule, as its ``nd.gpu`` batch form on the CUDA simulator.

A new image primitive is one entry (``nbdata/primitives/image/``) plus its row in
``ROWS``: the first test fails until the row is there. The decoders (``nd.io``) have
their own files (tests/test_image_crop_decode.py, tests/io, tests/gpu/test_gpu_jpeg.py).
"""

import json
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
import nbdata.compat.v1 as tf1
from nbdata.primitives.table import entries

S = (7, 1)   # the seed of the random ops; the GPU's element j draws at (7, 1 + j)
BOXES = np.array([[[0.1, 0.2, 0.8, 0.9]]], np.float32)
IMAGES = np.random.default_rng(0).integers(0, 256, (2, 6, 5, 3), dtype=np.uint8)
HW = np.array([[6, 5, 3]] * 2, np.int32)

# name: (the arguments after the image, or a function of (image, its [H, W, C]) for an
# entry that takes no image; TensorFlow's call on the image or None)
ROWS = {
    "adjust_brightness": ((0.2,), lambda tf, x: tf.image.adjust_brightness(x, 0.2)),
    "adjust_contrast": ((1.5,), lambda tf, x: tf.image.adjust_contrast(x, 1.5)),
    "adjust_saturation": ((0.6,), lambda tf, x: tf.image.adjust_saturation(x, 0.6)),
    "adjust_hue": ((0.3,), lambda tf, x: tf.image.adjust_hue(x, 0.3)),
    "rgb_to_grayscale": ((), lambda tf, x: tf.image.rgb_to_grayscale(x)),
    "flip_left_right": ((), lambda tf, x: tf.image.flip_left_right(x)),
    "transpose": (((1, 0, 2),), lambda tf, x: tf.transpose(x, (1, 0, 2))),
    "hwc_to_chw": ((), lambda tf, x: tf.transpose(x, (2, 0, 1))),
    "cast": ((np.float32,), lambda tf, x: tf.cast(x, tf.float32)),
    "normalize": ((127.5, 64.0), lambda tf, x: (tf.cast(x, tf.float32) - 127.5) / 64.0),
    "resize": (((4, 7),), lambda tf, x: tf.image.resize(x, (4, 7))),
    "random_crop": (((4, 3, 3), S), None),
    "random_flip_left_right": ((S,), None),
    "flip_up_down": ((), lambda tf, x: tf.image.flip_up_down(x)),
    "random_flip_up_down": ((S,), None),
    "random_brightness": ((0.3, S), None),
    "random_contrast": ((0.5, 1.5, S), None),
    "random_saturation": ((0.5, 1.5, S), None),
    "random_hue": ((0.2, S), None),
    "random_resized_crop": (((4, 4), (0.08, 1.0), (0.75, 4 / 3), S), None),
    "random_resized_crop_window": (lambda x, hw: nd.image.random_resized_crop_window(
        hw[0], hw[1], seed=S), None),
    "sample_distorted_bounding_box": (lambda x, hw: nd.image.sample_distorted_bounding_box(
        hw, BOXES, seed=S), None),
}


def call(name: str, x, hw, j: int = 0):
    """The row's call on image ``x`` (its seed's counter moved on by ``j``)."""
    args, _ = ROWS[name]
    if callable(args):
        return args(x, hw)
    return getattr(nd.image, name)(x, *((S[0], S[1] + j) if a is S else a for a in args))


def leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_same(got, want, what):
    assert len(leaves(got)) == len(leaves(want)), what
    for g, w in zip(leaves(got), leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), what
        np.testing.assert_array_equal(g, w, err_msg=what)


def test_every_image_entry_has_a_row():
    image_ops = {p.name for p in entries() if "image" in p.tags and "io" not in p.tags}
    assert sorted(ROWS) == sorted(image_ops)


def test_eager_values_are_tensorflows():
    tf = pytest.importorskip("tensorflow")
    for name, (_, tf_call) in ROWS.items():
        if tf_call is not None:
            assert_same(call(name, IMAGES[0], HW[0]), tf_call(tf, IMAGES[0]).numpy(), name)


def test_adjust_hue_gives_the_recorded_tensorflow_values():
    data = Path(__file__).parent / "data"
    recorded = json.loads((data / "tf_v1_names.json").read_text())["cases"]
    rs = np.random.RandomState(0)   # tests/data/make_tf_v1_names.py's inputs
    img = rs.randint(0, 256, (7, 9, 3)).astype(np.uint8)
    imgf = rs.rand(7, 9, 3).astype(np.float32)
    for key, got in (("adjust_hue_f32", nd.image.adjust_hue(imgf, 0.3)),
                     ("adjust_hue_u8", nd.image.adjust_hue(img, -0.45))):
        want = recorded[key]
        assert (got.dtype.name, list(got.shape)) == (want["dtype"], want["shape"])
        np.testing.assert_array_equal(got, np.asarray(want["value"], got.dtype), err_msg=key)


FAMILIES = sorted({p.impl.__module__ for p in entries() if p.name in ROWS})


@pytest.mark.parametrize("family", FAMILIES, ids=[f.rsplit(".", 1)[-1] for f in FAMILIES])
def test_every_entry_fuses_into_a_map_and_gives_the_eager_values(family):
    """One map per file of entries (one kernel to compile each)."""
    names = [p.name for p in entries() if p.name in ROWS and p.impl.__module__ == family]
    options = nd.Options()
    options.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices((IMAGES, HW)).map(
        lambda x, hw: tuple(call(name, x, hw) for name in names))
    pipe = ds.with_options(options).compile()
    text = pipe.explain()
    assert pipe.fused_stages() and "in Python" not in text, text
    rows = list(pipe)
    assert pipe.stats().fallback_rows == 0
    for x, hw, row in zip(IMAGES, HW, rows):
        for name, got in zip(names, row):
            assert_same(got, call(name, x, hw), name)


def test_every_entry_records_in_a_tf1_graph():
    with tf1.Graph().as_default():
        x = tf1.placeholder(tf1.uint8, [6, 5, 3])
        hw = tf1.placeholder(tf1.int32, [3])
        fetches = {name: call(name, x, hw) for name in ROWS}
        assert all(isinstance(t, tf1.Tensor) for t in leaves(list(fetches.values())))
        with tf1.Session() as sess:
            got = sess.run(fetches, {x: IMAGES[1], hw: HW[1]})
    for name in ROWS:
        assert_same(got[name], call(name, IMAGES[1], HW[1]), name)


@pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")
def test_gpu_batch_forms_equal_the_cpu_entries():
    batch = nd.gpu.DeviceArray.from_host(IMAGES)
    with_gpu = [p.name for p in entries() if p.name in ROWS and p.gpu is not None and not p.device]
    assert "adjust_hue" in with_gpu and "random_hue" in with_gpu
    for name in with_gpu:
        got = getattr(nd.gpu, name)(batch, *ROWS[name][0]).copy_to_host()
        want = np.stack([call(name, x, hw, j) for j, (x, hw) in enumerate(zip(IMAGES, HW))])
        if want.dtype == np.float32:   # a GPU may contract a multiply-add (gpu.py)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            assert_same(got, want, name)
