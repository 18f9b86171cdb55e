"""``nd.image``'s resizes: resize, random_resized_crop and its window."""


import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError

from nbdata import random
from nbdata.errors import FormattedValueError
from nbdata.primitives.gpu import Step, bilinear_source, check_image, seed_pair
from nbdata.primitives.image.arguments import (RESIZE_METHODS, as_image, float_pair, int_pair,
                                               pair_length, seed_counter, typing_image,
                                               typing_pair)
from nbdata.primitives.table import define


# ------------------------------------------------------- resizing and layout
#
# resize and random_resized_crop are written as plain per-output-pixel loops so
# that a GPU kernel (one thread per output pixel) can mirror them operation for
# operation. Every float step is a single IEEE float32 operation in the order
# written (Numba does not contract a * b + c into a fused multiply-add unless
# fastmath is on); a CUDA port must keep that order and avoid FMA contraction
# (``__fmul_rn``/``__fadd_rn`` or ``-fmad=false``) to match bit for bit.

# Stream ids of random_resized_crop's draws (the ASCII of their names).
_RRC_AREA_STREAM = 0x7272635F61726561  # b"rrc_area": area fraction, uniform in scale
_RRC_RATIO_STREAM = 0x7272635F7261746F  # b"rrc_rato": log aspect ratio, uniform in log(ratio)
_RRC_TOP_STREAM = 0x7272635F746F705F  # b"rrc_top_": top offset of a window that fits
_RRC_LEFT_STREAM = 0x7272635F6C656674  # b"rrc_left": left offset of a window that fits
# Attempts before the central-crop fallback, and the counter of attempt a for
# a seed counter c: (c * _RRC_COUNTER_STRIDE + a) modulo 2**64.
_RRC_ATTEMPTS = 10
_RRC_COUNTER_STRIDE = 16

_HALF = np.float32(0.5)


@numba.njit(nogil=True, cache=True)
def _bilinear_source(out_index, scale, in_size):
    """TF's half-pixel bilinear source of one output row or column.

    Returns ``(lower, upper, lerp)``: the two input indices to blend and the
    float32 weight of ``upper``, exactly as TensorFlow's
    ``compute_interpolation_weights`` with ``HalfPixelScaler`` computes them.
    """
    source = (np.float32(out_index) + _HALF) * scale - _HALF
    source_floor = np.floor(source)
    lower = max(np.int64(source_floor), 0)
    upper = min(np.int64(np.ceil(source)), in_size - 1)
    lower = min(lower, upper)
    return lower, upper, source - source_floor


@numba.njit(nogil=True, cache=True)
def _nearest_source(out_index, scale, in_size):
    """TF's half-pixel nearest-neighbour source index of one output row or column."""
    source = (np.float32(out_index) + _HALF) * scale
    return max(min(np.int64(np.floor(source)), in_size - 1), 0)


@numba.njit(nogil=True, cache=True)
def _check_resize_sizes(op, in_height, in_width, out_height, out_width):
    if in_height <= 0 or in_width <= 0:
        raise FormattedValueError("{}: the image must not be empty, got size {}x{}", op,
                                  in_height, in_width)
    if out_height <= 0 or out_width <= 0:
        raise FormattedValueError("{}: size must be positive, got {}x{}", op, out_height,
                                  out_width)


