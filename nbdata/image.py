"""CPU image ops that compile inside fused map stages.

Each op is a Python function that runs its Numba implementation; inside compiled
functions the implementation is called directly (an overload). Traced with symbolic
inputs (a fused map whose function only crops, flips and normalizes), the ops build
expressions instead: the fused kernel then reads each output pixel straight from the
source image, with no intermediate arrays, and computes the same values.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from nbdata import random
from nbdata.train.graph import is_symbolic, record

# Stream ids of the random draws (the ASCII of their names), so that each op
# draws independent values even when given the same (seed, counter).
_CROP_TOP_STREAM = 0x63726F705F746F70  # b"crop_top"
_CROP_LEFT_STREAM = 0x63726F705F6C6674  # b"crop_lft"
_FLIP_STREAM = 0x666C69705F6C5F72  # b"flip_l_r"


@numba.njit(nogil=True, cache=True)
def _random_crop(image, size, seed):
    """Crops a random (h, w) window out of an HWC image.

    Stateless, like ``tf.image.stateless_random_crop``: the window depends
    only on ``seed``. The top offset is uniform in [0, H - h] and the left
    offset uniform in [0, W - w], drawn independently as
    ``random.randint(random.key(seed[0], stream, 0), seed[1], 0, H - h + 1)``
    (and likewise for W) with a distinct stream id for each.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        size: The crop size ``(h, w, c)``; ``c`` must equal C.
        seed: ``(seed, counter)``, two int64 values (a tuple or array); pass
            e.g. the element index from ``Dataset.enumerate`` as the counter
            to crop each element differently.

    Returns:
        The (h, w, C) window as a view of ``image`` (no copy, so a fused map
        allocates nothing for it; ``.copy()`` it before writing into it).

    Raises:
        ValueError: If the crop does not fit in the image or ``c != C``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(5 * 6 * 3, dtype=np.uint8).reshape(5, 6, 3)
        >>> crop = image.random_crop(img, (3, 4, 3), seed=(7, 0))
        >>> crop.shape, crop.dtype
        ((3, 4, 3), dtype('uint8'))
        >>> again = image.random_crop(img, (3, 4, 3), seed=(7, 0))
        >>> np.array_equal(again, crop)
        True
    """
    height, width, channels = image.shape
    crop_height, crop_width, crop_channels = size
    if crop_channels != channels:
        raise ValueError(
            "random_crop: size has " + str(crop_channels)
            + " channels but the image has " + str(channels)
        )
    if (crop_height < 0 or crop_width < 0
            or crop_height > height or crop_width > width):
        raise ValueError(
            "random_crop: crop size " + str(crop_height) + "x"
            + str(crop_width) + " does not fit in the image of size "
            + str(height) + "x" + str(width)
        )
    top = random.randint(
        random.key(seed[0], _CROP_TOP_STREAM, 0), seed[1],
        0, height - crop_height + 1,
    )
    left = random.randint(
        random.key(seed[0], _CROP_LEFT_STREAM, 0), seed[1],
        0, width - crop_width + 1,
    )
    return image[top:top + crop_height, left:left + crop_width]


@numba.njit(nogil=True, cache=True)
def _flip_left_right(image):
    """Mirrors an HWC image along its width axis.

    Args:
        image: An (H, W, C) array of any numeric dtype.

    Returns:
        A new C-contiguous array equal to ``image[:, ::-1]``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(1, 3, 2)
        >>> image.flip_left_right(img)[0].tolist()
        [[4, 5], [2, 3], [0, 1]]
    """
    return image[:, ::-1].copy()


@numba.njit(nogil=True, cache=True)
def _random_flip_left_right(image, seed):
    """Mirrors an HWC image along its width axis with probability 1/2.

    Stateless, like ``tf.image.stateless_random_flip_left_right``: whether
    it flips depends only on ``seed``, through
    ``random.uniform(random.key(seed[0], stream, 0), seed[1]) < 0.5``.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        seed: ``(seed, counter)``, two int64 values (a tuple or array); pass
            e.g. the element index as the counter.

    Returns:
        A view of ``image``, mirrored or not (no copy; ``.copy()`` it before
        writing into it).

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(1, 3, 2)
        >>> outs = [image.random_flip_left_right(img, (1, i)) for i in range(1000)]
        >>> 400 < sum(int(out[0, 0, 0]) == 4 for out in outs) < 600
        True
    """
    step = -1 if random.uniform(random.key(seed[0], _FLIP_STREAM, 0), seed[1]) < 0.5 else 1
    return image[:, ::step]


def _channel_values(values, channels):
    """``values`` as ``channels`` float32 values (Python form; see the overload)."""
    return _per_channel(values, channels)


@overload(_channel_values, jit_options={"nogil": True})
def _channel_values_nopython(values, channels):
    # A float32 vector of the right length is used as it is: no per-call allocation.
    if isinstance(values, types.Array) and values.ndim == 1 and values.dtype == types.float32:
        def take(values, channels):
            if values.size == channels:
                return values
            return _per_channel(values, channels)
        return take
    return lambda values, channels: _per_channel(values, channels)


@numba.njit(nogil=True, cache=True)
def _per_channel(values, channels):
    """Return a number or per-channel sequence as `channels` float32 values."""
    flat = np.asarray(values).ravel().astype(np.float32)
    if flat.size == channels:
        return flat
    if flat.size == 1:
        return np.full(channels, flat[0])
    raise ValueError(
        "normalize: mean and std must be scalars or have one value per "
        "channel (" + str(channels) + "), got " + str(flat.size) + " values"
    )


@numba.njit(nogil=True, cache=True)
def _normalize(image, mean, std):
    """Standardizes an HWC image: ``(image - mean) / std`` in float32.

    The image, ``mean`` and ``std`` are each rounded to float32 first and
    the arithmetic is float32, so the result is bit-identical to
    ``(image.astype(np.float32) - np.float32(mean)) / np.float32(std)`` in
    NumPy.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        mean: A number, or one number per channel (array, tuple or list).
        std: A number, or one number per channel (array, tuple or list).

    Returns:
        A new C-contiguous float32 array of the image's shape.

    Raises:
        ValueError: If ``mean`` or ``std`` has neither 1 nor C values.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.array([[[0, 128, 255]]], dtype=np.uint8)
        >>> image.normalize(img, 127.5, 127.5)
        array([[[-1.        ,  0.00392157,  1.        ]]], dtype=float32)
        >>> image.normalize(img, np.array([0.0, 128.0, 255.0]), (1, 2, 4))
        array([[[0., 0., 0.]]], dtype=float32)
    """
    height, width, channels = image.shape
    mean_c = _channel_values(mean, channels)
    std_c = _channel_values(std, channels)
    out = np.empty((height, width, channels), dtype=np.float32)
    if channels == 3:
        # RGB, unrolled: channel constants stay in registers (about 2x faster).
        m0, m1, m2 = mean_c[0], mean_c[1], mean_c[2]
        s0, s1, s2 = std_c[0], std_c[1], std_c[2]
        for y in range(height):
            for x in range(width):
                out[y, x, 0] = (np.float32(image[y, x, 0]) - m0) / s0
                out[y, x, 1] = (np.float32(image[y, x, 1]) - m1) / s1
                out[y, x, 2] = (np.float32(image[y, x, 2]) - m2) / s2
        return out
    for y in range(height):
        for x in range(width):
            for c in range(channels):
                value = np.float32(image[y, x, c])
                out[y, x, c] = (value - mean_c[c]) / std_c[c]
    return out


# ---------------------------------------------------------------- dispatch

def _symbolic(*values) -> bool:
    from nbdata.compiler.elementwise import Sym
    return any(isinstance(v, Sym) for v in values)


def _draw_window(image, size, seed):
    from nbdata.compiler import elementwise as ew
    height, width, channels = image.expr.shape if image.expr.kind != "window" else image.expr.shape
    crop_height, crop_width, crop_channels = (int(v) for v in size)
    if crop_channels != channels or crop_height > height or crop_width > width:
        raise ew.NotElementwise("a crop that does not fit")
    top = ew.draw("randint", seed[0], seed[1], _CROP_TOP_STREAM, 0, height - crop_height + 1)
    left = ew.draw("randint", seed[0], seed[1], _CROP_LEFT_STREAM, 0, width - crop_width + 1)
    return ew.window(image, (crop_height, crop_width, channels), top, left, False)


def random_crop(image, size, seed):
    if is_symbolic(image, size, seed):
        return record(random_crop, (image, size, seed), {}, "random_crop")
    return _draw_window(image, size, seed) if _symbolic(image, *seed) else _random_crop(image, size, seed)


def flip_left_right(image):
    if is_symbolic(image):
        return record(flip_left_right, (image,), {}, "flip_left_right")
    if _symbolic(image):
        from nbdata.compiler import elementwise as ew
        return ew.flipped(image, True)
    return _flip_left_right(image)


def random_flip_left_right(image, seed):
    if is_symbolic(image, seed):
        return record(random_flip_left_right, (image, seed), {}, "random_flip_left_right")
    if _symbolic(image, *seed):
        from nbdata.compiler import elementwise as ew
        flip = ew.draw("uniform", seed[0], seed[1], _FLIP_STREAM) < 0.5
        return ew.flipped(image, flip)
    return _random_flip_left_right(image, seed)


def normalize(image, mean, std):
    if is_symbolic(image, mean, std):
        return record(normalize, (image, mean, std), {}, "normalize")
    if _symbolic(image):
        from nbdata.compiler import elementwise as ew
        shape = image.expr.shape
        if image.expr.dtype.kind not in "biuf" or len(shape) != 3 or _symbolic(mean, std):
            raise ew.NotElementwise("normalize of a non-image or with symbolic constants")
        channels = shape[2]
        m = ew.channel_constant(_per_channel(np.asarray(mean, np.float64), channels), shape)
        s = ew.channel_constant(_per_channel(np.asarray(std, np.float64), channels), shape)
        return (image.astype(np.float32) - m) / s
    return _normalize(image, mean, std)


for _public, _impl in ((random_crop, _random_crop), (flip_left_right, _flip_left_right),
                       (random_flip_left_right, _random_flip_left_right), (normalize, _normalize)):
    _public.__doc__ = _impl.__doc__


@overload(random_crop, jit_options={"nogil": True})
def _random_crop_nopython(image, size, seed):
    return lambda image, size, seed: _random_crop(image, size, seed)


@overload(flip_left_right, jit_options={"nogil": True})
def _flip_left_right_nopython(image):
    return lambda image: _flip_left_right(image)


@overload(random_flip_left_right, jit_options={"nogil": True})
def _random_flip_left_right_nopython(image, seed):
    return lambda image, seed: _random_flip_left_right(image, seed)


@overload(normalize, jit_options={"nogil": True})
def _normalize_nopython(image, mean, std):
    return lambda image, mean, std: _normalize(image, mean, std)


# JPEG coding (libjpeg-turbo through the optional [image] extra), as tf.image has it.
from nbdata.io.jpeg import decode_jpeg, encode_jpeg  # noqa: E402,F401
