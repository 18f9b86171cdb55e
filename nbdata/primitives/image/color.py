"""``nd.image``'s color ops: brightness, contrast, saturation, grayscale."""


import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError
from numba.np.numpy_support import as_dtype

from nbdata import random
from nbdata.errors import InvalidArgumentError
from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.gpu import Step, check_image, f32, seed_pair, type_name
from nbdata.primitives.image.arguments import seed_counter, typing_pair
from nbdata.primitives.table import define


# ------------------------------------------------------------------ color
#
# TensorFlow's color ops work in float32 on images converted as
# ``tf.image.convert_image_dtype`` converts them: integers are scaled to [0, 1]
# (``float32(x) * float32(1 / MAX)``), float32 stays as it is, float64 is cast to
# float32 (float16 too: TF computes half values in float32 and rounds them back), and
# the result is converted back to the image's dtype (integers: ``v * (MAX + 0.5)``,
# clamped to the dtype's range, truncated). The kernels below are TF's CPU kernels
# operation for operation, in float32 and without fused multiply-adds, so the values
# are TensorFlow's bit for bit (tested against TensorFlow 2.21). One exception:
# TensorFlow overflows when it clamps int64 and uint64 images to their maximum; here
# they clamp to the largest float32 below it, as TF does for int32 and uint32.

_BRIGHTNESS_STREAM = 0x6272696768745F64  # b"bright_d": random_brightness's delta
_CONTRAST_STREAM = 0x636F6E7472617374  # b"contrast": random_contrast's factor
_SATURATION_STREAM = 0x7361747572617465  # b"saturate": random_saturation's factor
_HUE_STREAM = 0x6875655F64656C74  # b"hue_delt": random_hue's delta