@numba.njit(nogil=True, cache=True)
def _resize_bilinear_window(image, row0, col0, in_height, in_width,
                            out_height, out_width):
    """Bilinear resize of ``image[row0:row0+in_height, col0:col0+in_width]``.

    Samples only inside the window (its borders clamp, as for a whole image),
    so it equals resizing the cropped view. Output is float32 (h, w, C).
    """
    channels = image.shape[2]
    out = np.empty((out_height, out_width, channels), dtype=np.float32)
    height_scale = np.float32(in_height) / np.float32(out_height)
    width_scale = np.float32(in_width) / np.float32(out_width)
    # The column sources, computed once per column (the same values a per-pixel
    # _bilinear_source(x, ...) call gives; a GPU thread computes its own).
    x0s = np.empty(out_width, dtype=np.int64)
    x1s = np.empty(out_width, dtype=np.int64)
    x_lerps = np.empty(out_width, dtype=np.float32)
    for x in range(out_width):
        x0s[x], x1s[x], x_lerps[x] = _bilinear_source(x, width_scale, in_width)
    if channels == 3:
        # RGB, separably: each source row's horizontal blends (``top`` / ``bottom``
        # below) are computed once and kept while consecutive output rows read the
        # same source rows, then blended vertically in a loop that vectorizes. The
        # float32 operations and their order are those of the loop further down.
        rows = np.empty((2, out_width * 3), dtype=np.float32)
        kept = np.array([-1, -1], dtype=np.int64)   # the source row each of rows holds
        for y in range(out_height):
            y0, y1, y_lerp = _bilinear_source(y, height_scale, in_height)
            for k in range(2):
                source_row = y0 if k == 0 else y1
                if kept[k] == source_row:
                    continue
                if kept[1 - k] == source_row:
                    # An element loop, not ``rows[k] = rows[1 - k]``: an array assignment
                    # makes Numba compile its shape-mismatch message (seconds of string code).
                    for q in range(out_width * 3):
                        rows[k, q] = rows[1 - k, q]
                else:
                    line = image[row0 + source_row]
                    blended = rows[k]
                    for x in range(out_width):
                        a, b, x_lerp = col0 + x0s[x], col0 + x1s[x], x_lerps[x]
                        for c in range(3):
                            left = np.float32(line[a, c])
                            blended[x * 3 + c] = left + (np.float32(line[b, c]) - left) * x_lerp
                kept[k] = source_row
            top = rows[0]
            bottom = rows[1]
            flat = out[y].reshape(out_width * 3)
            for q in range(out_width * 3):
                flat[q] = top[q] + (bottom[q] - top[q]) * y_lerp
        return out
    for y in range(out_height):
        y0, y1, y_lerp = _bilinear_source(y, height_scale, in_height)
        for x in range(out_width):
            x0, x1, x_lerp = x0s[x], x1s[x], x_lerps[x]
            for c in range(channels):
                top_left = np.float32(image[row0 + y0, col0 + x0, c])
                top_right = np.float32(image[row0 + y0, col0 + x1, c])
                bottom_left = np.float32(image[row0 + y1, col0 + x0, c])
                bottom_right = np.float32(image[row0 + y1, col0 + x1, c])
                top = top_left + (top_right - top_left) * x_lerp
                bottom = bottom_left + (bottom_right - bottom_left) * x_lerp
                out[y, x, c] = top + (bottom - top) * y_lerp
    return out


@numba.njit(nogil=True, cache=True)
def _resize_bilinear(image, out_height, out_width):
    height, width, _ = image.shape
    _check_resize_sizes("resize", height, width, out_height, out_width)
    # np.int64(0): a literal 0 would compile a specialization of its own (Numba types
    # constants passed between compiled functions as literals)
    return _resize_bilinear_window(image, np.int64(0), np.int64(0), height, width,
                                   out_height, out_width)


@numba.njit(nogil=True, cache=True)
def _resize_nearest(image, out_height, out_width):
    height, width, channels = image.shape
    _check_resize_sizes("resize", height, width, out_height, out_width)
    out = np.empty((out_height, out_width, channels), dtype=image.dtype)
    height_scale = np.float32(height) / np.float32(out_height)
    width_scale = np.float32(width) / np.float32(out_width)
    for y in range(out_height):
        source_y = _nearest_source(y, height_scale, height)
        for x in range(out_width):
            source_x = _nearest_source(x, width_scale, width)
            for c in range(channels):
                out[y, x, c] = image[source_y, source_x, c]
    return out


