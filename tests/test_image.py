"""Tests for nbdata.image: Python, nopython and prange callers agree."""

import numba
import numpy as np
import pytest

import nbdata as nd
from nbdata import random
from nbdata.primitives import image
from nbdata.primitives.image import geometry

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def distinct_image(height, width, channels, dtype=np.int32):
    """An image whose pixels are all different, so any crop has one origin."""
    return np.arange(height * width * channels, dtype=dtype).reshape(
        height, width, channels)


def crop_offsets(seed, counter, height, width, crop_height, crop_width):
    """The offsets random_crop documents, drawn here independently."""
    top = random.randint(random.key(seed, geometry._CROP_TOP_STREAM, 0),
                         counter, 0, height - crop_height + 1)
    left = random.randint(random.key(seed, geometry._CROP_LEFT_STREAM, 0),
                          counter, 0, width - crop_width + 1)
    return int(top), int(left)


def find_origins(crop, img):
    """All (top, left) at which crop appears in img."""
    h, w = crop.shape[:2]
    return [(y, x)
            for y in range(img.shape[0] - h + 1)
            for x in range(img.shape[1] - w + 1)
            if np.array_equal(img[y:y + h, x:x + w], crop)]


def augment_python(images, seed, mean, std):
    return np.stack([
        image.normalize(
            image.random_flip_left_right(
                image.random_crop(images[i], (5, 6, 3), (seed, i)), (seed, i)),
            mean, std)
        for i in range(len(images))
    ])


@numba.njit(cache=True)
def _put(out, i, value):
    # An element loop: ``out[i] = value`` compiles Numba's shape-mismatch message (seconds).
    for y in range(out.shape[1]):
        for x in range(out.shape[2]):
            for c in range(out.shape[3]):
                out[i, y, x, c] = value[y, x, c]


@numba.njit(cache=True)
def augment_serial(images, seed, mean, std):
    out = np.empty((len(images), 5, 6, 3), np.float32)
    for i in range(len(images)):
        crop = image.random_crop(images[i], (5, 6, 3), (seed, i))
        flipped = image.random_flip_left_right(crop, (seed, i))
        _put(out, i, image.normalize(flipped, mean, std))
    return out


@numba.njit(parallel=True, cache=True)
def augment_parallel(images, seed, mean, std):
    out = np.empty((len(images), 5, 6, 3), np.float32)
    for i in numba.prange(len(images)):
        crop = image.random_crop(images[i], (5, 6, 3), (seed, i))
        flipped = image.random_flip_left_right(crop, (seed, i))
        _put(out, i, image.normalize(flipped, mean, std))
    return out


@numba.njit(cache=True)
def normalize_in_nopython(img, mean, std):
    return image.normalize(img, mean, std)


def test_python_nopython_and_prange_agree_at_any_thread_count():
    images = np.random.default_rng(0).integers(
        0, 256, (64, 9, 10, 3), dtype=np.uint8)
    mean, std = MEAN, STD
    expected = augment_python(images, 3, mean, std)
    np.testing.assert_array_equal(augment_serial(images, 3, mean, std),
                                  expected)
    default_threads = numba.get_num_threads()
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            np.testing.assert_array_equal(
                augment_parallel(images, 3, mean, std), expected)
    finally:
        numba.set_num_threads(default_threads)


def test_random_crop_in_a_user_lambda_like_a_fused_map():
    user_fn = lambda i, img: image.random_crop(img, (4, 4, 3), seed=(7, i))  # noqa: E731
    compiled = numba.njit(user_fn)
    img = distinct_image(8, 9, 3, np.uint8)
    for i in range(20):
        np.testing.assert_array_equal(compiled(i, img), user_fn(i, img))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32])
