"""Tests for nbdata.image's resizing and layout ops: resize, random_resized_crop,
random_resized_crop_window, transpose, hwc_to_chw and cast.

Tolerance against TensorFlow: ``tf.image.resize`` is matched within a relative
1e-5 of the value (an absolute 1e-5 of the image's largest magnitude near 0).
Both sides evaluate the same float32 formula, but TF's kernel may associate it
differently or use fused multiply-adds on other builds; on TF 2.21's CPU kernel
the results are in fact bit-identical. Nearest-neighbour resizing is exact.
"""

import math

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

import nbdata as nd
from nbdata import random
from nbdata.primitives import image
from nbdata.primitives.image import geometry, resizing
from test_image import _put

SIZES = [(1, 1), (3, 3), (8, 5), (13, 29), (64, 33), (224, 224), (301, 97)]
SHAPES = [(2, 2, 1), (5, 7, 3), (32, 48, 3), (17, 9, 4), (100, 37, 1)]


def sample_image(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    return rng.integers(0, 256, shape).astype(dtype)


def assert_close_to_tf(got, want, img):
    """The documented tolerance: 1e-5 relative (absolute near zero)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = max(float(np.max(np.abs(img.astype(np.float64)))), 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


# ------------------------------------------------------------------- resize

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int32, np.float64])
def test_resize_matches_tf_image_resize(shape, dtype):
    tf = pytest.importorskip("tensorflow")
    img = sample_image(shape, dtype)
    sizes = SIZES + [shape[:2], (2 * shape[0], 3 * shape[1]), (max(1, shape[0] // 2), shape[1])]
    for size in sizes:
        assert_close_to_tf(image.resize(img, size), tf.image.resize(img, size).numpy(), img)
        # nearest keeps the dtype and copies pixels: exact
        want = tf.image.resize(img, size, method="nearest").numpy()
        got = image.resize(img, size, method="nearest")
        assert got.dtype == want.dtype == img.dtype
        np.testing.assert_array_equal(got, want)


def test_resize_bilinear_hand_computed():
    img = np.array([[[0], [10]], [[20], [30]]], dtype=np.uint8)
    # scale 2/3: source rows -1/6 (clamped to row 0), 1/2, 7/6 (clamped to row 1)
    np.testing.assert_array_equal(image.resize(img, (3, 3))[..., 0],
                                  [[0, 5, 10], [10, 15, 20], [20, 25, 30]])
    # halving reads the centre of each 2x2 block: its mean
    big = np.arange(4 * 6 * 2, dtype=np.int16).reshape(4, 6, 2)
    want = big.reshape(2, 2, 3, 2, 2).astype(np.float32).mean(axis=(1, 3))
    np.testing.assert_array_equal(image.resize(big, (2, 3)), want)


def test_resize_to_the_same_size_is_the_image_in_float32():
    img = sample_image((7, 9, 3), np.uint8)
    np.testing.assert_array_equal(image.resize(img, (7, 9)), img.astype(np.float32))
    np.testing.assert_array_equal(image.resize(img, (7, 9), "nearest"), img)


def test_resize_nearest_reads_the_documented_pixels():
    img = np.arange(5 * 7, dtype=np.int64).reshape(5, 7, 1)
    out = image.resize(img, (3, 11), method="nearest")[..., 0]
    rows = [min(math.floor((y + 0.5) * np.float32(5 / 3)), 4) for y in range(3)]
    cols = [min(math.floor((x + 0.5) * np.float32(7 / 11)), 6) for x in range(11)]
    np.testing.assert_array_equal(out, img[..., 0][np.ix_(rows, cols)])


def test_resize_output_is_float32_and_contiguous_for_any_input_layout():
    img = sample_image((10, 12, 3), np.float64)
    for view in (img[:, ::2], img[::-1], np.asfortranarray(img)):
        out = image.resize(view, (5, 4))
        assert out.dtype == np.float32 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, image.resize(np.ascontiguousarray(view), (5, 4)))


@numba.njit(cache=True)
def resize_in_nopython(img, size):
    return (image.resize(img, size), image.resize(img, size, "bilinear"),
            image.resize(img, size, method="nearest"))


def test_resize_in_nopython_matches_python():
    img = sample_image((9, 14, 3), np.uint8)
    for size in [(4, 5), (20, 3), (np.int64(6), np.int64(6))]:
        bilinear, bilinear_named, nearest = resize_in_nopython(img, size)
        np.testing.assert_array_equal(bilinear, image.resize(img, size))
        np.testing.assert_array_equal(bilinear_named, bilinear)
        np.testing.assert_array_equal(nearest, image.resize(img, size, "nearest"))
    # a size array works too
    got = numba.njit(lambda x, s: image.resize(x, s))(img, np.array([4, 5]))
    np.testing.assert_array_equal(got, image.resize(img, (4, 5)))


def test_constant_sizes_in_compiled_code_share_one_compiled_resize():
    """A size written as constants reaches the resize kernels as int64, not as literals:
    each constant size had compiled a bilinear resize of its own (1-2 s each)."""
    img = sample_image((9, 14, 2), np.int32)    # a dtype no other test resizes
    kernels = (resizing._resize_bilinear, resizing._resize_bilinear_window,
               resizing._random_resized_crop)
    before = [len(k.signatures) for k in kernels]
    for f in (numba.njit(lambda x: image.resize(x, (4, 4))),
              numba.njit(lambda x: image.resize(x, (7, 3))),
              numba.njit(lambda x: image.random_resized_crop(x, (5, 5), seed=(1, 2))),
              numba.njit(lambda x: image.random_resized_crop(x, (6, 2), seed=(1, 2)))):
        out = f(img)
        assert out.dtype == np.float32
    np.testing.assert_array_equal(numba.njit(lambda x: image.resize(x, (7, 3)))(img),
                                  image.resize(img, (7, 3)))
    added = [len(k.signatures) - b for k, b in zip(kernels, before)]
    assert all(n <= 1 for n in added), added     # (0 where an earlier test compiled it)
    for k in kernels:
        assert not any("Literal" in str(sig) for sig in k.signatures), k.signatures


def test_resize_errors():
    img = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="resize: unsupported method 'bicubic'"):
        image.resize(img, (2, 2), method="bicubic")
    with pytest.raises(ValueError, match="resize: unsupported method 'area'"):
        numba.njit(lambda x: image.resize(x, (2, 2), "area"))(img)
    with pytest.raises(TypingError, match="method must be a constant string"):
        numba.njit(lambda x, m: image.resize(x, (2, 2), m))(img, "bilinear")
    with pytest.raises(TypeError, match="resize: method must be a string"):
        image.resize(img, (2, 2), method=1)
    with pytest.raises(ValueError, match=r"resize: expected an \(H, W, C\) image"):
        image.resize(np.zeros((4, 4)), (2, 2))
    with pytest.raises(TypeError, match="resize: unsupported image dtype complex128"):
        image.resize(np.zeros((4, 4, 1), complex), (2, 2))
    with pytest.raises(TypeError, match="resize: unsupported image dtype bool"):
        image.resize(np.zeros((4, 4, 1), bool), (2, 2))
    with pytest.raises(ValueError, match="resize: size must be positive, got 0x2"):
        image.resize(img, (0, 2))
    with pytest.raises(ValueError, match="resize: size must be positive, got 2x-1"):
        numba.njit(lambda x: image.resize(x, (2, -1)))(img)
    with pytest.raises(ValueError, match="resize: the image must not be empty"):
        image.resize(np.zeros((0, 4, 3)), (2, 2))
    with pytest.raises(ValueError, match="resize: size must have 2 values, got 3"):
        image.resize(img, (2, 2, 3))
    with pytest.raises(ValueError, match="resize: size must have 2 values, got 3"):
        numba.njit(lambda x, s: image.resize(x, s))(img, np.array([2, 2, 3]))
    with pytest.raises(TypeError, match="resize: size must hold integers"):
        image.resize(img, (2.5, 2))
    with pytest.raises(TypingError, match="resize: size must be a pair of integers"):
        numba.njit(lambda x: image.resize(x, (2.5, 2)))(img)
    with pytest.raises(TypingError, match=r"resize: expected a \(H, W, C\) array"):
        numba.njit(lambda x: image.resize(x, (2, 2)))(np.zeros((4, 4)))


# ---------------------------------------------------- random_resized_crop

def reference_window(height, width, scale, ratio, seed, counter):
    """random_resized_crop's documented draws, in plain Python."""
    area = height * width
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    keys = {name: random.key(seed, stream, 0) for name, stream in (
        ("area", 0x7272635F61726561), ("ratio", 0x7272635F7261746F),
        ("top", 0x7272635F746F705F), ("left", 0x7272635F6C656674))}
    for attempt in range(10):
        n = (counter * 16 + attempt) % 2**64
        target = area * (scale[0] + (scale[1] - scale[0]) * float(random.uniform(keys["area"], n)))
        aspect = math.exp(log_low + (log_high - log_low) * float(random.uniform(keys["ratio"], n)))
        w = round(math.sqrt(target * aspect))   # Python rounds half to even, like rint
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(random.randint(keys["top"], n, 0, height - h + 1))
            left = int(random.randint(keys["left"], n, 0, width - w + 1))
            return top, left, h, w, attempt
    in_ratio = width / height
    h, w = height, width
    if in_ratio < ratio[0]:
        h = max(round(w / ratio[0]), 1)
    elif in_ratio > ratio[1]:
        w = max(round(h * ratio[1]), 1)
    return (height - h) // 2, (width - w) // 2, h, w, None


def test_stream_ids_are_distinct_and_documented():
    streams = [resizing._RRC_AREA_STREAM, resizing._RRC_RATIO_STREAM,
               resizing._RRC_TOP_STREAM, resizing._RRC_LEFT_STREAM]
    assert [s.to_bytes(8, "big") for s in streams] == [b"rrc_area", b"rrc_rato", b"rrc_top_",
                                                       b"rrc_left"]
    assert len(set(streams) | {geometry._CROP_TOP_STREAM, geometry._CROP_LEFT_STREAM,
                               geometry._FLIP_STREAM}) == 7
    assert (resizing._RRC_ATTEMPTS, resizing._RRC_COUNTER_STRIDE) == (10, 16)


@pytest.mark.parametrize("height,width,scale,ratio", [
    (224, 224, (0.08, 1.0), (3 / 4, 4 / 3)),
    (375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (40, 300, (0.25, 1.0), (0.5, 2.0)),
    (7, 5, (0.5, 1.0), (1.0, 1.0)),
    (600, 20, (0.9, 1.0), (3 / 4, 4 / 3)),   # tall: often falls back
])
def test_window_follows_the_documented_draws(height, width, scale, ratio):
    for seed in (0, 12345, -3):
        for counter in list(range(300)) + [-1, 2**40, 2**62]:
            top, left, h, w, _ = reference_window(height, width, scale, ratio, seed, counter)
            assert image.random_resized_crop_window(height, width, scale, ratio,
                                                    (seed, counter)) == (top, left, h, w)


def test_window_is_deterministic_and_varies_with_counter_and_seed():
    windows = [image.random_resized_crop_window(100, 120, seed=(1, c)) for c in range(200)]
    assert windows == [image.random_resized_crop_window(100, 120, seed=(1, c))
                       for c in range(200)]
    assert len(set(windows)) > 190
    assert len({image.random_resized_crop_window(100, 120, seed=(s, 0))
                for s in range(50)}) > 45
    # seeds and counters wrap modulo 2**64, like nbdata.random
    assert (image.random_resized_crop_window(100, 120, seed=(-1, -2))
            == image.random_resized_crop_window(100, 120, seed=(2**64 - 1, 2**64 - 2)))


@pytest.mark.parametrize("height,width", [(224, 224), (100, 300), (300, 100), (13, 17)])
def test_window_is_inside_the_image_within_the_ratio_and_scale_limits(height, width):
    scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
    for counter in range(2000):
        top, left, h, w = image.random_resized_crop_window(height, width, scale, ratio,
                                                           (7, counter))
        assert 0 <= top and top + h <= height and 0 <= left and left + w <= width
        assert h >= 1 and w >= 1
        if reference_window(height, width, scale, ratio, 7, counter)[4] is None:
            continue   # the central crop: checked below
        # h and w are each rounded: the ratio and area are within rounding of the limits
        assert ratio[0] * (h - 0.5) <= w + 0.5 and w - 0.5 <= ratio[1] * (h + 0.5)
        assert (h + 0.5) * (w + 0.5) >= scale[0] * height * width
        assert (h - 0.5) * (w - 0.5) <= scale[1] * height * width


def test_windows_cover_the_scale_and_ratio_ranges():
    fractions, ratios, tops = [], [], set()
    for counter in range(4000):
        top, left, h, w = image.random_resized_crop_window(1000, 1000, seed=(3, counter))
        fractions.append(h * w / 1e6)
        ratios.append(w / h)
        tops.add(top)
    assert min(fractions) < 0.1 and max(fractions) > 0.97
    # uniform in [0.08, 1] (mean 0.54) less the large windows of extreme ratios that do not fit
    assert 0.45 < np.mean(fractions) < 0.54
    assert min(ratios) < 0.76 and max(ratios) > 1.32
    assert abs(np.mean(np.log(ratios))) < 0.01   # log-uniform, symmetric around 1
    assert len(tops) > 500


@pytest.mark.parametrize("height,width,ratio,want", [
    (10, 100, (1.0, 2.0), (0, 40, 10, 20)),      # too wide: h = H, w = rint(H * 2)
    (100, 10, (0.5, 2.0), (40, 0, 20, 10)),      # too tall: w = W, h = rint(W / 0.5)
    (100, 30, (0.5, 2.0), (20, 0, 60, 30)),
    (50, 60, (0.5, 2.0), (0, 0, 50, 60)),        # aspect within ratio: the whole image
    (100, 1, (3.0, 4.0), (49, 0, 1, 1)),         # rint(1 / 3) = 0, clamped to 1
    (11, 10, (1.0, 1.0), (0, 0, 10, 10)),        # (11 - 10) // 2 = 0
    (15, 10, (1.0, 1.0), (2, 0, 10, 10)),
])
def test_fallback_is_the_central_crop_with_the_ratio_clamped(height, width, ratio, want):
    # scale > 1 never fits, so every attempt fails and the fallback is taken
    for counter in range(5):
        assert image.random_resized_crop_window(height, width, (1.5, 2.0), ratio,
                                                (0, counter)) == want
        assert reference_window(height, width, (1.5, 2.0), ratio, 0, counter)[:4] == want


def test_fallback_after_ten_failed_attempts_only():
    # a tall image: few draws fit, so some counters fit at a late attempt and
    # others (about a quarter) fall back after all ten
    shape, scale, ratio = (400, 80), (0.08, 1.0), (3 / 4, 4 / 3)
    central = ((400 - 107) // 2, 0, 107, 80)   # w = W, h = rint(80 / 0.75) = 107
    attempts = []
    for counter in range(500):
        top, left, h, w, attempt = reference_window(*shape, scale, ratio, 9, counter)
        got = image.random_resized_crop_window(*shape, scale, ratio, (9, counter))
        assert got == (top, left, h, w)
        if attempt is None:
            assert got == central
        attempts.append(attempt)
    assert 50 < attempts.count(None) < 250
    assert any(a is not None and a >= 5 for a in attempts)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16])
def test_random_resized_crop_is_the_resized_window(dtype):
    img = sample_image((48, 64, 3), dtype)
    for counter in range(40):
        for size in [(16, 16), (30, 70)]:
            out = image.random_resized_crop(img, size, seed=(4, counter))
            top, left, h, w = image.random_resized_crop_window(48, 64, seed=(4, counter))
            assert out.dtype == np.float32 and out.shape == size + (3,)
            np.testing.assert_array_equal(out, image.resize(img[top:top + h, left:left + w],
                                                            size))


def test_random_resized_crop_matches_tf_resize_of_the_window():
    tf = pytest.importorskip("tensorflow")
    for dtype in (np.uint8, np.float32):
        img = sample_image((75, 90, 3), dtype, seed=1)
        for counter in range(20):
            out = image.random_resized_crop(img, (32, 24), (0.2, 0.9), (0.5, 2.0), (8, counter))
            top, left, h, w = image.random_resized_crop_window(75, 90, (0.2, 0.9), (0.5, 2.0),
                                                               (8, counter))
            want = tf.image.resize(img[top:top + h, left:left + w], (32, 24)).numpy()
            assert_close_to_tf(out, want, img)


def test_random_resized_crop_is_deterministic_and_differs_across_counters():
    img = sample_image((60, 80, 3), np.uint8)
    first = image.random_resized_crop(img, (20, 20), seed=(1, 5))
    np.testing.assert_array_equal(image.random_resized_crop(img, (20, 20), seed=(1, 5)), first)
    np.testing.assert_array_equal(
        image.random_resized_crop(img, (20, 20), seed=np.array([1, 5])), first)
    outs = [image.random_resized_crop(img, (20, 20), seed=(1, c)) for c in range(30)]
    assert len({o.tobytes() for o in outs}) == 30


@numba.njit(cache=True)
def rrc_serial(images, seed):
    out = np.empty((len(images), 12, 10, 3), np.float32)
    windows = np.empty((len(images), 4), np.int64)
    for i in range(len(images)):
        _put(out, i, image.random_resized_crop(images[i], (12, 10), seed=(seed, i)))
        top, left, h, w = image.random_resized_crop_window(images.shape[1], images.shape[2],
                                                           seed=(seed, i))
        windows[i, 0], windows[i, 1], windows[i, 2], windows[i, 3] = top, left, h, w
    return out, windows


@numba.njit(parallel=True, cache=True)
def rrc_parallel(images, seed):
    out = np.empty((len(images), 12, 10, 3), np.float32)
    for i in numba.prange(len(images)):
        crop = image.random_resized_crop(images[i], (12, 10), (0.08, 1.0), (0.75, 4 / 3),
                                         (seed, i))
        _put(out, i, crop)
    return out


def test_random_resized_crop_in_nopython_and_prange_matches_python():
    images = np.random.default_rng(2).integers(0, 256, (32, 21, 27, 3), dtype=np.uint8)
    want = np.stack([image.random_resized_crop(x, (12, 10), seed=(6, i))
                     for i, x in enumerate(images)])
    got, windows = rrc_serial(images, 6)
    np.testing.assert_array_equal(got, want)
    assert [tuple(w) for w in windows] == [image.random_resized_crop_window(21, 27, seed=(6, i))
                                           for i in range(32)]
    np.testing.assert_array_equal(rrc_parallel(images, 6), want)
    # a user lambda, as a map function would be compiled
    fn = lambda i, x: image.random_resized_crop(x, (8, 8), scale=(0.5, 1.0), seed=(1, i))  # noqa: E731
    compiled = numba.njit(fn)
    for i in range(10):
        np.testing.assert_array_equal(compiled(i, images[i]), fn(i, images[i]))


def test_random_resized_crop_in_a_dataset_map():
    images = np.random.default_rng(3).integers(0, 256, (40, 20, 24, 3), dtype=np.uint8)
    fn = lambda i, x: image.random_resized_crop(x, (8, 8), seed=(2, i))  # noqa: E731
    ds = nd.Dataset.from_tensor_slices(images).enumerate().map(fn).batch(8)
    got = np.concatenate(list(ds.compile()))
    want = np.stack([fn(i, x) for i, x in enumerate(images)])
    np.testing.assert_array_equal(got, want)


def test_random_resized_crop_errors():
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(TypeError, match=r"random_resized_crop: seed=\(seed, counter\) is "
                                        "required"):
        image.random_resized_crop(img, (4, 4))
    with pytest.raises(TypeError, match="seed=.* is required"):
        image.random_resized_crop_window(8, 8)
    with pytest.raises(TypingError, match="seed=.* is required"):
        numba.njit(lambda x: image.random_resized_crop(x, (4, 4)))(img)
    with pytest.raises(ValueError, match="random_resized_crop: seed must have 2 values"):
        image.random_resized_crop(img, (4, 4), seed=(1, 2, 3))
    with pytest.raises(TypeError, match="random_resized_crop: seed must hold integers"):
        image.random_resized_crop(img, (4, 4), seed=(1, 2.0))
    for scale in [(0.5, 0.2), (-0.1, 1.0), (0.1, float("inf")), (float("nan"), 1.0)]:
        with pytest.raises(ValueError, match="random_resized_crop: scale must be finite with "
                                             r"0 <= scale\[0\] <= scale\[1\]"):
            image.random_resized_crop(img, (4, 4), scale=scale, seed=(0, 0))
    for ratio in [(0.0, 1.0), (2.0, 1.0), (1.0, float("nan"))]:
        with pytest.raises(ValueError, match="random_resized_crop: ratio must be finite"):
            image.random_resized_crop_window(8, 8, ratio=ratio, seed=(0, 0))
    with pytest.raises(ValueError, match="random_resized_crop: ratio must be finite"):
        numba.njit(lambda x: image.random_resized_crop(x, (4, 4), ratio=(2, 1),
                                                       seed=(0, 0)))(img)
    with pytest.raises(ValueError, match="random_resized_crop: scale must be a .*pair"):
        image.random_resized_crop(img, (4, 4), scale=(0.1,), seed=(0, 0))
    with pytest.raises(TypeError, match="random_resized_crop: ratio must hold numbers"):
        image.random_resized_crop(img, (4, 4), ratio=("a", 1), seed=(0, 0))
    with pytest.raises(ValueError, match="random_resized_crop: size must be positive"):
        image.random_resized_crop(img, (0, 4), seed=(0, 0))
    with pytest.raises(ValueError, match="random_resized_crop: the image must not be empty"):
        image.random_resized_crop_window(0, 8, seed=(0, 0))
    with pytest.raises(ValueError, match=r"random_resized_crop: expected an \(H, W, C\)"):
        image.random_resized_crop(np.zeros((8, 8)), (4, 4), seed=(0, 0))


def test_random_resized_crop_records_a_graph_op():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(np.uint8, shape=[20, 30, 3])
        out = image.random_resized_crop(x, (8, 6), seed=(1, 4))
        chw = image.hwc_to_chw(image.cast(x, np.float32))
    assert isinstance(out, nd.Tensor)
    img = sample_image((20, 30, 3), np.uint8)
    with nd.Session(graph=g) as sess:
        got, got_chw = sess.run([out, chw], feed_dict={x: img})
    np.testing.assert_array_equal(got, image.random_resized_crop(img, (8, 6), seed=(1, 4)))
    np.testing.assert_array_equal(got_chw, img.transpose(2, 0, 1).astype(np.float32))


# ------------------------------------------------- transpose, hwc_to_chw, cast

def test_transpose_and_hwc_to_chw_match_numpy_as_contiguous_copies():
    img = sample_image((4, 5, 3), np.uint8)
    for perm in [(2, 0, 1), (1, 0, 2), (0, 1, 2), [2, 1, 0], np.array([1, 2, 0])]:
        out = image.transpose(img, perm)
        np.testing.assert_array_equal(out, np.transpose(img, tuple(perm)))
        assert out.flags.c_contiguous and not np.shares_memory(out, img)
    chw = image.hwc_to_chw(img[:, ::-1])
    np.testing.assert_array_equal(chw, img[:, ::-1].transpose(2, 0, 1))
    assert chw.flags.c_contiguous
    batch = sample_image((2, 4, 5, 3), np.float32)
    np.testing.assert_array_equal(image.hwc_to_chw(batch), batch.transpose(0, 3, 1, 2))
    flags = np.zeros((2, 3), bool)
    assert image.transpose(flags, (1, 0)).shape == (3, 2)


@numba.njit(cache=True)
def layout(img):
    return (image.transpose(img, (1, 2, 0)), image.hwc_to_chw(img),
            image.cast(img, np.float32), image.cast(img, "int16"),
            image.cast(image.hwc_to_chw(img), np.dtype(np.float64)))


def test_transpose_hwc_to_chw_and_cast_in_nopython():
    img = sample_image((4, 5, 3), np.uint8)
    t, chw, f32, i16, f64 = layout(img)
    np.testing.assert_array_equal(t, img.transpose(1, 2, 0))
    np.testing.assert_array_equal(chw, img.transpose(2, 0, 1))
    assert f32.dtype == np.float32 and i16.dtype == np.int16 and f64.dtype == np.float64
    np.testing.assert_array_equal(f64, img.transpose(2, 0, 1).astype(np.float64))
    batch = np.zeros((2, 4, 5, 3), np.uint8)
    assert numba.njit(lambda x: image.hwc_to_chw(x))(batch).shape == (2, 3, 4, 5)


@pytest.mark.parametrize("src,dst", [
    (np.uint8, np.float32), (np.float32, np.uint8), (np.float64, np.int32),
    (np.int32, np.int8), (np.int16, np.bool_), (np.float32, np.bool_), (np.bool_, np.float64),
])
def test_cast_matches_numpy_astype(src, dst):
    values = np.array([[-3.7, -1.0, -0.5, 0.0, 0.5, 1.5, 2.9, 100.0]]).reshape(2, 4, 1)
    if np.dtype(src).kind == "u":
        values = np.abs(values)
    img = values.astype(src)
    for arg in (dst, np.dtype(dst), np.dtype(dst).name):
        out = image.cast(img, arg)
        assert out.dtype == dst and out.flags.c_contiguous
        np.testing.assert_array_equal(out, img.astype(dst))
    fortran = np.asfortranarray(img[..., 0])
    assert image.cast(fortran, dst).flags.c_contiguous


def test_cast_lifts_into_fused_kernels():
    images = np.random.default_rng(5).integers(0, 256, (64, 6, 7, 3), dtype=np.uint8)
    fn = lambda x: image.cast(x, np.float32) / 255.0  # noqa: E731
    options = nd.Options()
    options.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(images).map(fn).batch(16)
    pipe = ds.with_options(options).compile()
    got = np.concatenate(list(pipe))
    np.testing.assert_array_equal(got, images.astype(np.float32) / np.float32(255.0))
    assert "elementwise, inlined" in pipe.explain()


def test_layout_and_cast_errors():
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="transpose: perm is not a permutation"):
        image.transpose(img, (0, 0, 1))
    with pytest.raises(ValueError, match="transpose: perm is not a permutation"):
        image.transpose(img, (0, 1, 3))
    with pytest.raises(ValueError, match="transpose: perm must have 3 values, got 2"):
        image.transpose(img, (1, 0))
    with pytest.raises(ValueError, match="transpose: perm has 2 axes but the array has 3"):
        numba.njit(lambda x: image.transpose(x, (1, 0)))(img)
    with pytest.raises(TypeError, match="transpose: perm must be a sequence"):
        image.transpose(img, 3)
    with pytest.raises(ValueError, match=r"hwc_to_chw: expected an \(H, W, C\) or"):
        image.hwc_to_chw(np.zeros((4, 5)))
    with pytest.raises(TypingError, match="hwc_to_chw: expected"):
        numba.njit(lambda x: image.hwc_to_chw(x))(np.zeros((4, 5)))
    with pytest.raises(TypeError, match="cast: unsupported target dtype complex64"):
        image.cast(img, np.complex64)
    with pytest.raises(TypeError, match="cast: unsupported target dtype float16"):
        numba.njit(lambda x: image.cast(x, np.float16))(img)
    with pytest.raises(TypeError, match="cast: 'nonsense' is not a dtype"):
        image.cast(img, "nonsense")
    with pytest.raises(TypeError, match="cast: unsupported image dtype <U1"):
        image.cast(np.array(["a"]), np.float32)