@numba.njit(nogil=True, cache=True)
def _random_resized_crop_window(height, width, scale_low, scale_high,
                                ratio_low, ratio_high, seed, counter):
    """(top, left, h, w) of random_resized_crop; see its docstring."""
    if height <= 0 or width <= 0:
        raise FormattedValueError(
            "random_resized_crop: the image must not be empty, got size {}x{}", height, width)
    if not (np.isfinite(scale_high) and 0.0 <= scale_low <= scale_high):
        raise ValueError(
            "random_resized_crop: scale must be finite with "
            "0 <= scale[0] <= scale[1]"
        )
    if not (np.isfinite(ratio_high) and 0.0 < ratio_low <= ratio_high):
        raise ValueError(
            "random_resized_crop: ratio must be finite with "
            "0 < ratio[0] <= ratio[1]"
        )
    area = np.float64(height) * np.float64(width)
    log_ratio_low = np.log(ratio_low)
    log_ratio_high = np.log(ratio_high)
    area_key = random.key(seed, _RRC_AREA_STREAM, 0)
    ratio_key = random.key(seed, _RRC_RATIO_STREAM, 0)
    first = np.uint64(counter) * np.uint64(_RRC_COUNTER_STRIDE)
    for attempt in range(_RRC_ATTEMPTS):
        draw = first + np.uint64(attempt)
        target_area = area * (
            scale_low + (scale_high - scale_low) * random.uniform(area_key, draw))
        aspect_ratio = np.exp(
            log_ratio_low
            + (log_ratio_high - log_ratio_low) * random.uniform(ratio_key, draw))
        crop_width = np.int64(np.rint(np.sqrt(target_area * aspect_ratio)))
        crop_height = np.int64(np.rint(np.sqrt(target_area / aspect_ratio)))
        if 0 < crop_width <= width and 0 < crop_height <= height:
            top = random.randint(random.key(seed, _RRC_TOP_STREAM, 0), draw,
                                 0, height - crop_height + 1)
            left = random.randint(random.key(seed, _RRC_LEFT_STREAM, 0), draw,
                                  0, width - crop_width + 1)
            return top, left, crop_height, crop_width
    # No attempt fit: the central crop with the aspect ratio clamped to ratio.
    in_ratio = np.float64(width) / np.float64(height)
    crop_height = np.int64(height)
    crop_width = np.int64(width)
    if in_ratio < ratio_low:
        crop_height = max(np.int64(np.rint(crop_width / ratio_low)), 1)
    elif in_ratio > ratio_high:
        crop_width = max(np.int64(np.rint(crop_height * ratio_high)), 1)
    return ((height - crop_height) // 2, (width - crop_width) // 2,
            crop_height, crop_width)


@numba.njit(nogil=True, cache=True)
def _random_resized_crop(image, out_height, out_width, scale_low, scale_high,
                         ratio_low, ratio_high, seed, counter):
    height, width, _ = image.shape
    _check_resize_sizes("random_resized_crop", height, width, out_height, out_width)
    top, left, crop_height, crop_width = _random_resized_crop_window(
        height, width, scale_low, scale_high, ratio_low, ratio_high, seed, counter)
    return _resize_bilinear_window(image, top, left, crop_height, crop_width,
                                   out_height, out_width)


class _Bilinear(Step):
    """A bilinear resize of a window of each image (the whole image for resize) to
    ``size``; float32 output (TF's half-pixel sampling, nd.image.resize's operations)."""

    kind = "spatial"
    uniforming = True

    def out_shape(self, shape):
        _, _, c = check_image(self.name, shape)
        return self.size + (c,)

    def out_dtype(self, dtype):
        return np.dtype(np.float32)

    def window(self, names: list, in_shape: tuple) -> tuple:
        """(row0, col0, height, width) of the window resized, as kernel expressions."""
        return "0", "0", str(in_shape[0]), str(in_shape[1])

    def sampler(self, g, names, in_shape, inner):
        oh, ow = self.size
        row0, col0, wh, ww = self.window(names, in_shape)

        def resize(y, x, c):
            hs, ws = g.fresh("hs"), g.fresh("ws")
            g.emit(f"{hs} = numba.float32({wh}) / numba.float32({oh})")
            g.emit(f"{ws} = numba.float32({ww}) / numba.float32({ow})")
            y0, y1, ly = bilinear_source(g, y, hs, wh)
            x0, x1, lx = bilinear_source(g, x, ws, ww)
            taps = []
            for yy, xx in ((y0, x0), (y0, x1), (y1, x0), (y1, x1)):
                ry, rx = g.fresh("y"), g.fresh("x")
                g.emit(f"{ry} = {row0} + {yy}")
                g.emit(f"{rx} = {col0} + {xx}")
                v, _ = inner(ry, rx, c)
                t = g.fresh("t")
                g.emit(f"{t} = numba.float32({v})")
                taps.append(t)
            tl, tr, bl, br = taps
            top, bottom, out = g.fresh("top"), g.fresh("bot"), g.fresh("v")
            g.emit(f"{top} = {tl} + ({tr} - {tl}) * {lx}")
            g.emit(f"{bottom} = {bl} + ({br} - {bl}) * {lx}")
            g.emit(f"{out} = {top} + ({bottom} - {top}) * {ly}")
            return out, np.dtype(np.float32)
        return resize


