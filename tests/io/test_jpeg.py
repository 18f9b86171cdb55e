"""decode_jpeg / encode_jpeg: TensorFlow's shapes, values and errors; batches decoded by
threads; the call inside map lifted into a record kernel with the same results as the
reference path; a clear error without the [image] extra."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError, UnimplementedError

DATA = Path(__file__).resolve().parent.parent / "data"

pytest.importorskip("simplejpeg")


def _image(h, w, c=3, seed=0):
    """A smooth image with noise (compresses like a photo)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 255 / max(w - 1, 1) * 0.6 + y * 255 / max(h - 1, 1) * 0.4)[..., None]
    noise = rng.normal(0, 12, (h, w, c))
    return np.clip(base + noise + np.arange(c) * 20, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def color():
    return nd.image.encode_jpeg(_image(37, 53), quality=90)


@pytest.fixture(scope="module")
def gray():
    return nd.image.encode_jpeg(_image(20, 30, 1), quality=90)


def test_decode_round_trip_is_close_and_shaped(color, gray):
    out = nd.image.decode_jpeg(color)
    assert out.shape == (37, 53, 3) and out.dtype == np.uint8
    assert np.abs(out.astype(int) - _image(37, 53)).mean() < 12
    assert nd.image.decode_jpeg(gray).shape == (20, 30, 1)          # channels=0: as stored
    assert nd.image.decode_jpeg(gray, channels=3).shape == (20, 30, 3)
    assert nd.image.decode_jpeg(color, channels=1).shape == (37, 53, 1)
    g3 = nd.image.decode_jpeg(gray, channels=3)
    assert np.array_equal(g3[..., 0], g3[..., 2])                   # gray replicated
    assert nd.io.decode_jpeg is nd.image.decode_jpeg


@pytest.mark.parametrize("ratio", [1, 2, 4, 8])
def test_ratio_rounds_each_side_up(color, ratio):
    out = nd.image.decode_jpeg(color, ratio=ratio)
    assert out.shape == (math.ceil(37 / ratio), math.ceil(53 / ratio), 3)


def test_options_change_pixels_as_named(color):
    fast = nd.image.decode_jpeg(color)
    assert np.array_equal(fast, nd.image.decode_jpeg(color, dct_method="INTEGER_FAST"))
    accurate = nd.image.decode_jpeg(color, dct_method="INTEGER_ACCURATE")
    assert accurate.shape == fast.shape and not np.array_equal(accurate, fast)
    plain = nd.image.decode_jpeg(color, fancy_upscaling=False)
    assert not np.array_equal(plain, fast)


@pytest.mark.parametrize("kwargs, message", [
    ({"channels": 2}, "`channels` must be 0, 1, 3 or 4 but got 2"),
    ({"channels": 4}, "JPEG does not support 4 channels"),
    ({"ratio": 3}, "ratio must be 1, 2, 4, or 8, got 3"),
    ({"dct_method": "FOO"}, "dct_method must be one of"),
    ({"acceptable_fraction": 2}, "acceptable_fraction must be in [0, 1]"),
])
def test_bad_arguments_are_tf_errors(color, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
        nd.image.decode_jpeg(color, **kwargs)


def test_bad_data_errors(color):
    with pytest.raises(InvalidArgumentError, match="Input is empty"):
        nd.image.decode_jpeg(b"")
    with pytest.raises(InvalidArgumentError, match="Unknown image file format"):
        nd.image.decode_jpeg(b"not a jpeg at all")
    with pytest.raises(InvalidArgumentError, match="Invalid JPEG data"):
        nd.image.decode_jpeg(color[: len(color) // 2])
    with pytest.raises(TypeError, match="bytes or a string"):
        nd.image.decode_jpeg([color, 3])


def test_truncated_image_recovers_when_asked(color):
    cut = color[: len(color) * 2 // 3]
    out = nd.image.decode_jpeg(cut, try_recover_truncated=True, acceptable_fraction=0.5)
    full = nd.image.decode_jpeg(color)
    assert out.shape == full.shape
    assert np.array_equal(out[:8], full[:8])     # the rows the data held


def test_batch_decodes_in_threads_and_names_the_bad_image(color):
    many = [color] * 9
    out = nd.image.decode_jpeg(many)
    assert out.shape == (9, 37, 53, 3)
    assert all(np.array_equal(out[i], out[0]) for i in range(9))
    assert np.array_equal(nd.image.decode_jpeg(np.array(many, dtype=object)), out)
    bad = list(many)
    bad[6] = b"\xff\xd8garbage"
    with pytest.raises(InvalidArgumentError, match=r"image 6 of the batch"):
        nd.image.decode_jpeg(bad)
    other = nd.image.encode_jpeg(_image(10, 12))
    with pytest.raises(InvalidArgumentError, match=r"image 2 is 10x12x3, image 0 is 37x53x3"):
        nd.image.decode_jpeg([color, color, other])
    with pytest.raises(InvalidArgumentError, match="must be one image or a vector"):
        nd.image.decode_jpeg(np.array([[color]], dtype=object))


def test_encode_jpeg_checks_its_input():
    with pytest.raises(InvalidArgumentError, match="3-D uint8"):
        nd.image.encode_jpeg(np.zeros((4, 4), np.uint8))
    with pytest.raises(InvalidArgumentError, match="quality"):
        nd.image.encode_jpeg(np.zeros((4, 4, 3), np.uint8), quality=101)
    with pytest.raises(InvalidArgumentError, match="does not match"):
        nd.image.encode_jpeg(np.zeros((4, 4, 3), np.uint8), format="grayscale")


def _images(n=11):
    sizes = [(37, 53), (24, 24), (37, 53)]
    return [nd.image.encode_jpeg(_image(*sizes[i % 3], seed=i), quality=85) for i in range(n)]


def _run(ds, fusion):
    if not fusion:
        options = nd.Options()
        options.fusion = False
        ds = ds.with_options(options)
        return list(ds)
    return list(ds.compile())


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)


def test_map_decode_is_a_record_kernel_matching_the_reference():
    blobs = _images()
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).map(
        lambda r: nd.image.decode_jpeg(r, channels=1))
    assert ds.element_spec == nd.TensorSpec((None, None, 1), np.uint8)
    assert "decode_jpeg" in ds.compile().explain().split("== record kernels ==")[1]
    want = [nd.image.decode_jpeg(b, channels=1) for b in blobs]
    _same(_run(ds, True), want)
    _same(_run(ds, False), want)


def test_batch_then_decode_matches_and_fails_on_mixed_shapes():
    blobs = [b for i, b in enumerate(_images(12)) if i % 3 != 1]   # all 37x53
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).batch(3).map(
        nd.image.decode_jpeg)
    want = [nd.image.decode_jpeg(blobs[i:i + 3]) for i in range(0, len(blobs), 3)]
    _same(_run(ds, True), want)
    _same(_run(ds, False), want)
    mixed = nd.Dataset.from_tensor_slices(np.array(_images(6), dtype=object)).map(
        nd.image.decode_jpeg).batch(3)
    with pytest.raises(InvalidArgumentError):
        list(mixed.compile())


def test_tfrecord_images_with_a_bad_one_and_ignore_errors(tmp_path):
    blobs = [b for i, b in enumerate(_images(9)) if i % 3 != 1]
    blobs[2] = b"\xff\xd8 broken"
    path = str(tmp_path / "images.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for b in blobs:
            writer.write(b)
    ds = nd.TFRecordDataset(path).map(nd.image.decode_jpeg)
    for fusion in (True, False):
        with pytest.raises(InvalidArgumentError, match="Unknown image file format"):
            _run(ds, fusion)
        kept = _run(ds.ignore_errors(), fusion)
        _same(kept, [nd.image.decode_jpeg(b) for i, b in enumerate(blobs) if i != 2])


def test_example_image_feature_then_decode(tmp_path):
    blobs = [b for i, b in enumerate(_images(6)) if i % 3 != 1]
    path = str(tmp_path / "examples.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for i, b in enumerate(blobs):
            writer.write(nd.io.encode_example({"image": b, "label": i}))
    features = {"image": nd.io.FixedLenFeature([], nd.string),
                "label": nd.io.FixedLenFeature([], np.int64)}

    def parse(record):
        example = nd.io.parse_single_example(record, features)
        return nd.image.decode_jpeg(example["image"]), example["label"]

    ds = nd.TFRecordDataset(path).map(parse).batch(2)
    assert ds.element_spec[0] == nd.TensorSpec((None, None, None, None), np.uint8)
    got = _run(ds, True)
    ref = _run(ds, False)
    assert len(got) == len(ref) == 2
    for (gx, gl), (rx, rl) in zip(got, ref):
        assert np.array_equal(gx, rx) and np.array_equal(gl, rl)
    assert np.array_equal(got[1][0][1], nd.image.decode_jpeg(blobs[3]))


def test_without_the_extra_the_error_names_it(monkeypatch, color):
    monkeypatch.setitem(sys.modules, "simplejpeg", None)
    with pytest.raises(UnimplementedError, match=r"nbdata\[image\]"):
        nd.image.decode_jpeg(color)
    with pytest.raises(Exception, match=r"nbdata\[image\]"):
        nd.Dataset.from_tensor_slices(np.array([color], dtype=object)).map(nd.image.decode_jpeg)
    from nbdata.primitives import jpeg
    assert not jpeg.available()


def test_pixels_equal_tensorflow(color, gray):
    tf = pytest.importorskip("tensorflow")
    for data in (color, gray, tf.io.encode_jpeg(_image(15, 17), quality=70).numpy()):
        for kwargs in ({}, {"channels": 1}, {"channels": 3}, {"ratio": 2}, {"ratio": 8},
                       {"dct_method": "INTEGER_ACCURATE"}, {"fancy_upscaling": False}):
            want = tf.io.decode_jpeg(data, **kwargs).numpy()
            got = nd.image.decode_jpeg(data, **kwargs)
            assert got.shape == want.shape and np.array_equal(got, want), kwargs
    # and TensorFlow reads what nbdata encodes
    assert tf.io.decode_jpeg(nd.image.encode_jpeg(_image(9, 11))).shape == (9, 11, 3)


def test_decode_of_one_component_is_a_record_kernel():
    """decode_jpeg on one string component of a tuple or an Example's feature becomes
    its own record kernel after the parse one; values, errors, ignore_errors and
    save/restore as on the reference path."""
    blobs = [b for i, b in enumerate(_images(15)) if i % 3 != 1]
    blobs[7] = b"\xff\xd8 broken"
    ds = nd.Dataset.from_tensor_slices((np.array(blobs, dtype=object), np.arange(10))).map(
        lambda image, label: (nd.image.decode_jpeg(image, channels=1), label * 2))
    assert "decode(decode_jpeg(channels=1, ratio=1) of component 0)" in ds.compile().explain()
    good = ds.take(7)
    _same([x for pair in _run(good, True) for x in pair],
          [x for pair in _run(good, False) for x in pair])
    for fusion in (True, False):
        with pytest.raises(InvalidArgumentError, match="Unknown image file format"):
            _run(ds, fusion)
        kept = _run(ds.ignore_errors(), fusion)
        assert [int(label) for _, label in kept] == [0, 2, 4, 6, 8, 10, 12, 16, 18]
    it = iter(ds.take(7).compile())
    first = [next(it) for _ in range(3)]
    state = it.save()
    rest = list(it)
    again = iter(ds.take(7).compile())
    again.restore(state)
    _same([x for pair in list(again) for x in pair], [x for pair in rest for x in pair])
    assert np.array_equal(first[1][0], nd.image.decode_jpeg(blobs[1], channels=1))


def test_example_then_jpeg_chain(tmp_path):
    blobs = [b for i, b in enumerate(_images(9)) if i % 3 != 1]
    path = str(tmp_path / "ex.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for i, b in enumerate(blobs):
            writer.write(nd.io.encode_example({"image": b, "label": i}))
    features = {"image": nd.io.FixedLenFeature([], nd.string),
                "label": nd.io.FixedLenFeature([], np.int64)}

    def parse(record):
        example = nd.io.parse_single_example(record, features)
        return nd.image.decode_jpeg(example["image"]), example["label"]

    ds = nd.TFRecordDataset(path).map(parse)
    text = ds.compile().explain().split("== record kernels ==")[1]
    assert "decode_jpeg" in text and "parse_single_example" in text
    got, ref = _run(ds, True), _run(ds, False)
    assert len(got) == len(ref) == 6
    for (gx, gl), (rx, rl) in zip(got, ref):
        assert np.array_equal(gx, rx) and int(gl) == int(rl)


def test_a_rest_that_only_repacks_moves_columns(tmp_path):
    """After the decode kernels, a function that only repacks the decoded components
    (dict -> tuple) becomes a column selection, not a per-element Python map."""
    from nbdata.ops.select import selection
    from nbdata.trace.function import record_function
    spec = {"a": nd.TensorSpec((), np.int64), "b": nd.TensorSpec((2,), np.float32)}
    out = (nd.TensorSpec((2,), np.float32), nd.TensorSpec((), np.int64))
    call = lambda fn, e: fn(e)  # noqa: E731

    def select(fn):
        return selection(record_function(fn, spec, call), out)
    assert select(lambda e: (e["b"], e["a"])) == (1, 0)
    assert select(lambda e: (e["b"], e["a"] * 2)) is None
    assert select(lambda e: (e["a"], e["b"])) is None   # specs differ
    blobs = [b for i, b in enumerate(_images(6)) if i % 3 != 1]
    path = str(tmp_path / "ex.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for i, b in enumerate(blobs):
            writer.write(nd.io.encode_example({"image": b, "label": i}))
    features = {"image": nd.io.FixedLenFeature([], nd.string),
                "label": nd.io.FixedLenFeature([], np.int64)}

    def parse(record):
        example = nd.io.parse_single_example(record, features)
        return nd.image.decode_jpeg(example["image"]), example["label"]

    ds = nd.TFRecordDataset(path).map(parse).batch(2)
    assert "select(components [0, 1])" in ds.compile().explain()
    got, ref = _run(ds, True), _run(ds, False)
    for (gx, gl), (rx, rl) in zip(got, ref):
        assert np.array_equal(gx, rx) and np.array_equal(gl, rl)
    assert len(got) == 2


def test_adobe_cmyk_jpeg_equals_tensorflow():
    # An Adobe CMYK JPEG (Pillow, quality 95) and what TF 2.21's decode_jpeg gave for it:
    # R = C * K / 255 truncated, as TensorFlow converts; 1 channel fails there as here.
    data = np.load(DATA / "tf_cmyk_jpeg.npz")
    jpeg, want = data["jpeg"].tobytes(), data["tf_rgb"]
    for channels in (0, 3):
        np.testing.assert_array_equal(nd.image.decode_jpeg(jpeg, channels=channels), want)
    with pytest.raises(nd.errors.InvalidArgumentError, match="jpeg::Uncompress failed"):
        nd.image.decode_jpeg(jpeg, channels=1)
