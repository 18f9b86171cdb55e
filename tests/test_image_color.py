"""tf.image's color ops (adjust_brightness, adjust_contrast, adjust_saturation,
rgb_to_grayscale, random_brightness, random_contrast): each is one op-table entry, and
it gives TensorFlow's values eagerly, inside a fused CPU map, in a TF1 graph and in a
GPU chain (the CUDA simulator here).

``tests/data/tf_image_color.npz`` holds inputs and TensorFlow 2.21's outputs for them;
``python tests/test_image_color.py OUT.npz`` writes it again (TensorFlow installed).
"""

import os
import pathlib

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError
from nbdata.primitives import image
from nbdata.primitives.image import color

FIXTURE = pathlib.Path(__file__).parent / "data" / "tf_image_color.npz"
CASES = ("u8", "i16", "u16", "f32", "f64")
BRIGHTNESS = (0.1, -0.35)
CONTRAST = (0.3, 1.8, -1.0)
SATURATION = (0.0, 0.6, 2.5)


def ops():
    """(fixture key, the op with its argument) for every output the fixture holds."""
    return ([(f"brightness/{d}", lambda x, d=d: image.adjust_brightness(x, d)) for d in BRIGHTNESS]
            + [(f"contrast/{f}", lambda x, f=f: image.adjust_contrast(x, f)) for f in CONTRAST]
            + [(f"saturation/{f}", lambda x, f=f: image.adjust_saturation(x, f))
               for f in SATURATION]
            + [("grayscale", image.rgb_to_grayscale)])


@pytest.fixture(scope="module")
def tf_outputs():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def assert_same(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), what
    np.testing.assert_array_equal(got, want, err_msg=str(what))


# ------------------------------------------------------------------- eager

@pytest.mark.parametrize("case", CASES)
def test_eager_values_are_tensorflows(tf_outputs, case):
    images = tf_outputs[f"{case}/image"]
    for key, op in ops():
        assert_same(op(images), tf_outputs[f"{case}/{key}"], f"{case}/{key}")