class _Resize(_Bilinear):
    name = "resize"

    def __init__(self, size, method: str = "bilinear"):
        self.size = tuple(int(v) for v in size)
        if len(self.size) != 2 or min(self.size) <= 0:
            raise ValueError("nd.gpu.resize: size is a positive (h, w)")
        if method != "bilinear":
            raise ValueError(f"nd.gpu.resize: method {method!r} is not supported; use 'bilinear'")

    def describe(self):
        return f"resize({self.size}, bilinear)"


@numba.njit(nogil=True, cache=True)
def _batch_windows(heights, widths, scale_low, scale_high, ratio_low, ratio_high, seed,
                   counter, out):
    """random_resized_crop's windows of a batch: image ``j`` at counter ``counter + j``."""
    for j in range(heights.shape[0]):
        top, left, h, w = _random_resized_crop_window(heights[j], widths[j], scale_low,
                                                      scale_high, ratio_low, ratio_high, seed,
                                                      counter + j)
        out[0, j], out[1, j], out[2, j], out[3, j] = top, left, h, w


class _RandomResizedCrop(_Bilinear):
    name = "random_resized_crop"
    param_count = 4

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
        self.size = tuple(int(v) for v in size)
        if len(self.size) != 2 or min(self.size) <= 0:
            raise ValueError("nd.gpu.random_resized_crop: size is a positive (h, w)")
        self.scale = tuple(float(v) for v in scale)
        self.ratio = tuple(float(v) for v in ratio)
        self.seed, self.offset = seed_pair(self.name, seed)

    def params(self, shape, seed_base, n, sizes=None):
        # The whole batch's windows in one compiled call (the same draws as
        # random_resized_crop_window at counters seed_base + offset + j).
        if sizes is None:
            heights = np.full(n, int(shape[0]), np.int64)
            widths = np.full(n, int(shape[1]), np.int64)
        else:
            sizes = np.asarray(sizes, np.int64).reshape(-1, 3)
            heights, widths = np.ascontiguousarray(sizes[:n, 0]), np.ascontiguousarray(sizes[:n, 1])
        windows = np.empty((4, n), np.int64)
        _batch_windows(heights, widths, np.float64(self.scale[0]), np.float64(self.scale[1]),
                       np.float64(self.ratio[0]), np.float64(self.ratio[1]), np.int64(self.seed),
                       np.int64(int(seed_base) + self.offset), windows)
        return list(windows)

    def window(self, names, in_shape):
        return tuple(f"{q}[b]" for q in names)

    def windows(self, seed_base: int):
        """The batch's windows as a function of the images' (n, 3) sizes (a decode
        that decodes only them: ``resized()`` then does the rest)."""
        return lambda sizes: self.params(None, seed_base, len(sizes), sizes)

    def resized(self) -> "_Resize":
        """This crop's resize of an image that is already its window (one step object
        per crop, so its chains keep their kernels)."""
        if getattr(self, "_resized", None) is None:
            self._resized = _Resize(self.size)
        return self._resized

    def describe(self):
        return (f"random_resized_crop({self.size}, scale={self.scale}, ratio={self.ratio}, "
                f"seed={self.seed})")


# -------------------------------------------------------------- resizing and layout