@pytest.mark.parametrize("seed", [11, -11])
def test_random_crop_is_the_slice_at_the_documented_offsets(dtype, seed):
    img = distinct_image(7, 8, 3, dtype)
    for counter in range(-25, 25):
        crop = image.random_crop(img, (3, 5, 3), (seed, counter))
        top, left = crop_offsets(seed, counter, 7, 8, 3, 5)
        assert crop.dtype == img.dtype
        assert np.shares_memory(crop, img)  # a view, no copy
        np.testing.assert_array_equal(crop, img[top:top + 3, left:left + 5])
        assert find_origins(crop, img) == [(top, left)]


def test_random_crop_reaches_every_offset_and_no_other():
    img = distinct_image(6, 7, 2)
    seen = set()
    for counter in range(1000):
        crop = image.random_crop(img, (2, 3, 2), (5, counter))
        (origin,) = find_origins(crop, img)
        seen.add(origin)
    assert seen == {(y, x) for y in range(5) for x in range(5)}


def test_random_crop_depends_on_seed_and_counter_only():
    img = distinct_image(16, 16, 1)
    first = image.random_crop(img, (4, 4, 1), (1, 0))
    np.testing.assert_array_equal(image.random_crop(img, (4, 4, 1), (1, 0)),
                                  first)
    assert len({image.random_crop(img, (4, 4, 1), (1, c))[0, 0, 0]
                for c in range(20)}) > 5
    assert len({image.random_crop(img, (4, 4, 1), (s, 0))[0, 0, 0]
                for s in range(20)}) > 5


def test_random_crop_accepts_non_contiguous_input_and_returns_a_view():
    img = distinct_image(6, 10, 3)[:, ::2]
    crop = image.random_crop(img, (6, 5, 3), (0, 0))
    np.testing.assert_array_equal(crop, img)
    assert np.shares_memory(crop, img)


def test_random_crop_rejects_a_crop_larger_than_the_image():
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="crop size 10x4 does not fit in the "
                                         "image of size 8x8"):
        image.random_crop(img, (10, 4, 3), (0, 0))
    with pytest.raises(ValueError, match="crop size 4x9 .* 8x8"):
        numba.njit(lambda x: image.random_crop(x, (4, 9, 3), (0, 0)))(img)


def test_random_crop_rejects_a_channel_mismatch():
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="size has 1 channels but the image "
                                         "has 3"):
        image.random_crop(img, (4, 4, 1), (0, 0))


def test_flip_left_right_matches_numpy():
    for dtype in (np.uint8, np.int16, np.float64):
        img = distinct_image(3, 5, 2, dtype)
        flipped = image.flip_left_right(img)
        np.testing.assert_array_equal(flipped, img[:, ::-1])
        assert flipped.dtype == dtype
        assert flipped.flags.c_contiguous
        assert not np.shares_memory(flipped, img)


def test_random_flip_left_right_flips_half_the_time_without_copying():
    img = distinct_image(4, 5, 3, np.uint8)
    flips = 0
    for counter in range(2000):
        out = image.random_flip_left_right(img, (9, counter))
        assert np.shares_memory(out, img)  # a view: fused maps allocate nothing for it
        if np.array_equal(out, img[:, ::-1]):
            flips += 1
        else:
            np.testing.assert_array_equal(out, img)
    # Standard deviation of the count is sqrt(2000) / 2 ~ 22.
    assert abs(flips - 1000) < 120


def test_random_flip_is_independent_of_random_crop_draws():
    # Same (seed, counter) for both ops: the flip decision must not simply
    # follow the crop's left offset.
    img = distinct_image(4, 8, 1)
    pairs = set()
    for counter in range(400):
        crop = image.random_crop(img, (4, 7, 1), (2, counter))
        (origin,) = find_origins(crop, img)
        flipped = image.random_flip_left_right(img, (2, counter))
        pairs.add((origin[1], bool(flipped[0, 0, 0] != img[0, 0, 0])))
    assert pairs == {(0, False), (0, True), (1, False), (1, True)}