def test_against_live_tensorflow():
    """Fresh inputs (float16, NaN and infinities, a one-pixel image) against the
    installed TensorFlow."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(7)
    f32 = rng.normal(0.5, 0.6, (3, 4, 5, 3)).astype(np.float32)
    f32[0, 0, 0] = [np.nan, 0.2, 0.1]
    f32[0, 0, 1] = [np.inf, 0.2, -np.inf]
    inputs = [f32, f32.astype(np.float16), rng.integers(0, 256, (1, 1, 3), dtype=np.uint8),
              rng.integers(-2**31, 2**31 - 1, (4, 3, 3), dtype=np.int32)]
    for x in inputs:
        for delta in (0.25, -1.5):
            assert_same(image.adjust_brightness(x, delta),
                        tf.image.adjust_brightness(x, delta).numpy(), (x.dtype, delta))
        for factor in (0.0, 0.5, 3.0):
            if x.dtype == np.float16:   # TF's CPU kernels have no float16 contrast, saturation
                continue
            assert_same(image.adjust_contrast(x, factor),
                        tf.image.adjust_contrast(x, factor).numpy(), (x.dtype, factor))
            assert_same(image.adjust_saturation(x, factor),
                        tf.image.adjust_saturation(x, factor).numpy(), (x.dtype, factor))
        assert_same(image.rgb_to_grayscale(x), tf.image.rgb_to_grayscale(x).numpy(), x.dtype)


def test_random_ops_draw_from_seed_and_counter():
    x = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 12
    deltas = set()
    for counter in range(20):
        out = image.random_brightness(x, 0.3, seed=(11, counter))
        assert_same(out, image.random_brightness(x, 0.3, seed=(11, counter)))
        deltas.add(out.tobytes())
        # the drawn delta is one number: adjust_brightness by it gives the same image
        delta = color._drawn("random_brightness", (11, counter), color._BRIGHTNESS_STREAM,
                             -0.3, 0.3)
        assert -0.3 <= delta < 0.3
        assert_same(out, image.adjust_brightness(x, delta))
        factor = color._drawn("random_contrast", (11, counter), color._CONTRAST_STREAM, 0.5, 1.5)
        assert_same(image.random_contrast(x, 0.5, 1.5, seed=(11, counter)),
                    image.adjust_contrast(x, factor))
    assert len(deltas) > 15


def test_errors_are_tensorflows():
    u8 = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(InvalidArgumentError, match="at least 3-D"):
        image.adjust_contrast(np.zeros((4, 3), np.uint8), 1.0)
    with pytest.raises(InvalidArgumentError, match="3 channels but instead has 4"):
        image.adjust_saturation(np.zeros((2, 2, 4), np.uint8), 1.0)
    with pytest.raises(InvalidArgumentError, match="3 channels but instead has 4"):
        image.rgb_to_grayscale(np.zeros((2, 2, 4), np.uint8))
    with pytest.raises(InvalidArgumentError, match="delta must be scalar"):
        image.adjust_brightness(u8, [0.1, 0.2])
    with pytest.raises(ValueError, match="^max_delta must be non-negative.$"):
        image.random_brightness(u8, -0.1, seed=(1, 2))
    with pytest.raises(ValueError, match="^upper must be > lower.$"):
        image.random_contrast(u8, 0.5, 0.5, seed=(1, 2))
    with pytest.raises(ValueError, match="^lower must be non-negative.$"):
        image.random_contrast(u8, -0.5, 0.5, seed=(1, 2))
    for dtype in (np.bool_, object):
        with pytest.raises(TypeError, match="floating point or integer"):
            image.adjust_brightness(np.zeros((2, 2, 3), dtype), 0.1)


# --------------------------------------------------------- fused CPU map

def fused(ds):
    options = nd.Options()
    options.fusion_min_rows = 0
    return ds.with_options(options).compile()


def reference(ds):
    options = nd.Options()
    options.fusion = False
    return list(ds.with_options(options))


@pytest.mark.parametrize("case", ["u8", "f32"])
def test_inside_a_fused_map(tf_outputs, case):
    images = tf_outputs[f"{case}/image"]
    keyed = ops()
    pipe = fused(nd.Dataset.from_tensor_slices(images).map(
        lambda x: tuple(op(x) for _, op in keyed)))
    assert pipe.fused_stages(), pipe.explain()
    got = list(pipe)
    assert pipe.stats().fallback_rows == 0
    for k, (key, _) in enumerate(keyed):
        assert_same(np.stack([row[k] for row in got]), tf_outputs[f"{case}/{key}"], key)


def test_a_primitive_passed_to_map_itself_is_compiled():
    images = np.random.default_rng(1).integers(0, 256, (5, 4, 6, 3), dtype=np.uint8)
    pipe = fused(nd.Dataset.from_tensor_slices(images).map(nd.image.rgb_to_grayscale))
    assert "map(rgb_to_grayscale) [Numba-compiled call]" in pipe.explain()
    assert_same(np.stack(list(pipe)), image.rgb_to_grayscale(images))


def test_random_ops_in_a_fused_map_equal_the_reference_path():
    images = np.random.default_rng(2).integers(0, 256, (40, 5, 4, 3), dtype=np.uint8)
    ds = (nd.Dataset.from_tensor_slices(images).enumerate()
          .map(lambda i, x: nd.image.random_contrast(
              nd.image.random_brightness(x, 0.4, seed=(3, i)), 0.2, 1.8, seed=(4, i))))
    pipe = fused(ds)
    got = list(pipe)
    want = [image.random_contrast(image.random_brightness(x, 0.4, seed=(3, i)), 0.2, 1.8,
                                  seed=(4, i)) for i, x in enumerate(images)]
    assert pipe.fused_stages()
    for a, b, c in zip(got, reference(ds), want):
        assert_same(a, b)
        assert_same(a, c)


def test_brightness_lifts_into_the_fused_loop():
    x = np.random.default_rng(3).random((30, 4, 3), dtype=np.float32)
    ds = nd.Dataset.from_tensor_slices(x).enumerate().map(
        lambda i, v: nd.image.random_brightness(v * 2.0, 0.5, seed=(9, i)))
    pipe = fused(ds)
    assert "[elementwise, inlined]" in pipe.explain()
    for a, b in zip(list(pipe), reference(ds)):
        assert_same(a, b)


# --------------------------------------------------------------- TF1 graph

def test_in_a_tf1_graph(tf_outputs):
    images = tf_outputs["u8/image"]
    graph = nd.Graph()
    with graph.as_default():
        x = nd.placeholder(np.uint8, shape=[None, None, 3])
        fetches = [op(x) for _, op in ops()]
        fetches += [image.random_brightness(x, 0.2, seed=(1, 2)),
                    image.random_contrast(x, 0.5, 1.5, seed=(1, 2))]
        assert fetches[-3].shape == nd.TensorShape([None, None, 1])   # grayscale
        assert all(t.dtype == np.uint8 for t in fetches)
        with nd.Session() as sess:
            got = sess.run(fetches, feed_dict={x: images[1]})
    want = [tf_outputs[f"u8/{key}"][1] for key, _ in ops()]
    want += [image.random_brightness(images[1], 0.2, seed=(1, 2)),
             image.random_contrast(images[1], 0.5, 1.5, seed=(1, 2))]
    for a, b in zip(got, want):
        assert_same(a, b)


# --------------------------------------------------------------- GPU chains

gpu = pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")


@gpu
@pytest.mark.parametrize("case", ["u8", "u16", "f32"])
def test_gpu_ops_equal_tensorflows(tf_outputs, case):
    images = tf_outputs[f"{case}/image"]
    if images.ndim == 3:
        images = images[None]
    batch = nd.gpu.DeviceArray.from_host(images)
    device_ops = {"brightness": nd.gpu.adjust_brightness, "contrast": nd.gpu.adjust_contrast,
                  "saturation": nd.gpu.adjust_saturation}
    for key, _ in ops():
        if key == "grayscale":
            got = nd.gpu.rgb_to_grayscale(batch)
        else:
            name, arg = key.split("/")
            got = device_ops[name](batch, float(arg))
        want = tf_outputs[f"{case}/{key}"]
        assert_same(got.copy_to_host(), want.reshape((-1,) + want.shape[-3:]), key)


@gpu
def test_gpu_random_ops_draw_as_the_cpu_ops_with_counters():
    images = np.random.default_rng(4).integers(0, 256, (4, 5, 6, 3), dtype=np.uint8)
    batch = nd.gpu.DeviceArray.from_host(images)
    got = nd.gpu.random_contrast(nd.gpu.random_brightness(batch, 0.3, seed=(4, 10)),
                                 0.2, 1.5, seed=(6, 0)).copy_to_host()
    want = np.stack([image.random_contrast(image.random_brightness(x, 0.3, seed=(4, 10 + j)),
                                           0.2, 1.5, seed=(6, j)) for j, x in enumerate(images)])
    assert_same(got, want)


@gpu
def test_gpu_chain_in_a_pipeline_cuts_at_contrast():
    images = np.random.default_rng(5).integers(0, 256, (7, 5, 6, 3), dtype=np.uint8)

    def augment(x):
        x = nd.gpu.adjust_saturation(nd.gpu.adjust_brightness(x, -0.2), 1.5)
        return nd.gpu.rgb_to_grayscale(nd.gpu.adjust_contrast(x, 0.5))

    pipe = nd.Dataset.from_tensor_slices(images).batch(3).prefetch_to_device().map(augment)
    pipe = pipe.compile()
    text = pipe.explain()
    assert text.count("def kernel(") == 2, text   # contrast needs each image's means first
    got = np.concatenate([b.copy_to_host() for b in pipe])
    want = [image.rgb_to_grayscale(image.adjust_contrast(
        image.adjust_saturation(image.adjust_brightness(x, -0.2), 1.5), 0.5)) for x in images]
    assert_same(got, np.stack(want))


@gpu
def test_gpu_errors_at_the_call():
    batch = nd.gpu.DeviceArray.from_host(np.zeros((2, 3, 3, 3), np.uint8))
    with pytest.raises(TypeError, match="cannot cast to complex64"):   # float16 is supported
        nd.gpu.cast(batch, np.complex64)
    with pytest.raises(TypeError, match="float16"):
        nd.gpu.adjust_brightness(nd.gpu.DeviceArray.from_host(np.zeros((1, 2, 2, 3), np.float16)),
                                 0.1)
    with pytest.raises(ValueError, match="3 channels"):
        nd.gpu.rgb_to_grayscale(nd.gpu.DeviceArray.from_host(np.zeros((1, 2, 2, 4), np.uint8)))
    with pytest.raises(ValueError, match="max_delta"):
        nd.gpu.random_brightness(batch, -1.0, seed=1)


if __name__ == "__main__":   # writes the fixture again: python tests/test_image_color.py OUT.npz
    import sys

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    rng = np.random.default_rng(20261125)
    sources = {
        "u8": rng.integers(0, 256, (2, 9, 11, 3), dtype=np.uint8),
        "i16": rng.integers(-32768, 32768, (9, 7, 3), dtype=np.int16),
        "u16": rng.integers(0, 65536, (5, 6, 3), dtype=np.uint16),
        "f32": (rng.random((2, 8, 5, 3), dtype=np.float32) * 1.4 - 0.2),
        "f64": rng.random((6, 4, 3)),
    }
    sources["u8"][0, 0, :3] = [[128, 128, 128], [0, 0, 0], [255, 0, 255]]   # gray, black, hue 5/6
    out = {}
    for case, x in sources.items():
        out[f"{case}/image"] = x
        for d in BRIGHTNESS:
            out[f"{case}/brightness/{d}"] = tf.image.adjust_brightness(x, d).numpy()
        for f in CONTRAST:
            out[f"{case}/contrast/{f}"] = tf.image.adjust_contrast(x, f).numpy()
        for f in SATURATION:
            out[f"{case}/saturation/{f}"] = tf.image.adjust_saturation(x, f).numpy()
        out[f"{case}/grayscale"] = tf.image.rgb_to_grayscale(x).numpy()
    np.savez_compressed(sys.argv[1], **out)