def _conversion(op: str, dtype) -> tuple:
    """``(to_float, from_float, low, high, kernel dtype)`` for images of ``dtype``: the
    float32 scale into [0, 1], the scale back, the float32 clamp range, and the dtype a
    kernel writes (float32 for float16 images, rounded to float16 after)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize <= 8:
        inf = np.float32(np.inf)
        kernel = np.dtype(np.float32) if dtype == np.float16 else dtype
        return np.float32(1.0), np.float32(1.0), -inf, inf, kernel
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        high = np.float32(info.max)
        if int(high) > info.max:   # MAX does not round to a float32 at or below it
            high = np.nextafter(high, np.float32(0))
        return (np.float32(1.0 / info.max), np.float32(info.max + 0.5), np.float32(info.min),
                high, dtype)
    raise TypeError(f"{op}: image dtype must be either floating point or integer, got {dtype}")


def _typing_conversion(op: str, image) -> tuple:
    """:func:`_conversion` for a Numba array type (float16 images run eagerly only)."""
    if not (isinstance(image, types.Array) and isinstance(image.dtype, (types.Integer, types.Float))
            and image.dtype != types.float16):
        raise TypingError(f"{op}: expected an array of integers, float32 or float64, got {image}")
    to_float, from_float, low, high, kernel = _conversion(op, as_dtype(image.dtype))
    return to_float, from_float, low, high, kernel.type


def _color_call(op: str, kernel, image, *args, rgb_to: int | None = None, min_rank: int = 0,
                op_name: str = ""):
    """Run a color kernel eagerly: checks, conversion constants, the output array and
    float16's rounding. ``rgb_to``: the image must be RGB (last dim 3), and the output
    has that many channels."""
    image = np.asarray(image)
    to_float, from_float, low, high, dtype = _conversion(op, image.dtype)
    if image.ndim < min_rank:
        raise InvalidArgumentError(f"{op}: input must be at least {min_rank}-D, got shape "
                                   f"{list(image.shape)}", op_name)
    if rgb_to is not None and (image.ndim == 0 or image.shape[-1] != 3):
        have = image.shape[-1] if image.ndim else 0
        raise InvalidArgumentError(f"{op}: input must have 3 channels but instead has {have} "
                                   "channels.", op_name)
    shape = image.shape if rgb_to is None else image.shape[:-1] + (rgb_to,)
    work = image.astype(np.float32) if image.dtype == np.float16 else image
    out = kernel(work, *args, to_float, from_float, low, high, np.empty(shape, dtype))
    return out.astype(np.float16) if image.dtype == np.float16 else out


def _scalar(op: str, name: str, value, op_name: str) -> float:
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "biuf":
        raise InvalidArgumentError(f"{op}: {name} must be scalar: {list(arr.shape)}", op_name)
    return float(arr)


@numba.njit(nogil=True, cache=True)
def _unit_draw(seed, counter, stream):
    return random.uniform(random.key(seed, stream, 0), counter)


def _drawn(op: str, seed, stream: int, low: float, high: float) -> np.float32:
    """``float32(low + (high - low) * u)`` for u uniform in [0, 1) drawn at ``seed``."""
    s, counter = seed_counter(op, seed)
    return np.float32(low + (high - low) * _unit_draw(s, counter, np.int64(stream)))


# The value formulas, written once as plain functions: the CPU kernels call them through
# Numba, the GPU steps as numba-cuda device functions.

def _brightness_value(x, delta, to_float, from_float, low, high):
    """One value of adjust_brightness, in float32 (the caller casts to the image's dtype)."""
    return min(max((np.float32(x) * to_float + delta) * from_float, low), high)


def _contrast_value(x, mean, factor, to_float, from_float, low, high):
    """One value of adjust_contrast given its channel's mean (of the float32 values)."""
    v = np.float32(x) * to_float
    return min(max(((v - mean) * factor + mean) * from_float, low), high)


def _gray_value(r, g, b, to_float, from_float, low, high):
    """One pixel of rgb_to_grayscale: TF's weights, summed in this order, in float32."""
    r = np.float32(r) * to_float
    g = np.float32(g) * to_float
    b = np.float32(b) * to_float
    gray = (r * np.float32(0.2989) + g * np.float32(0.5870)) + b * np.float32(0.1140)
    return min(max(gray * from_float, low), high)


def _saturated_rgb(r, g, b, factor):
    """TF's AdjustSaturation of one float32 RGB pixel: to hue, saturation and value (the
    hue offsets added in float64, as TF's C++ adds ``2.0 / 6.0`` and ``4.0 / 6.0``),
    saturation scaled and clipped to [0, 1], back to RGB."""
    vv = max(r, max(g, b))
    spread = vv - min(r, min(g, b))
    s = spread / vv if vv > 0 else np.float32(0.0)
    h = np.float32(0.0)
    if not spread <= 0.0:   # no division by a zero spread; NaN goes on, as in TF
        norm = np.float32(1.0) / (np.float32(6.0) * spread)
        if r == vv:
            h = norm * (g - b)
        elif g == vv:
            h = np.float32(np.float64(norm * (b - r)) + 2.0 / 6.0)
        else:
            h = np.float32(np.float64(norm * (r - g)) + 4.0 / 6.0)
    if h < 0.0:
        h = h + np.float32(1.0)
    s = min(np.float32(1.0), max(np.float32(0.0), s * factor))
    c = s * vv
    m = vv - c
    dh = h * np.float32(6.0)
    category = int(dh)
    fmodu = dh
    while fmodu <= 0:
        fmodu += np.float32(2.0)
    while fmodu >= np.float32(2.0):
        fmodu -= np.float32(2.0)
    x = c * (np.float32(1.0) - abs(fmodu - np.float32(1.0)))
    zero = np.float32(0.0)
    if category == 0:
        rr, gg, bb = c, x, zero
    elif category == 1:
        rr, gg, bb = x, c, zero
    elif category == 2:
        rr, gg, bb = zero, c, x
    elif category == 3:
        rr, gg, bb = zero, x, c
    elif category == 4:
        rr, gg, bb = x, zero, c
    elif category == 5:
        rr, gg, bb = c, zero, x
    else:
        rr, gg, bb = zero, zero, zero
    return rr + m, gg + m, bb + m


def _hue_rgb(r, g, b, delta):
    """TF's AdjustHue of one float32 RGB pixel: its hue as a position in [0, 6) between
    the pixel's largest and smallest value (``rgb_to_hv_range``), moved by ``6 * delta``
    and wrapped, and back to RGB with the same two values."""
    if r < g:
        if b < r:
            high, mid, low, category = g, r, b, 1
        elif b > g:
            high, mid, low, category = b, g, r, 3
        else:
            high, mid, low, category = g, b, r, 2
    elif b < g:
        high, mid, low, category = r, g, b, 0
    elif b > r:
        high, mid, low, category = b, r, g, 4
    else:
        high, mid, low, category = r, b, g, 5
    h = np.float32(0.0)
    if high != low:
        ratio = (mid - low) / (high - low)
        h = np.float32(category) + (ratio if category % 2 == 0 else np.float32(1.0) - ratio)
    h = h + delta * np.float32(6.0)
    while h < 0:
        h += np.float32(6.0)
    while h >= np.float32(6.0):
        h -= np.float32(6.0)
    category = int(h)
    ratio = h - np.float32(category)
    mid = low + (ratio if category % 2 == 0 else np.float32(1.0) - ratio) * (high - low)
    if category == 0:
        return high, mid, low
    if category == 1:
        return mid, high, low
    if category == 2:
        return low, high, mid
    if category == 3:
        return low, mid, high
    if category == 4:
        return mid, low, high
    return high, low, mid


_brightness_cpu = numba.njit(nogil=True, cache=True)(_brightness_value)
_contrast_cpu = numba.njit(nogil=True, cache=True)(_contrast_value)
_gray_cpu = numba.njit(nogil=True, cache=True)(_gray_value)
_saturated_cpu = numba.njit(nogil=True, cache=True, error_model="numpy")(_saturated_rgb)
_hue_cpu = numba.njit(nogil=True, cache=True, error_model="numpy")(_hue_rgb)


class _ColorStep(Step):
    """A color op's GPU step: its constant scalar argument, or one drawn per element
    (``drawn = (stream, low, high)``, as the random ops draw it on the CPU)."""

    scalar_name = "value"

    def __init__(self, value=None, drawn=None, seed=None):
        self.value = value
        self.drawn = drawn
        if drawn is not None:
            self.seed, self.offset = seed_pair(self.name, seed)
            self.param_count = 1

    def out_dtype(self, dtype):
        if dtype == np.float16:
            raise TypeError(f"nd.gpu.{self.name}: float16 images run on the CPU only")
        _conversion(self.name, dtype)
        return dtype

    def params(self, shape, seed_base, n, sizes=None):
        if self.drawn is None:
            return []
        stream, low, high = self.drawn
        return [np.array([_drawn(self.name, (self.seed, seed_base + self.offset + j), stream,
                                 low, high) for j in range(n)], np.float32)]

    def scalar(self, names: list) -> str:
        """The op's scalar argument for element ``b`` in kernel source."""
        return f"{names[-1]}[b]" if self.drawn is not None else f32(self.value)

    def converted(self, dtype) -> tuple:
        """The float32 conversion constants of ``dtype`` as kernel source."""
        return tuple(f32(v) for v in _conversion(self.name, dtype)[:4])

    def describe(self):
        if self.drawn is None:
            return f"{self.name}({self.value})"
        return f"{self.name}(drawn in [{self.drawn[1]}, {self.drawn[2]}), seed={self.seed})"


# -- brightness

@numba.njit(nogil=True, cache=True)
def _adjust_brightness(image, delta, to_float, from_float, low, high, out):
    x = np.ascontiguousarray(image).reshape(-1)
    o = out.reshape(-1)
    for i in range(x.size):
        o[i] = _brightness_cpu(x[i], delta, to_float, from_float, low, high)
    return out


class _Brightness(_ColorStep):
    name = "adjust_brightness"

    def sampler(self, g, names, in_shape, inner):
        def brightness(y, x, c):
            value, dtype = inner(y, x, c)
            to_float, from_float, low, high = self.converted(dtype)
            v = g.fresh("v")
            g.emit(f"{v} = {type_name(dtype)}({g.device_function(_brightness_value)}({value}, "
                   f"{self.scalar(names)}, {to_float}, {from_float}, {low}, {high}))")
            return v, dtype
        return brightness


def _lift_brightness_of(image, delta):
    """The brightness formula as an expression (``delta`` a float32 value or expression)."""
    if not isinstance(image, expr.Expr) or image.dtype.kind not in "iuf" \
            or image.dtype == np.float16:
        raise NotElementwise("adjust_brightness of a non-image")
    to_float, from_float, low, high, dtype = _conversion("adjust_brightness", image.dtype)
    v = expr.apply_ufunc(np.multiply, expr.cast(image, np.float32), to_float)
    v = expr.apply_ufunc(np.multiply, expr.apply_ufunc(np.add, v, delta), from_float)
    if dtype.kind in "iu":
        v = expr.apply_ufunc(np.minimum, expr.apply_ufunc(np.maximum, v, low), high)
    return expr.cast(v, dtype)


def _lift_brightness(image, delta):
    if isinstance(delta, expr.Expr):
        delta = expr.cast(delta, np.float32)
    else:
        delta = np.float32(_scalar("adjust_brightness", "delta", delta, "AddV2"))
    return _lift_brightness_of(image, delta)


def _brightness_nopython(image, delta):
    to_float, from_float, low, high, dtype = _typing_conversion("adjust_brightness", image)

    def impl(image, delta):
        return _adjust_brightness(image, np.float32(delta), to_float, from_float, low, high,
                                  np.empty(image.shape, dtype))
    return impl


@define(tags=("image",), lift=_lift_brightness, numba=_brightness_nopython,
        gpu=lambda delta: _Brightness(float(np.float32(delta))))
def adjust_brightness(image, delta):
    """Adds ``delta`` to every value of an image (``tf.image.adjust_brightness``).

    Integer images are scaled to [0, 1] first and the result is converted back with
    saturation; float images are not clipped. Any shape (an image, a batch).

    Args:
        image: An array of integers or floats, usually (..., H, W, C).
        delta: A scalar, the amount added in [0, 1] units.

    Returns:
        An array of the image's shape and dtype.

    Raises:
        TypeError: If the image is not integer or floating point.
        InvalidArgumentError: If ``delta`` is not a scalar.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.adjust_brightness(np.array([[[10, 128, 250]]], np.uint8), 0.1).tolist()
        [[[35, 153, 255]]]
        >>> image.adjust_brightness(np.array([0.5, 1.0], np.float32), 0.25)
        array([0.75, 1.25], dtype=float32)
    """
    image = np.asarray(image)
    delta = _scalar("adjust_brightness", "delta", delta, "AddV2")
    # TF adds the delta cast to the image's float type (half for float16 images).
    delta = np.float32(np.float16(delta)) if image.dtype == np.float16 else np.float32(delta)
    return _color_call("adjust_brightness", _adjust_brightness, image, delta)


def _lift_random_brightness(image, max_delta, seed):
    if not isinstance(seed, (tuple, list)) or len(seed) != 2 or isinstance(max_delta, expr.Expr):
        raise NotElementwise("random_brightness with a seed that is not a pair")
    max_delta = check_max_delta(max_delta)
    u = expr.draw("uniform", seed[0], seed[1], _BRIGHTNESS_STREAM)
    delta = expr.apply_ufunc(np.add, -max_delta, expr.apply_ufunc(np.multiply, u, 2 * max_delta))
    return _lift_brightness_of(image, expr.cast(delta, np.float32))


def check_max_delta(max_delta, most: float = np.inf) -> float:
    """A random op's ``max_delta`` as a float in ``[0, most]``, with TF's errors."""
    max_delta = float(max_delta)
    if max_delta > most:
        raise ValueError(f"max_delta must be <= {most}.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return max_delta


def _random_brightness_nopython(image, max_delta, seed):
    to_float, from_float, low, high, dtype = _typing_conversion("random_brightness", image)
    typing_pair("random_brightness", "seed", seed, types.Integer)

    def impl(image, max_delta, seed):
        if max_delta < 0:
            raise ValueError("max_delta must be non-negative.")
        delta = _uniform_in(seed, np.int64(_BRIGHTNESS_STREAM), -max_delta, max_delta)
        return _adjust_brightness(image, delta, to_float, from_float, low, high,
                                  np.empty(image.shape, dtype))
    return impl


@define(tags=("image",), lift=_lift_random_brightness, numba=_random_brightness_nopython,
        gpu=lambda max_delta, seed: _Brightness(
            drawn=(_BRIGHTNESS_STREAM, -check_max_delta(max_delta), max_delta), seed=seed))
def random_brightness(image, max_delta, seed):
    """:func:`adjust_brightness` by a delta drawn uniformly in ``[-max_delta, max_delta)``
    (``tf.image.stateless_random_brightness``).

    Stateless: ``delta = float32(-max_delta + u * (2 * max_delta))`` in float64, with
    ``u = random.uniform(random.key(seed[0], stream, 0), seed[1])`` on the stream
    ``b"bright_d"``; pass e.g. the element index as ``seed[1]``.

    Args:
        image: An array of integers or floats, usually (H, W, C).
        max_delta: A non-negative number.
        seed: ``(seed, counter)``, two integers (required).

    Returns:
        An array of the image's shape and dtype.

    Raises:
        ValueError: If ``max_delta`` is negative.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.full((2, 2, 3), 100, np.uint8)
        >>> out = image.random_brightness(img, 0.2, seed=(1, 7))
        >>> np.array_equal(out, image.random_brightness(img, 0.2, seed=(1, 7)))
        True
        >>> bool(abs(int(out[0, 0, 0]) - 100) <= 0.2 * 255 + 1)
        True
    """
    max_delta = check_max_delta(max_delta)
    delta = _drawn("random_brightness", seed, _BRIGHTNESS_STREAM, -max_delta, max_delta)
    return adjust_brightness(image, delta)


# -- contrast

@numba.njit(nogil=True, cache=True)
def _image_means(row, pixels, channels, to_float, work, mean):
    """TF's channel means of one image's values (``row``, H*W*C): the pixels folded in
    halves, the right half added onto the left (an odd middle pixel kept), until one
    pixel's channels hold the sums, then scaled by ``1 / pixels`` in float32."""
    for j in range(pixels * channels):
        work[j] = np.float32(row[j]) * to_float
    remaining = pixels
    while True:
        right = remaining // 2
        left = remaining - right
        for j in range(right * channels):
            work[j] = work[j] + work[left * channels + j]
        remaining = left
        if remaining <= 1:
            break
    scale = np.float32(1.0) / np.float32(pixels)
    for c in range(channels):
        mean[c] = work[c] * scale


@numba.njit(nogil=True, cache=True)
def _adjust_contrast(image, factor, to_float, from_float, low, high, out):
    x = np.ascontiguousarray(image)
    if x.size == 0:
        return out
    channels = x.shape[-1]
    pixels = x.shape[-3] * x.shape[-2]
    per_image = pixels * channels
    images = x.size // per_image
    flat = x.reshape((images, per_image))
    o = out.reshape((images, per_image))
    work = np.empty(per_image, np.float32)
    mean = np.empty(channels, np.float32)
    for b in range(images):
        row = flat[b]
        _image_means(row, pixels, channels, to_float, work, mean)
        for j in range(per_image):
            o[b, j] = _contrast_cpu(row[j], mean[j % channels], factor, to_float, from_float,
                                    low, high)
    return out


class _Contrast(_ColorStep):
    """Contrast on the GPU: a reduction, so the chain is cut before it; the backend
    computes each image's channel means (TF's fold, :func:`_image_means`) and hands
    them to this step as its first parameter."""

    name = "adjust_contrast"
    kind = "reduce"

    def out_shape(self, shape):
        return check_image(self.name, shape)

    def mean_scale(self, dtype):
        return _conversion(self.name, dtype)[0]

    def sampler(self, g, names, in_shape, inner):
        means, channels = names[0], in_shape[2]

        def contrast(y, x, c):
            value, dtype = inner(y, x, c)
            to_float, from_float, low, high = self.converted(dtype)
            v = g.fresh("v")
            g.emit(f"{v} = {type_name(dtype)}({g.device_function(_contrast_value)}({value}, "
                   f"{means}[b * {channels} + {c}], {self.scalar(names)}, {to_float}, "
                   f"{from_float}, {low}, {high}))")
            return v, dtype
        return contrast


def _check_contrast_rank(image) -> None:
    if image.ndim < 3:
        raise TypingError(f"adjust_contrast: input must be at least 3-D, got {image}")


def _contrast_nopython(images, contrast_factor):
    to_float, from_float, low, high, dtype = _typing_conversion("adjust_contrast", images)
    _check_contrast_rank(images)

    def impl(images, contrast_factor):
        return _adjust_contrast(images, np.float32(contrast_factor), to_float, from_float, low,
                                high, np.empty(images.shape, dtype))
    return impl


@define(tags=("image",), numba=_contrast_nopython,
        gpu=lambda contrast_factor: _Contrast(float(np.float32(contrast_factor))))
def adjust_contrast(images, contrast_factor):
    """Scales each value's distance from its image's channel mean by
    ``contrast_factor`` (``tf.image.adjust_contrast``): ``(x - mean) * factor + mean``
    in float32, the mean of each channel over the H x W pixels of each image.

    Args:
        images: An array of integers or floats of rank 3 or more, (..., H, W, C).
        contrast_factor: A scalar.

    Returns:
        An array of the images' shape and dtype (integers converted back with
        saturation).

    Raises:
        InvalidArgumentError: If the images have fewer than 3 dims or the factor is not
            a scalar.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.adjust_contrast(np.array([[[0.2]], [[0.4]]], np.float32), 2.0).ravel()
        array([0.09999999, 0.5       ], dtype=float32)
    """
    factor = np.float32(_scalar("adjust_contrast", "contrast_factor", contrast_factor,
                                "AdjustContrastv2"))
    return _color_call("adjust_contrast", _adjust_contrast, images, factor, min_rank=3,
                       op_name="AdjustContrastv2")


def check_factor_range(lower, upper) -> tuple:
    """A random op's factor range as floats, ``0 <= lower < upper``, with TF's errors."""
    lower, upper = float(lower), float(upper)
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return lower, upper


def _random_contrast_nopython(image, lower, upper, seed):
    to_float, from_float, low, high, dtype = _typing_conversion("random_contrast", image)
    _check_contrast_rank(image)
    typing_pair("random_contrast", "seed", seed, types.Integer)

    def impl(image, lower, upper, seed):
        if upper <= lower:
            raise ValueError("upper must be > lower.")
        if lower < 0:
            raise ValueError("lower must be non-negative.")
        factor = _uniform_in(seed, np.int64(_CONTRAST_STREAM), lower, upper)
        return _adjust_contrast(image, factor, to_float, from_float, low, high,
                                np.empty(image.shape, dtype))
    return impl


@define(tags=("image",), numba=_random_contrast_nopython, gpu=lambda lower, upper, seed: _Contrast(
    drawn=(_CONTRAST_STREAM, *check_factor_range(lower, upper)), seed=seed))
def random_contrast(image, lower, upper, seed):
    """:func:`adjust_contrast` by a factor drawn uniformly in ``[lower, upper)``
    (``tf.image.stateless_random_contrast``).

    Stateless: ``factor = float32(lower + u * (upper - lower))`` in float64, with
    ``u = random.uniform(random.key(seed[0], stream, 0), seed[1])`` on the stream
    ``b"contrast"``.

    Args:
        image: An array of rank 3 or more, (..., H, W, C).
        lower, upper: ``0 <= lower < upper``.
        seed: ``(seed, counter)``, two integers (required).

    Raises:
        ValueError: If ``upper <= lower`` or ``lower < 0``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20
        >>> out = image.random_contrast(img, 0.5, 1.5, seed=(3, 0))
        >>> out.shape, out.dtype
        ((2, 2, 3), dtype('uint8'))
    """
    lower, upper = check_factor_range(lower, upper)
    return adjust_contrast(image, _drawn("random_contrast", seed, _CONTRAST_STREAM, lower, upper))


# -- saturation and grayscale

def _pixel_step_shape(name: str, shape: tuple, channels: int) -> tuple:
    h, w, c = check_image(name, shape)
    if c != 3:
        raise ValueError(f"nd.gpu.{name}: input must have 3 channels but instead has {c} channels")
    return (h, w, channels)


@numba.njit(nogil=True, cache=True)
def _adjust_rgb(image, hue, value, to_float, from_float, low, high, out):
    """adjust_saturation by ``value`` (``hue`` false) or adjust_hue by it, per pixel."""
    x = np.ascontiguousarray(image).reshape(-1)
    o = out.reshape(-1)
    for p in range(x.size // 3):
        pixel = (np.float32(x[3 * p]) * to_float, np.float32(x[3 * p + 1]) * to_float,
                 np.float32(x[3 * p + 2]) * to_float)
        r, g, b = _hue_cpu(*pixel, value) if hue else _saturated_cpu(*pixel, value)
        o[3 * p] = min(max(r * from_float, low), high)
        o[3 * p + 1] = min(max(g * from_float, low), high)
        o[3 * p + 2] = min(max(b * from_float, low), high)
    return out


class _Saturation(_ColorStep):
    name = "adjust_saturation"
    kind = "pixel"
    pixel = staticmethod(_saturated_rgb)

    def out_shape(self, shape):
        return _pixel_step_shape(self.name, shape, 3)

    def sampler(self, g, names, in_shape, inner):
        def saturation(y, x, c):
            channels = [inner(y, x, str(k)) for k in range(3)]
            dtype = channels[0][1]
            to_float, from_float, low, high = self.converted(dtype)
            rgb = [g.fresh("r") for _ in range(3)]
            args = ", ".join(f"numba.float32({v}) * {to_float}" for v, _ in channels)
            g.emit(f"{', '.join(rgb)} = {g.device_function(self.pixel)}({args}, "
                   f"{self.scalar(names)})")
            v = g.fresh("v")
            g.emit(f"{v} = {type_name(dtype)}(min(max(({rgb[0]} if {c} == 0 else ({rgb[1]} "
                   f"if {c} == 1 else {rgb[2]})) * {from_float}, {low}), {high}))")
            return v, dtype
        return saturation


def _check_rgb(op: str, image) -> None:
    if image.ndim < 1 or image.ndim < 3 and op != "rgb_to_grayscale":
        raise TypingError(f"{op}: input must be at least 3-D, got {image}")


def _saturation_nopython(image, saturation_factor):
    to_float, from_float, low, high, dtype = _typing_conversion("adjust_saturation", image)
    _check_rgb("adjust_saturation", image)

    def impl(image, saturation_factor):
        if image.shape[-1] != 3:
            raise ValueError("adjust_saturation: input must have 3 channels")
        return _adjust_rgb(image, np.bool_(False), np.float32(saturation_factor), to_float,
                           from_float, low, high, np.empty(image.shape, dtype))
    return impl


@define(tags=("image",), numba=_saturation_nopython,
        gpu=lambda saturation_factor: _Saturation(float(np.float32(saturation_factor))))
def adjust_saturation(image, saturation_factor):
    """Scales the saturation of RGB images (``tf.image.adjust_saturation``): each pixel
    to HSV, saturation times ``saturation_factor`` clipped to [0, 1], back to RGB, in
    float32 as TF's kernel computes it.

    Args:
        image: An array of rank 3 or more whose last dim is 3 (RGB).
        saturation_factor: A scalar.

    Returns:
        An array of the image's shape and dtype.

    Raises:
        InvalidArgumentError: If the last dim is not 3 or the image has fewer than 3 dims.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.adjust_saturation(np.array([[[10, 250, 30]]], np.uint8), 0.0).tolist()
        [[[250, 250, 250]]]
    """
    image = np.asarray(image)
    factor = np.float32(_scalar("adjust_saturation", "saturation_factor", saturation_factor,
                                "AdjustSaturation"))
    return _color_call("adjust_saturation", _adjust_rgb, image, False, factor, min_rank=3,
                       rgb_to=3, op_name="AdjustSaturation")


class _Hue(_Saturation):
    name = "adjust_hue"
    pixel = staticmethod(_hue_rgb)


@numba.njit(nogil=True, cache=True)
def _uniform_in(seed, stream, low, high):
    """:func:`_drawn` in compiled code. Callers pass ``np.int64(stream)`` (and
    ``_adjust_rgb`` ``np.bool_`` flags): Numba types a constant passed between compiled
    functions as a literal, and each literal compiles a specialization of its own."""
    u = random.uniform(random.key(np.int64(seed[0]), stream, 0), np.int64(seed[1]))
    return np.float32(np.float64(low) + (np.float64(high) - np.float64(low)) * u)


def _rgb_typing(op: str, image) -> tuple:
    """The conversion constants of adjust_hue's and the random RGB ops' compiled forms."""
    to_float, from_float, low, high, dtype = _typing_conversion(op, image)
    _check_rgb(op, image)
    return to_float, from_float, low, high, dtype


def _hue_nopython(image, delta, name=None):
    to_float, from_float, low, high, dtype = _rgb_typing("adjust_hue", image)

    def impl(image, delta, name=None):
        if image.shape[-1] != 3:
            raise ValueError("adjust_hue: input must have 3 channels")
        return _adjust_rgb(image, np.bool_(True), np.float32(delta), to_float, from_float, low,
                           high, np.empty(image.shape, dtype))
    return impl


def _random_saturation_nopython(image, lower, upper, seed):
    to_float, from_float, low, high, dtype = _rgb_typing("random_saturation", image)
    typing_pair("random_saturation", "seed", seed, types.Integer)

    def impl(image, lower, upper, seed):
        if upper <= lower or lower < 0 or image.shape[-1] != 3:
            raise ValueError("random_saturation: 0 <= lower < upper and 3 channels are required")
        factor = _uniform_in(seed, np.int64(_SATURATION_STREAM), lower, upper)
        return _adjust_rgb(image, np.bool_(False), factor, to_float, from_float, low, high,
                           np.empty(image.shape, dtype))
    return impl


def _random_hue_nopython(image, max_delta, seed):
    to_float, from_float, low, high, dtype = _rgb_typing("random_hue", image)
    typing_pair("random_hue", "seed", seed, types.Integer)

    def impl(image, max_delta, seed):
        if max_delta > 0.5 or max_delta < 0 or image.shape[-1] != 3:
            raise ValueError("random_hue: 0 <= max_delta <= 0.5 and 3 channels are required")
        delta = _uniform_in(seed, np.int64(_HUE_STREAM), -max_delta, max_delta)
        return _adjust_rgb(image, np.bool_(True), delta, to_float, from_float, low, high,
                           np.empty(image.shape, dtype))
    return impl


@define(tags=("image",), numba=_hue_nopython,
        gpu=lambda delta, name=None: _Hue(float(np.float32(delta))))
def adjust_hue(image, delta, name=None):
    """Rotates the hue of RGB images (``tf.image.adjust_hue``): each pixel's hue moved
    by ``delta`` turns (in [-1, 1]), computed as TF's kernel does in float32.

    Args:
        image: An array of rank 3 or more whose last dim is 3 (RGB).
        delta: A scalar.
        name: The op's name in a TF1 graph.

    Returns:
        An array of the image's shape and dtype.

    Raises:
        InvalidArgumentError: If the last dim is not 3 or the image has fewer than 3 dims.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.adjust_hue(np.array([[[250, 10, 30]]], np.uint8), 1 / 3).tolist()
        [[[30, 250, 10]]]
    """
    delta = np.float32(_scalar("adjust_hue", "delta", delta, "AdjustHue"))
    return _color_call("adjust_hue", _adjust_rgb, image, True, delta, min_rank=3, rgb_to=3,
                       op_name="AdjustHue")


@define(tags=("image",), numba=_random_saturation_nopython,
        gpu=lambda lower, upper, seed: _Saturation(
            drawn=(_SATURATION_STREAM, *check_factor_range(lower, upper)), seed=seed))
def random_saturation(image, lower, upper, seed):
    """:func:`adjust_saturation` by a factor drawn uniformly in ``[lower, upper)``
    (``tf.image.stateless_random_saturation``), on the stream ``b"saturate"`` as
    :func:`random_contrast` draws.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20
        >>> image.random_saturation(img, 0.5, 1.5, seed=(3, 0)).shape
        (2, 2, 3)
    """
    lower, upper = check_factor_range(lower, upper)
    return adjust_saturation(image, _drawn("random_saturation", seed, _SATURATION_STREAM, lower,
                                           upper))


@define(tags=("image",), numba=_random_hue_nopython,
        gpu=lambda max_delta, seed: _Hue(
            drawn=(_HUE_STREAM, -check_max_delta(max_delta, 0.5), max_delta), seed=seed))
def random_hue(image, max_delta, seed):
    """:func:`adjust_hue` by a delta drawn uniformly in ``[-max_delta, max_delta)``,
    ``max_delta <= 0.5`` (``tf.image.stateless_random_hue``), on the stream
    ``b"hue_delt"``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20
        >>> image.random_hue(img, 0.2, seed=(3, 0)).shape
        (2, 2, 3)
    """
    max_delta = check_max_delta(max_delta, 0.5)
    return adjust_hue(image, _drawn("random_hue", seed, _HUE_STREAM, -max_delta, max_delta))


@numba.njit(nogil=True, cache=True)
def _rgb_to_grayscale(image, to_float, from_float, low, high, out):
    x = np.ascontiguousarray(image).reshape(-1)
    o = out.reshape(-1)
    for p in range(x.size // 3):
        o[p] = _gray_cpu(x[3 * p], x[3 * p + 1], x[3 * p + 2], to_float, from_float, low, high)
    return out


class _Grayscale(_ColorStep):
    name = "rgb_to_grayscale"
    kind = "pixel"

    def out_shape(self, shape):
        return _pixel_step_shape(self.name, shape, 1)

    def sampler(self, g, names, in_shape, inner):
        def grayscale(y, x, c):
            channels = [inner(y, x, str(k)) for k in range(3)]
            dtype = channels[0][1]
            to_float, from_float, low, high = self.converted(dtype)
            v = g.fresh("v")
            g.emit(f"{v} = {type_name(dtype)}({g.device_function(_gray_value)}("
                   f"{', '.join(value for value, _ in channels)}, {to_float}, {from_float}, "
                   f"{low}, {high}))")
            return v, dtype
        return grayscale

    def describe(self):
        return self.name


def _grayscale_nopython(images):
    to_float, from_float, low, high, dtype = _typing_conversion("rgb_to_grayscale", images)
    _check_rgb("rgb_to_grayscale", images)

    def impl(images):
        if images.shape[-1] != 3:
            raise ValueError("rgb_to_grayscale: input must have 3 channels")
        return _rgb_to_grayscale(images, to_float, from_float, low, high,
                                 np.empty(images.shape[:-1] + (1,), dtype))
    return impl


@define(tags=("image",), numba=_grayscale_nopython, gpu=_Grayscale)
def rgb_to_grayscale(images):
    """RGB to grayscale (``tf.image.rgb_to_grayscale``): ``0.2989 R + 0.5870 G +
    0.1140 B`` in float32, summed in that order; the last dim becomes 1.

    Args:
        images: An array whose last dim is 3 (any rank from 1).

    Returns:
        An array of the same dtype and shape ``(..., 1)``.

    Raises:
        InvalidArgumentError: If the last dim is not 3.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.rgb_to_grayscale(np.array([[[255, 0, 0], [10, 200, 30]]], np.uint8)).tolist()
        [[[76], [124]]]
    """
    return _color_call("rgb_to_grayscale", _rgb_to_grayscale, images, rgb_to=1,
                       op_name="rgb_to_grayscale")