@pytest.mark.parametrize("dtype, mean, std", [
    (np.uint8, 127.5, 58.0),
    (np.uint8, 3, 2),
    (np.uint8, MEAN, STD),
    (np.uint8, MEAN.astype(np.float32), STD.astype(np.float32)),
    (np.uint8, tuple(MEAN), tuple(STD)),
    (np.uint8, np.float32(0.5), np.array([0.1, 0.2, 0.3])),
    (np.int16, MEAN, STD),
    (np.float64, 127.5, 58.0),
])
def test_normalize_matches_numpy_float32_bit_for_bit(dtype, mean, std):
    img = np.random.default_rng(1).integers(0, 256, (6, 7, 3)).astype(dtype)
    expected = ((img.astype(np.float32) - np.asarray(mean, np.float32))
                / np.asarray(std, np.float32))
    for got in (image.normalize(img, mean, std),
                normalize_in_nopython(img, mean, std)):
        assert got.dtype == np.float32
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)


def test_normalize_rejects_a_wrong_number_of_channel_values():
    img = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(ValueError, match=r"one value per channel \(3\), got "
                                         r"2 values"):
        image.normalize(img, np.array([1.0, 2.0]), 1.0)


# ------------------------------------------------- lifted into fused kernels

def _fused_and_reference(fn, images):
    o_fused, o_ref = nd.Options(), nd.Options()
    o_fused.fusion_min_rows = 0
    o_ref.fusion = False
    ds = nd.Dataset.from_tensor_slices(images).enumerate().map(fn).batch(16)
    pipe = ds.with_options(o_fused).compile()
    got = list(pipe)
    want = list(ds.with_options(o_ref))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert pipe.stats().fallback_rows == 0
    return pipe.explain()


@pytest.mark.parametrize("case", [
    lambda i, x: image.random_crop(x, (5, 6, 3), seed=(1, i)),
    lambda i, x: image.random_flip_left_right(x, seed=(2, i)),
    lambda i, x: image.flip_left_right(x),
    lambda i, x: image.normalize(x, 127.5, 64.0),
    lambda i, x: image.normalize(image.random_crop(x, (5, 6, 3), seed=(1, i)), MEAN, STD),
    lambda i, x: image.normalize(image.random_flip_left_right(
        image.random_crop(x, (5, 6, 3), seed=(1, i)), seed=(2, i)), MEAN, STD),
    lambda i, x: image.random_crop(image.random_crop(x, (7, 8, 3), seed=(1, i)), (4, 4, 3), seed=(3, i)),
    lambda i, x: image.normalize(image.flip_left_right(image.random_flip_left_right(x, (4, i))), MEAN, STD) * 2.0,
])
def test_image_ops_lift_into_fused_kernels_bit_for_bit(case):
    images = np.random.default_rng(3).integers(0, 256, (100, 9, 10, 3), dtype=np.uint8)
    text = _fused_and_reference(case, images)
    assert "elementwise, inlined" in text


def test_image_ops_that_do_not_lift_still_fuse_as_compiled_calls():
    images = np.random.default_rng(4).integers(0, 256, (50, 9, 10, 3), dtype=np.uint8)
    # a crop of a flipped image reads a mirrored window: called as compiled code instead
    text = _fused_and_reference(
        lambda i, x: image.random_crop(image.random_flip_left_right(x, (1, i)), (5, 5, 3), (2, i)),
        images)
    assert "Numba-compiled call" in text


@pytest.mark.parametrize("dtype,channels", [(np.float32, 1), (np.uint16, 4), (np.int8, 3)])
def test_lifted_image_ops_on_other_dtypes_and_channel_counts(dtype, channels):
    rng = np.random.default_rng(5)
    images = (rng.random((40, 8, 7, channels)) * 100).astype(dtype)
    mean, std = np.arange(1, channels + 1, dtype=np.float64), np.full(channels, 3.0)
    _fused_and_reference(lambda i, x: image.normalize(
        image.random_flip_left_right(image.random_crop(x, (6, 5, channels), (9, i)), (8, i)),
        mean, std), images)