def _resize_nopython(image, size, method="bilinear"):
    typing_image("resize", image)
    typing_pair("resize", "size", size, types.Integer)
    if isinstance(method, str):   # omitted: the default itself
        name = method
    elif isinstance(method, types.Omitted):
        name = method.value
    elif isinstance(method, types.StringLiteral):
        name = method.literal_value
    elif isinstance(method, types.UnicodeType):
        raise TypingError("resize: inside numba.njit functions method must be a "
                          "constant string")
    else:
        raise TypingError(f"resize: method must be a string, got {method}")
    if name not in RESIZE_METHODS:
        raise ValueError(f"resize: unsupported method {name!r}; expected one of "
                         f"{', '.join(map(repr, RESIZE_METHODS))}")
    resize_impl = _resize_bilinear if name == "bilinear" else _resize_nearest

    def impl(image, size, method="bilinear"):
        pair_length("resize", "size", size)
        # np.int64: under prefer_literal a constant size arrives as literals, and each
        # size would compile a resize of its own
        return resize_impl(image, np.int64(size[0]), np.int64(size[1]))
    return impl


@define(tags=("image",),
        gpu=_Resize, numba=_resize_nopython, numba_options={"prefer_literal": True})
def resize(image, size, method="bilinear"):
    """Resizes an (H, W, C) image to ``size`` like TF2's ``tf.image.resize``.

    The semantics are those of ``tf.image.resize`` (``half_pixel_centers=True``,
    ``antialias=False``), computed per output pixel in float32:

    * ``"bilinear"``: with ``scale = float32(H) / float32(h)``, output row
      ``y`` reads input rows ``floor(s)`` and ``ceil(s)`` of
      ``s = (y + 0.5) * scale - 0.5`` (float32), clamped to ``[0, H - 1]``,
      weighting the ``ceil(s)`` row by ``lerp = s - floor(s)`` (columns alike).
      Each pixel is ``top + (bottom - top) * y_lerp`` with
      ``top = tl + (tr - tl) * x_lerp`` and ``bottom = bl + (br - bl) * x_lerp``,
      every step a float32 operation (no fused multiply-add). Inputs are
      cast to float32 first; the result is float32.
    * ``"nearest"``: output row ``y`` reads input row
      ``clip(floor((y + 0.5) * scale), 0, H - 1)`` (columns alike); the
      result keeps the image's dtype, as in TF.

    Against ``tf.image.resize`` the tested tolerance is a relative 1e-5 (TF
    builds may associate the same formula differently or fuse multiply-adds);
    TensorFlow 2.21's CPU kernel in fact gives bit-identical values. Nearest
    is exact.

    Args:
        image: An (H, W, C) array of integers or float32/float64, H, W > 0.
        size: ``(h, w)``, the output height and width (positive integers).
        method: ``"bilinear"`` (default) or ``"nearest"``. Inside
            ``numba.njit`` functions it must be a constant string.

    Returns:
        A new C-contiguous (h, w, C) array: float32 for bilinear, the
        image's dtype for nearest.

    Raises:
        ValueError: If ``method`` is unknown, the image is not 3-D or empty,
            or ``size`` is not two positive integers.
        TypeError: If the image dtype is not an integer, float32 or float64
            type, or ``size`` does not hold integers.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.array([[[0], [10]], [[20], [30]]], dtype=np.uint8)
        >>> image.resize(img, (3, 3))[..., 0]
        array([[ 0.,  5., 10.],
               [10., 15., 20.],
               [20., 25., 30.]], dtype=float32)
        >>> image.resize(img, (1, 4), method="nearest")[..., 0]
        array([[20, 20, 30, 30]], dtype=uint8)
    """
    if not isinstance(method, str):
        raise TypeError(f"resize: method must be a string, got {method!r}")
    if method not in RESIZE_METHODS:
        raise ValueError(f"resize: unsupported method {method!r}; expected one of "
                         f"{', '.join(map(repr, RESIZE_METHODS))}")
    image = as_image("resize", image)
    out_height, out_width = int_pair("resize", "size", size)
    if method == "bilinear":
        return _resize_bilinear(image, out_height, out_width)
    return _resize_nearest(image, out_height, out_width)


def _random_resized_crop_window_nopython(height, width, scale=(0.08, 1.0),
                                         ratio=(3 / 4, 4 / 3), seed=None):
    op = "random_resized_crop"
    for name, value in (("height", height), ("width", width)):
        if not isinstance(value, types.Integer):
            raise TypingError(f"{op}: {name} must be an integer, got {value}")
    typing_pair(op, "scale", scale, (types.Integer, types.Float), required=False)
    typing_pair(op, "ratio", ratio, (types.Integer, types.Float), required=False)
    typing_pair(op, "seed", seed, types.Integer)

    def impl(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
        pair_length(op, "scale", scale)
        pair_length(op, "ratio", ratio)
        pair_length(op, "seed", seed)
        return _random_resized_crop_window(
            np.int64(height), np.int64(width), np.float64(scale[0]), np.float64(scale[1]),
            np.float64(ratio[0]), np.float64(ratio[1]), np.int64(seed[0]), np.int64(seed[1]))
    return impl


@define(tags=("image",), numba=_random_resized_crop_window_nopython)
def random_resized_crop_window(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                               seed=None):
    """The window ``(top, left, h, w)`` that :func:`random_resized_crop` resizes.

    Depends only on the image size, ``scale``, ``ratio`` and ``seed``; the
    draw order is documented in :func:`random_resized_crop`. A GPU kernel
    can take the windows from here (or compute them the same way) and then
    resize each one.

    Args:
        height: The image height H (positive integer).
        width: The image width W (positive integer).
        scale: ``(low, high)``, the range of the window's area as a fraction
            of the image's, ``0 <= low <= high``.
        ratio: ``(low, high)``, the range of the window's aspect ratio
            (width / height), ``0 < low <= high``; drawn log-uniformly.
        seed: ``(seed, counter)``, two integers (required).

    Returns:
        A tuple of four ints ``(top, left, h, w)`` with ``0 <= top``,
        ``top + h <= H``, ``0 <= left``, ``left + w <= W`` and ``h, w >= 1``.

    Raises:
        ValueError: If the size is not positive or ``scale``/``ratio`` are
            not ordered, non-negative (positive) finite ranges.
        TypeError: If ``seed`` is missing or an argument has the wrong type.

    Example:
        >>> from nbdata import image
        >>> top, left, h, w = image.random_resized_crop_window(100, 200, seed=(3, 0))
        >>> 0 <= top <= 100 - h and 0 <= left <= 200 - w
        True
        >>> image.random_resized_crop_window(100, 200, seed=(3, 0)) == (top, left, h, w)
        True
        >>> image.random_resized_crop_window(10, 100, scale=(1.0, 1.0), ratio=(1.0, 2.0),
        ...                                  seed=(3, 0))  # nothing fits: central crop
        (0, 40, 10, 20)
    """
    op = "random_resized_crop"
    height, width = int_pair(op, "image size", (height, width))
    scale_low, scale_high = float_pair(op, "scale", scale)
    ratio_low, ratio_high = float_pair(op, "ratio", ratio)
    seed, counter = seed_counter(op, seed)
    top, left, crop_height, crop_width = _random_resized_crop_window(
        np.int64(height), np.int64(width), scale_low, scale_high,
        ratio_low, ratio_high, seed, counter)
    return int(top), int(left), int(crop_height), int(crop_width)


def _random_resized_crop_nopython(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                                  seed=None):
    op = "random_resized_crop"
    typing_image(op, image)
    typing_pair(op, "size", size, types.Integer)
    typing_pair(op, "scale", scale, (types.Integer, types.Float), required=False)
    typing_pair(op, "ratio", ratio, (types.Integer, types.Float), required=False)
    typing_pair(op, "seed", seed, types.Integer)

    def impl(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
        pair_length(op, "size", size)
        pair_length(op, "scale", scale)
        pair_length(op, "ratio", ratio)
        pair_length(op, "seed", seed)
        return _random_resized_crop(
            image, np.int64(size[0]), np.int64(size[1]), np.float64(scale[0]), np.float64(scale[1]),
            np.float64(ratio[0]), np.float64(ratio[1]), np.int64(seed[0]), np.int64(seed[1]))
    return impl


@define(tags=("image",), gpu=_RandomResizedCrop, numba=_random_resized_crop_nopython)
def random_resized_crop(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
    """Crops a random window of random area and aspect ratio and resizes it.

    The Inception-style crop of torchvision's ``RandomResizedCrop``, stateless:
    the window depends only on the image size, ``scale``, ``ratio`` and
    ``seed = (s, c)``. With ``H, W`` the image size, ``area = H * W`` and all
    arithmetic in float64, attempt ``a = 0, 1, ..., 9`` draws at counter
    ``n = (c * 16 + a) mod 2**64``::

        u_area  = random.uniform(random.key(s, _RRC_AREA_STREAM, 0), n)
        u_ratio = random.uniform(random.key(s, _RRC_RATIO_STREAM, 0), n)
        target_area = area * (scale[0] + (scale[1] - scale[0]) * u_area)
        aspect = exp(log(ratio[0]) + (log(ratio[1]) - log(ratio[0])) * u_ratio)
        w = int(rint(sqrt(target_area * aspect)))   # rint: half to even
        h = int(rint(sqrt(target_area / aspect)))

    and the first attempt with ``0 < w <= W`` and ``0 < h <= H`` places the
    window at::

        top  = random.randint(random.key(s, _RRC_TOP_STREAM, 0), n, 0, H - h + 1)
        left = random.randint(random.key(s, _RRC_LEFT_STREAM, 0), n, 0, W - w + 1)

    (later attempts draw nothing). If no attempt fits, the window is the
    central crop with the aspect ratio clamped to ``ratio``: if
    ``W / H < ratio[0]``, ``w = W`` and ``h = max(1, rint(W / ratio[0]))``;
    if ``W / H > ratio[1]``, ``h = H`` and ``w = max(1, rint(H * ratio[1]))``;
    otherwise the whole image; then ``top = (H - h) // 2`` and
    ``left = (W - w) // 2``. The stream ids are the ASCII of ``b"rrc_area"``,
    ``b"rrc_rato"``, ``b"rrc_top_"`` and ``b"rrc_left"``; counters ``c`` that
    differ modulo 2**60 never share a draw.

    The window is then resized to ``size`` exactly as :func:`resize` with
    ``method="bilinear"`` resizes ``image[top:top + h, left:left + w]``
    (sampling only inside the window), so the output is float32.

    Args:
        image: An (H, W, C) array of integers or float32/float64.
        size: ``(h, w)``, the output height and width (positive integers).
        scale: ``(low, high)``, the range of the window's area as a fraction
            of the image's, ``0 <= low <= high``.
        ratio: ``(low, high)``, the range of the window's aspect ratio
            (width / height), ``0 < low <= high``; drawn log-uniformly.
        seed: ``(seed, counter)``, two integers (required); pass e.g. the
            element index from ``Dataset.enumerate`` as the counter.

    Returns:
        A new C-contiguous float32 array of shape ``(h, w, C)``.

    Raises:
        ValueError: If the image is not 3-D or empty, ``size`` is not two
            positive integers, or ``scale``/``ratio`` are invalid ranges.
        TypeError: If ``seed`` is missing or an argument has the wrong type.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(40 * 60 * 3, dtype=np.uint8).reshape(40, 60, 3)
        >>> out = image.random_resized_crop(img, (16, 16), seed=(5, 2))
        >>> out.shape, out.dtype
        ((16, 16, 3), dtype('float32'))
        >>> top, left, h, w = image.random_resized_crop_window(40, 60, seed=(5, 2))
        >>> window = img[top:top + h, left:left + w]
        >>> np.array_equal(out, image.resize(window, (16, 16)))
        True
    """
    op = "random_resized_crop"
    image = as_image(op, image)
    out_height, out_width = int_pair(op, "size", size)
    scale_low, scale_high = float_pair(op, "scale", scale)
    ratio_low, ratio_high = float_pair(op, "ratio", ratio)
    seed, counter = seed_counter(op, seed)
    return _random_resized_crop(image, out_height, out_width, scale_low, scale_high,
                                ratio_low, ratio_high, seed, counter)
