"""TensorFlow's image ops on (H, W, C) NumPy images (``nd.image``), each an op-table entry.

Every op here is defined once (``nbdata.primitives.table.define``): its eager
implementation (a Numba kernel called from Python), its Numba implementation (the same
kernel, so a compiled map function calls it directly), and where it has them its scalar
lift rule and its GPU step. Inside a fused map, ops with a lift rule (crops, flips,
normalize, cast, brightness) become expressions: the fused kernel reads each output
pixel straight from the source image, with no intermediate arrays, and computes the
same values; the others (resizes, layout changes, contrast, saturation, grayscale) run
as compiled calls in the same kernel. Given TF1 graph tensors they record graph ops; in
a map after ``prefetch_to_device`` their ``nd.gpu`` forms are steps of one fused GPU
kernel (``nbdata/primitives/gpu.py``).

Randomness is counter-based: ``seed=(seed, counter)`` draws with ``nbdata.random`` from
the op's own streams, so the same seed gives the same result eagerly, fused, on the GPU
and after a restore.
"""

import operator

import numba
import numpy as np
from numba.core import types
from numba.extending import overload
from numba.core.errors import TypingError
from numba.np.numpy_support import as_dtype

from nbdata import random
from nbdata.errors import InvalidArgumentError
from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.gpu import Step, bilinear_source, check_image, f32, seed_pair, type_name
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec
from nbdata.trace.graph import is_symbolic

# Stream ids of the random draws (the ASCII of their names), so that each op
# draws independent values even when given the same (seed, counter).
_CROP_TOP_STREAM = 0x63726F705F746F70  # b"crop_top"
_CROP_LEFT_STREAM = 0x63726F705F6C6674  # b"crop_lft"
_FLIP_STREAM = 0x666C69705F6C5F72  # b"flip_l_r"


@numba.njit(nogil=True, cache=True)
def _random_crop(image, size, seed):
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
    return image[:, ::-1].copy()


@numba.njit(nogil=True, cache=True)
def _random_flip_left_right(image, seed):
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
        raise ValueError(
            op + ": the image must not be empty, got size "
            + str(in_height) + "x" + str(in_width)
        )
    if out_height <= 0 or out_width <= 0:
        raise ValueError(
            op + ": size must be positive, got " + str(out_height) + "x"
            + str(out_width)
        )


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
                    rows[k] = rows[1 - k]
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
    return _resize_bilinear_window(image, 0, 0, height, width, out_height, out_width)


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
        raise ValueError(
            "random_resized_crop: the image must not be empty, got size "
            + str(height) + "x" + str(width)
        )
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


@numba.njit(nogil=True, cache=True)
def _check_perm(perm, ndim):
    if len(perm) != ndim:
        raise ValueError(
            "transpose: perm has " + str(len(perm)) + " axes but the array has "
            + str(ndim)
        )
    seen = np.zeros(ndim, dtype=np.bool_)
    for axis in perm:
        if axis < 0 or axis >= ndim or seen[axis]:
            raise ValueError(
                "transpose: perm is not a permutation of the axes 0.."
                + str(ndim - 1)
            )
        seen[axis] = True


@numba.njit(nogil=True, cache=True)
def _transpose(image, perm):
    _check_perm(perm, image.ndim)
    return image.transpose(perm).copy()   # a C-contiguous copy


@numba.njit(nogil=True, cache=True)
def _cast(image, dtype):
    return np.ascontiguousarray(image.astype(dtype))  # astype keeps a Fortran layout


# ------------------------------------------------------------- arguments

_RESIZE_METHODS = ("bilinear", "nearest")


def _as_image(op, image, kinds="iuf"):
    """``image`` as an (H, W, C) ndarray of a dtype kind in ``kinds``."""
    image = np.asarray(image)
    if image.dtype.kind not in kinds or image.dtype == np.float16:
        raise TypeError(f"{op}: unsupported image dtype {image.dtype}")
    if image.ndim != 3:
        raise ValueError(
            f"{op}: expected an (H, W, C) image, got an array of shape {image.shape}")
    return image


def _as_int64(value):
    """A Python or NumPy integer wrapped into int64 (modulo 2**64)."""
    value = operator.index(value) & ((1 << 64) - 1)
    return np.int64(value - (1 << 64) if value >= 1 << 63 else value)


def _int_pair(op, name, value, count=2):
    """``value`` as a tuple of ``count`` Python ints."""
    try:
        values = tuple(np.asarray(value).ravel().tolist()) if isinstance(
            value, np.ndarray) else tuple(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a sequence of {count} integers, "
                        f"got {value!r}") from None
    if len(values) != count:
        raise ValueError(f"{op}: {name} must have {count} values, got {len(values)}")
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{op}: {name} must hold integers, got {value!r}") from None


def _float_pair(op, name, value):
    """``value`` as a tuple of two Python floats."""
    try:
        values = tuple(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a (low, high) pair of numbers, "
                        f"got {value!r}") from None
    if len(values) != 2:
        raise ValueError(f"{op}: {name} must be a (low, high) pair, got {len(values)} values")
    try:
        return tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must hold numbers, got {value!r}") from None


def _seed_pair(op, seed):
    """``(seed, counter)`` as two int64 values."""
    if seed is None:
        raise TypeError(f"{op}: seed=(seed, counter) is required")
    return tuple(_as_int64(v) for v in _int_pair(op, "seed", seed))


def _cast_dtype(dtype):
    """``dtype`` as a NumPy bool, integer, float32 or float64 dtype, or TypeError."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"cast: {dtype!r} is not a dtype") from None
    if target.kind not in "biuf" or target == np.float16:
        raise TypeError(f"cast: unsupported target dtype {target}")
    return target


def _typing_image(op, image, ndims=(3,)):
    if not (isinstance(image, types.Array) and image.ndim in ndims
            and isinstance(image.dtype, (types.Integer, types.Float))
            and image.dtype != types.float16):
        shape = "(H, W, C)" if ndims == (3,) else f"{ndims[0]}-D to {ndims[-1]}-D"
        raise TypingError(f"{op}: expected a {shape} array of integers, float32 or "
                          f"float64, got {image}")


def _typing_pair(op, name, value, kinds, required=True):
    # an omitted argument arrives as its default (or as types.Omitted)
    if not required and (isinstance(value, (tuple, types.Omitted))):
        return
    if isinstance(value, types.BaseTuple) and len(value) == 2 and all(
            isinstance(t, kinds) for t in value):
        return
    if isinstance(value, types.Array) and value.ndim == 1 and isinstance(value.dtype, kinds):
        return
    if (value is None or isinstance(value, (types.NoneType, types.Omitted))) and name == "seed":
        raise TypingError(f"{op}: seed=(seed, counter) is required")
    raise TypingError(f"{op}: {name} must be a pair of "
                      f"{'integers' if kinds is types.Integer else 'numbers'}, got {value}")


@numba.njit(nogil=True, cache=True)
def _pair_length(op, name, value):
    if len(value) != 2:
        raise ValueError(op + ": " + name + " must have 2 values, got " + str(len(value)))



# ------------------------------------------------------------------ GPU steps
#
# How each op applies to every element of a device batch in a fused GPU kernel
# (``nbdata/primitives/gpu.py``); the ``nd.gpu`` functions are these ops batched. Random
# draws are made on the host with this module's kernels, element ``j`` of a batch at
# counter ``counter + j``, so the GPU's crops and flips are the CPU's.

@numba.njit(nogil=True, cache=True)
def _crop_offsets(seed, base, n, top_range, left_range):
    tops = np.empty(n, np.int64)
    lefts = np.empty(n, np.int64)
    top_key = random.key(seed, _CROP_TOP_STREAM, 0)
    left_key = random.key(seed, _CROP_LEFT_STREAM, 0)
    for j in range(n):
        tops[j] = random.randint(top_key, base + j, 0, top_range)
        lefts[j] = random.randint(left_key, base + j, 0, left_range)
    return tops, lefts


@numba.njit(nogil=True, cache=True)
def _flip_flags(seed, base, n):
    flags = np.empty(n, np.int64)
    k = random.key(seed, _FLIP_STREAM, 0)
    for j in range(n):
        flags[j] = 1 if random.uniform(k, base + j) < 0.5 else 0
    return flags


class _Cast(Step):
    """``nd.gpu.cast``. float16 is written as the GPU's round-to-nearest-even conversion
    of the float32 value; ``"bfloat16"`` (NumPy has no such dtype) gives uint16 arrays
    holding bfloat16 bit patterns (round to nearest even; ``torch.from_dlpack(x)
    .view(torch.bfloat16)`` reads them). Either must be the chain's last value op (a
    transpose may follow)."""

    name = "cast"

    def __init__(self, dtype):
        self.bits = None
        name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
        if name in ("bfloat16", "bf16"):
            self.bits, self.dtype = "bfloat16", np.dtype(np.uint16)
            return
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf":
            raise TypeError(f"nd.gpu.cast: cannot cast to {self.dtype} (bool, integers, "
                            "float16, bfloat16, float32 and float64 only)")
        if self.dtype == np.float16:
            self.bits = "float16"

    def out_dtype(self, dtype):
        return self.dtype

    def sampler(self, g, names, in_shape, inner):
        def cast(y, x, c):
            value, _ = inner(y, x, c)
            v = g.fresh("v")
            if self.bits is not None:   # the uint16 bits, written as they are
                g.emit(f"{v} = {g.to_bits(self.bits)}(numba.float32({value}))")
            else:
                g.emit(f"{v} = {type_name(self.dtype)}({value})")
            return v, self.dtype
        return cast

    def describe(self):
        return f"cast({self.bits or self.dtype})"


class _Normalize(Step):
    name = "normalize"
    constant_count = 2

    def __init__(self, mean, std):
        self.mean = np.atleast_1d(np.asarray(mean, np.float32))
        self.std = np.atleast_1d(np.asarray(std, np.float32))
        if self.mean.ndim != 1 or self.std.ndim != 1:
            raise ValueError("nd.gpu.normalize: mean and std are scalars or one value per channel")

    def out_dtype(self, dtype):
        return np.dtype(np.float32)

    def constants(self, channels):
        mean = np.broadcast_to(self.mean, (channels,)) if self.mean.size == 1 else self.mean
        std = np.broadcast_to(self.std, (channels,)) if self.std.size == 1 else self.std
        if mean.size != channels or std.size != channels:
            raise ValueError(f"nd.gpu.normalize: {self.mean.size} means / {self.std.size} stds "
                             f"for {channels} channels")
        return [np.ascontiguousarray(mean), np.ascontiguousarray(std)]

    def sampler(self, g, names, in_shape, inner):
        mean, std = names

        def normalize(y, x, c):
            value, _ = inner(y, x, c)
            v = g.fresh("v")
            g.emit(f"{v} = (numba.float32({value}) - {mean}[{c}]) / {std}[{c}]")
            return v, np.dtype(np.float32)
        return normalize

    def describe(self):
        return f"normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class _RandomCrop(Step):
    name = "random_crop"
    kind = "spatial"
    uniforming = True
    param_count = 2

    def __init__(self, size, seed):
        self.size = tuple(int(v) for v in size)
        if len(self.size) not in (2, 3):
            raise ValueError("nd.gpu.random_crop: size is (h, w) or (h, w, c)")
        self.seed, self.offset = seed_pair(self.name, seed)

    def out_shape(self, shape):
        h, w, c = check_image(self.name, shape)
        ch, cw = self.size[:2]
        if len(self.size) == 3 and c is not None and self.size[2] != c:
            raise ValueError(f"nd.gpu.random_crop: size has {self.size[2]} channels, the images {c}")
        if ch <= 0 or cw <= 0 or (h is not None and (ch > h or cw > w)):
            raise ValueError(f"nd.gpu.random_crop: crop size {ch}x{cw} does not fit in the images "
                             f"of size {h}x{w}")
        return (ch, cw, c)

    def params(self, shape, seed_base, n, sizes=None):
        ch, cw = self.size[:2]
        if sizes is None:
            h, w, _ = shape
            return list(_crop_offsets(np.int64(self.seed), np.int64(seed_base + self.offset), n,
                                      h - ch + 1, w - cw + 1))
        offsets = np.empty((2, n), np.int64)   # images of their own sizes: one range each
        for j, (h, w, _) in enumerate(sizes):
            if ch > h or cw > w:
                raise InvalidArgumentError(
                    f"nd.gpu.random_crop: crop size {ch}x{cw} does not fit in image {j} of the "
                    f"batch ({h}x{w})", "RandomCrop")
            top, left = _crop_offsets(np.int64(self.seed), np.int64(seed_base + self.offset + j),
                                      1, h - ch + 1, w - cw + 1)
            offsets[:, j] = top[0], left[0]
        return list(offsets)

    def sampler(self, g, names, in_shape, inner):
        top, left = names

        def crop(y, x, c):
            yy, xx = g.fresh("y"), g.fresh("x")
            g.emit(f"{yy} = {y} + {top}[b]")
            g.emit(f"{xx} = {x} + {left}[b]")
            return inner(yy, xx, c)
        return crop

    def describe(self):
        return f"random_crop({self.size[:2]}, seed=({self.seed}, {self.offset}))"


class _Flip(Step):
    name = "random_flip_left_right"
    kind = "spatial"
    param_count = 1

    def __init__(self, seed, always: bool = False):
        self.seed, self.offset = (0, 0) if always else seed_pair(self.name, seed)
        self.always = always

    def out_shape(self, shape):
        return check_image(self.name, shape)

    def params(self, shape, seed_base, n, sizes=None):
        if self.always:
            return [np.ones(n, np.int64)]
        return [_flip_flags(np.int64(self.seed), np.int64(seed_base + self.offset), n)]

    def sampler(self, g, names, in_shape, inner):
        (flags,) = names
        width = in_shape[1]

        def flip(y, x, c):
            xx = g.fresh("x")
            g.emit(f"{xx} = ({width} - 1 - {x}) if {flags}[b] != 0 else {x}")
            return inner(y, xx, c)
        return flip

    def describe(self):
        return "flip_left_right" if self.always else f"random_flip_left_right(seed={self.seed})"


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


class _Transpose(Step):
    """Each element's dims permuted (the kernel maps its output position back)."""

    name = "transpose"
    kind = "layout"

    def __init__(self, perm):
        self.perm = tuple(int(p) for p in perm)

    def out_shape(self, shape):
        if sorted(self.perm) != list(range(len(shape))):
            raise ValueError(f"nd.gpu.transpose: perm {self.perm} is not a permutation of the "
                             f"{len(shape)} element dims")
        return tuple(shape[p] for p in self.perm)

    def sampler(self, g, names, in_shape, inner):
        return inner

    def describe(self):
        return "hwc_to_chw" if self.perm == (2, 0, 1) else f"transpose({self.perm})"


# ------------------------------------------------------------------ crops and flips

def _draw_window(image, size, seed):
    """The lift of random_crop: a window of the image at drawn offsets."""
    if not isinstance(image, expr.Expr) or not isinstance(seed, (tuple, list)) or len(seed) != 2:
        raise NotElementwise("random_crop of a computed or non-image value")
    if len(image.shape) != 3 or not isinstance(size, (tuple, list)) or len(size) != 3:
        raise NotElementwise("random_crop needs an (H, W, C) image and a constant size")
    height, width, channels = image.shape
    crop_height, crop_width, crop_channels = (int(v) for v in size)
    if crop_channels != channels or crop_height > height or crop_width > width:
        raise NotElementwise("a crop that does not fit")
    top = expr.draw("randint", seed[0], seed[1], _CROP_TOP_STREAM, 0, height - crop_height + 1)
    left = expr.draw("randint", seed[0], seed[1], _CROP_LEFT_STREAM, 0, width - crop_width + 1)
    return expr.window(image, (crop_height, crop_width, channels), top, left, False)


def _lift_flip(image):
    return expr.flipped(image, True)


def _lift_random_flip(image, seed):
    if not isinstance(seed, (tuple, list)) or len(seed) != 2:
        raise NotElementwise("random_flip_left_right with a seed that is not a pair")
    draw = expr.draw("uniform", seed[0], seed[1], _FLIP_STREAM)
    return expr.flipped(image, expr.apply_ufunc(np.less, draw, 0.5))


def _lift_normalize(image, mean, std):
    if not isinstance(image, expr.Expr) or image.dtype.kind not in "biuf" or len(image.shape) != 3 \
            or isinstance(mean, expr.Expr) or isinstance(std, expr.Expr):
        raise NotElementwise("normalize of a non-image or with symbolic constants")
    shape = image.shape
    channels = shape[2]
    m = expr.channel_constant(_per_channel(np.asarray(mean, np.float64), channels), shape)
    s = expr.channel_constant(_per_channel(np.asarray(std, np.float64), channels), shape)
    return expr.apply_ufunc(np.true_divide,
                            expr.apply_ufunc(np.subtract, expr.cast(image, np.float32), m), s)


@define(lift=_draw_window, gpu=_RandomCrop,
        numba=lambda image, size, seed: lambda image, size, seed: _random_crop(image, size, seed))
def random_crop(image, size, seed):
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
    return _random_crop(image, size, seed)


@define(lift=_lift_flip, gpu=lambda: _Flip(None, always=True),
        numba=lambda image: lambda image: _flip_left_right(image))
def flip_left_right(image):
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
    return _flip_left_right(image)


@define(lift=_lift_random_flip, gpu=_Flip,
        numba=lambda image, seed: lambda image, seed: _random_flip_left_right(image, seed))
def random_flip_left_right(image, seed):
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
    return _random_flip_left_right(image, seed)


@define(lift=_lift_normalize, gpu=_Normalize,
        numba=lambda image, mean, std: lambda image, mean, std: _normalize(image, mean, std))
def normalize(image, mean, std):
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
    # Lists as arrays: Numba's reflected lists are deprecated.
    return _normalize(image, *(np.asarray(v) if isinstance(v, list) else v for v in (mean, std)))


# -------------------------------------------------------------- resizing and layout

def _resize_nopython(image, size, method="bilinear"):
    _typing_image("resize", image)
    _typing_pair("resize", "size", size, types.Integer)
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
    if name not in _RESIZE_METHODS:
        raise ValueError(f"resize: unsupported method {name!r}; expected one of "
                         f"{', '.join(map(repr, _RESIZE_METHODS))}")
    resize_impl = _resize_bilinear if name == "bilinear" else _resize_nearest

    def impl(image, size, method="bilinear"):
        _pair_length("resize", "size", size)
        return resize_impl(image, size[0], size[1])
    return impl


@define(gpu=_Resize, numba=_resize_nopython, numba_options={"prefer_literal": True})
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
    if method not in _RESIZE_METHODS:
        raise ValueError(f"resize: unsupported method {method!r}; expected one of "
                         f"{', '.join(map(repr, _RESIZE_METHODS))}")
    image = _as_image("resize", image)
    out_height, out_width = _int_pair("resize", "size", size)
    if method == "bilinear":
        return _resize_bilinear(image, out_height, out_width)
    return _resize_nearest(image, out_height, out_width)


def _random_resized_crop_window_nopython(height, width, scale=(0.08, 1.0),
                                         ratio=(3 / 4, 4 / 3), seed=None):
    op = "random_resized_crop"
    for name, value in (("height", height), ("width", width)):
        if not isinstance(value, types.Integer):
            raise TypingError(f"{op}: {name} must be an integer, got {value}")
    _typing_pair(op, "scale", scale, (types.Integer, types.Float), required=False)
    _typing_pair(op, "ratio", ratio, (types.Integer, types.Float), required=False)
    _typing_pair(op, "seed", seed, types.Integer)

    def impl(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
        _pair_length(op, "scale", scale)
        _pair_length(op, "ratio", ratio)
        _pair_length(op, "seed", seed)
        return _random_resized_crop_window(
            np.int64(height), np.int64(width), np.float64(scale[0]), np.float64(scale[1]),
            np.float64(ratio[0]), np.float64(ratio[1]), np.int64(seed[0]), np.int64(seed[1]))
    return impl


@define(numba=_random_resized_crop_window_nopython)
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
    height, width = _int_pair(op, "image size", (height, width))
    scale_low, scale_high = _float_pair(op, "scale", scale)
    ratio_low, ratio_high = _float_pair(op, "ratio", ratio)
    seed, counter = _seed_pair(op, seed)
    top, left, crop_height, crop_width = _random_resized_crop_window(
        np.int64(height), np.int64(width), scale_low, scale_high,
        ratio_low, ratio_high, seed, counter)
    return int(top), int(left), int(crop_height), int(crop_width)


def _random_resized_crop_nopython(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                                  seed=None):
    op = "random_resized_crop"
    _typing_image(op, image)
    _typing_pair(op, "size", size, types.Integer)
    _typing_pair(op, "scale", scale, (types.Integer, types.Float), required=False)
    _typing_pair(op, "ratio", ratio, (types.Integer, types.Float), required=False)
    _typing_pair(op, "seed", seed, types.Integer)

    def impl(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
        _pair_length(op, "size", size)
        _pair_length(op, "scale", scale)
        _pair_length(op, "ratio", ratio)
        _pair_length(op, "seed", seed)
        return _random_resized_crop(
            image, size[0], size[1], np.float64(scale[0]), np.float64(scale[1]),
            np.float64(ratio[0]), np.float64(ratio[1]), np.int64(seed[0]), np.int64(seed[1]))
    return impl


@define(gpu=_RandomResizedCrop, numba=_random_resized_crop_nopython)
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
    image = _as_image(op, image)
    out_height, out_width = _int_pair(op, "size", size)
    scale_low, scale_high = _float_pair(op, "scale", scale)
    ratio_low, ratio_high = _float_pair(op, "ratio", ratio)
    seed, counter = _seed_pair(op, seed)
    return _random_resized_crop(image, out_height, out_width, scale_low, scale_high,
                                ratio_low, ratio_high, seed, counter)


# ------------------------------------------------ sample_distorted_bounding_box
#
# TensorFlow's algorithm (sample_distorted_bounding_box_op.cc) in its float32
# arithmetic, with nbdata's counter-based draws in place of TF's Philox stream.

_SDBB_OP = "StatelessSampleDistortedBoundingBox"
_SDBB_STREAM = 0x736462625F626F78  # b"sdbb_box": sample_distorted_bounding_box's draws
_SDBB_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64))
_TWO_POW_MINUS_24 = np.float32(2.0 ** -24)
_SHIFT40 = np.uint64(40)
_TF_EPS = np.float64(np.float32(1e-7))   # TF's kEps (a float, widened to double)
_INT32_MAX = 2147483647


@numba.njit(nogil=True, cache=True)
def _unit_float32(key, draw):
    """TF's RandFloat with nbdata's draws: float32 in [0, 1) from 24 random bits."""
    return np.float32(random.bits(key, draw) >> _SHIFT40) * _TWO_POW_MINUS_24


@numba.njit(nogil=True, cache=True)
def _lrint(x):
    return np.int64(np.rint(x))


@numba.njit(nogil=True, cache=True)
def _generate_crop(width, height, min_rel, max_rel, aspect, key, draw):
    """TF's GenerateRandomCrop: ``(ok, x, y, w, h, draw)``, each of its Uniform(n)
    draws being ``random.randint(key, draw, 0, n)`` at the next ``draw``."""
    f32 = np.float32
    if max_rel <= 0.0 or aspect <= 0.0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return False, 0, 0, 0, 0, draw
    min_area = min_rel * f32(width) * f32(height)
    max_area = max_rel * f32(width) * f32(height)
    h = _lrint(np.sqrt(min_area / aspect))
    max_h = _lrint(np.sqrt(max_area / aspect))
    if _lrint(f32(max_h) * aspect) > width:
        # The smallest max_h with round(max_h * aspect) <= width.
        max_h = np.int64((np.float64(width) + 0.5 - _TF_EPS) / np.float64(aspect))
        if _lrint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:   # uniform in [h, max_h]
        h += random.randint(key, draw, 0, max_h - h + 1)
        draw += 1
    w = _lrint(f32(h) * aspect)
    area = f32(w * h)
    if area < min_area:   # rounding left it too small: one row more
        h += 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area > max_area:   # ... or too large: one row less
        h -= 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return False, 0, 0, 0, 0, draw
    y = 0
    if h < height:   # TF's Uniform(height - h): the last offset is never drawn
        y = random.randint(key, draw, 0, height - h)
        draw += 1
    x = 0
    if w < width:
        x = random.randint(key, draw, 0, width - w)
        draw += 1
    return True, x, y, w, h, draw


@numba.njit(nogil=True, cache=True)
def _covers(x, y, w, h, rects, min_covered):
    """TF's SatisfiesOverlapConstraints: the crop covers ``min_covered`` of some box."""
    f32 = np.float32
    if f32(w * h) < 1.0:
        return False
    for b in range(rects.shape[0]):
        x0, y0, x1, y1 = rects[b, 0], rects[b, 1], rects[b, 2], rects[b, 3]
        area = f32((x1 - x0) * (y1 - y0))
        if area < 1.0:
            continue
        ix0, iy0 = max(x, x0), max(y, y0)
        ix1, iy1 = min(x + w, x1), min(y + h, y1)
        inter = f32(0.0) if ix0 > ix1 or iy0 > iy1 else f32((ix1 - ix0) * (iy1 - iy0))
        if inter / area >= min_covered:
            return True
    return False


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _sample_distorted_box(height, width, boxes, seed, counter, min_covered, aspect_low,
                          aspect_high, area_low, area_high, max_attempts, use_image):
    """``(y, x, h, w, bbox)``: the box TF's algorithm picks (see
    ``sample_distorted_bounding_box``); ValueError for boxes TF rejects."""
    f32 = np.float32
    n = boxes.shape[0]
    rects = np.empty((max(n, 1), 4), np.int64)
    for b in range(n):
        for i in range(4):
            v = boxes[b, i]
            if not (v >= 0.0 and v <= 1.0):
                raise ValueError("All bounding box coordinates must be in [0.0, 1.0]")
        rects[b, 0] = np.int64(boxes[b, 1] * f32(width))
        rects[b, 1] = np.int64(boxes[b, 0] * f32(height))
        rects[b, 2] = np.int64(boxes[b, 3] * f32(width))
        rects[b, 3] = np.int64(boxes[b, 2] * f32(height))
    if n == 0:
        if not use_image:
            raise ValueError("No bounding boxes provided as input. One must enable "
                             "use_image_if_no_bounding_boxes if you wish to not provide "
                             "any bounding boxes.")
        rects[0, 0], rects[0, 1], rects[0, 2], rects[0, 3] = 0, 0, width, height
    key = random.key(seed, _SDBB_STREAM, counter)
    draw = 0
    x, y, w, h = 0, 0, width, height   # the whole image when every attempt fails
    for _ in range(max_attempts):
        aspect = _unit_float32(key, draw) * (aspect_high - aspect_low) + aspect_low
        draw += 1
        ok, cx, cy, cw, ch, draw = _generate_crop(width, height, area_low, area_high, aspect,
                                                  key, draw)
        if ok and _covers(cx, cy, cw, ch, rects, min_covered):
            x, y, w, h = cx, cy, cw, ch
            break
    bbox = np.empty((1, 1, 4), np.float32)
    bbox[0, 0, 0] = f32(y) / f32(height)
    bbox[0, 0, 1] = f32(x) / f32(width)
    bbox[0, 0, 2] = f32(y + h) / f32(height)
    bbox[0, 0, 3] = f32(x + w) / f32(width)
    return y, x, h, w, bbox


@numba.njit(nogil=True, cache=True)
def _sdbb_outputs(image_size, boxes, seed, counter, min_covered, aspect_low, aspect_high,
                  area_low, area_high, max_attempts, use_image):
    if image_size.shape[0] != 3:
        raise ValueError("image_size must contain 3 elements")
    height, width = np.int64(image_size[0]), np.int64(image_size[1])
    if height < 0 or height >= _INT32_MAX:
        raise ValueError("image height cannot be >= int32 max")
    if width < 0 or width >= _INT32_MAX:
        raise ValueError("image width cannot be >= int32 max")
    y, x, h, w, bbox = _sample_distorted_box(height, width, boxes, seed, counter, min_covered,
                                             aspect_low, aspect_high, area_low, area_high,
                                             max_attempts, use_image)
    begin = np.empty(3, image_size.dtype)
    size = np.empty(3, image_size.dtype)
    begin[0], begin[1], begin[2] = y, x, 0
    size[0], size[1], size[2] = h, w, -1
    return begin, size, bbox


def _f32_text(value) -> str:
    """A float as TensorFlow's error messages print it (C++'s default: %g)."""
    return f"{float(np.float32(value)):g}"


def _sdbb_attrs(min_object_covered, aspect_ratio_range, area_range, max_attempts,
                use_image_if_no_bounding_boxes) -> tuple:
    """The checked attributes, as float32 and ints, with TensorFlow's errors."""
    def pair(value, default, what):
        value = default if value is None else value
        try:
            values = [np.float32(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
        except (TypeError, ValueError):
            raise TypeError(f"sample_distorted_bounding_box: {what} must be two numbers, got "
                            f"{value!r}") from None
        return values

    aspect = pair(aspect_ratio_range, (0.75, 1.33), "aspect_ratio_range")
    if len(aspect) != 2:
        raise InvalidArgumentError("Aspect ratio range field must specify 2 dimensions",
                                   _SDBB_OP)
    if not (aspect[0] > 0 and aspect[1] > 0):
        raise InvalidArgumentError("Aspect ratio range must be non-negative: "
                                   f"[{_f32_text(aspect[0])}, {_f32_text(aspect[1])}]",
                                   _SDBB_OP)
    area = pair(area_range, (0.05, 1.0), "area_range")
    if len(area) != 2:
        raise InvalidArgumentError("Area range field must specify 2 dimensions", _SDBB_OP)
    text = f"[{_f32_text(area[0])}, {_f32_text(area[1])}]"
    if not (area[0] > 0 and area[1] > 0):
        raise InvalidArgumentError(f"Area range must be non-negative: {text}", _SDBB_OP)
    if not (area[0] <= 1 and area[1] <= 1):
        raise InvalidArgumentError(f"Area range must be less then or equal to 1.0: {text}",
                                   _SDBB_OP)
    attempts = 100 if max_attempts is None else operator.index(max_attempts)
    if attempts <= 0:
        raise InvalidArgumentError(f"Max attempts must be non-negative: {attempts}", _SDBB_OP)
    covered = np.asarray(0.1 if min_object_covered is None else min_object_covered)
    return covered, aspect, area, attempts, bool(use_image_if_no_bounding_boxes)


def _sdbb_spec(image_size, bounding_boxes, seed=None, *args, **kwargs):
    spec = getattr(image_size, "spec", None)
    dtype = spec.dtype if spec is not None else np.asarray(image_size).dtype
    return (TensorSpec((3,), dtype), TensorSpec((3,), dtype), TensorSpec((1, 1, 4), np.float32))


def _sdbb_nopython(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
                   aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), max_attempts=100,
                   use_image_if_no_bounding_boxes=False, name=None):
    op = "sample_distorted_bounding_box"
    if not (isinstance(image_size, types.Array) and image_size.ndim == 1
            and as_dtype(image_size.dtype) in _SDBB_DTYPES):
        raise TypingError(f"{op}: image_size must be a 1-D array of uint8, int8, int16, "
                          f"int32 or int64, got {image_size}")
    if not (isinstance(bounding_boxes, types.Array) and bounding_boxes.ndim == 3
            and isinstance(bounding_boxes.dtype, types.Float)):
        raise TypingError(f"{op}: bounding_boxes must be a 3-D float array, got "
                          f"{bounding_boxes}")
    _typing_pair(op, "seed", seed, types.Integer)
    _typing_pair(op, "aspect_ratio_range", aspect_ratio_range, (types.Integer, types.Float),
                 required=False)
    _typing_pair(op, "area_range", area_range, (types.Integer, types.Float), required=False)

    def impl(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
             aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), max_attempts=100,
             use_image_if_no_bounding_boxes=False, name=None):
        _pair_length(op, "seed", seed)
        _pair_length(op, "aspect_ratio_range", aspect_ratio_range)
        _pair_length(op, "area_range", area_range)
        aspect_low = np.float32(aspect_ratio_range[0])
        aspect_high = np.float32(aspect_ratio_range[1])
        area_low, area_high = np.float32(area_range[0]), np.float32(area_range[1])
        covered = np.float32(min_object_covered)
        if not (aspect_low > 0 and aspect_high > 0):
            raise ValueError("Aspect ratio range must be non-negative")
        if not (area_low > 0 and area_high > 0 and area_low <= 1 and area_high <= 1):
            raise ValueError("Area range must be in (0, 1]")
        if max_attempts <= 0:
            raise ValueError("Max attempts must be non-negative")
        if not covered >= 0:
            raise ValueError("Min object covered must be non-negative")
        if bounding_boxes.shape[2] != 4:
            raise ValueError("bounding boxes must have shape [4] or [*, 4]")
        boxes = bounding_boxes.reshape(-1, 4).astype(np.float32)
        return _sdbb_outputs(image_size, boxes, np.int64(seed[0]), np.int64(seed[1]), covered,
                             aspect_low, aspect_high, area_low, area_high,
                             np.int64(max_attempts), bool(use_image_if_no_bounding_boxes))
    return impl


@define(name="sample_distorted_bounding_box", abstract=_sdbb_spec, numba=_sdbb_nopython)
def _sample_distorted_bounding_box(image_size, bounding_boxes, seed=None,
                                   min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                                   area_range=(0.05, 1.0), max_attempts=100,
                                   use_image_if_no_bounding_boxes=False, name=None):
    op = "sample_distorted_bounding_box"
    covered, aspect, area, attempts, use_image = _sdbb_attrs(
        min_object_covered, aspect_ratio_range, area_range, max_attempts,
        use_image_if_no_bounding_boxes)
    seed, counter = _seed_pair(op, seed)
    size = np.asarray(image_size)
    if size.dtype not in _SDBB_DTYPES:
        name = {"float32": "float", "float64": "double", "float16": "half"}.get(
            size.dtype.name, size.dtype.name)
        raise InvalidArgumentError(
            f"Value for attr 'T' of {name} is not in the list of allowed values: "
            "uint8, int8, int16, int32, int64", _SDBB_OP)
    shape = ",".join(map(str, size.shape))
    if size.ndim != 1:
        raise InvalidArgumentError(f"image_size must be 1-dimensional[{shape}]", _SDBB_OP)
    if size.shape[0] != 3:
        raise InvalidArgumentError(f"image_size must contain 3 elements[{shape}]", _SDBB_OP)
    # TF reads the sizes as uint64: a negative one is too large.
    for value, what in ((int(size[0]), "height"), (int(size[1]), "width")):
        if not 0 <= value < _INT32_MAX:
            raise InvalidArgumentError(f"image {what} cannot be >= int32 max", _SDBB_OP)
    boxes = np.asarray(bounding_boxes)
    if boxes.dtype.kind not in "iuf":
        raise TypeError(f"{op}: bounding_boxes must be float32, got {boxes.dtype}")
    boxes = boxes.astype(np.float32)
    shape = ",".join(map(str, boxes.shape))
    if boxes.ndim != 3:
        raise InvalidArgumentError(
            f"input boxes must be 3-dimensional [batch, num_boxes, coords]: [{shape}]", _SDBB_OP)
    if boxes.shape[2] != 4:
        raise InvalidArgumentError(f"bounding boxes must have shape [4] or [*, 4], got "
                                   f"[{shape}]", _SDBB_OP)
    if covered.ndim != 0:
        raise InvalidArgumentError(f"min_object_covered must be 0-D, got shape "
                                   f"[{','.join(map(str, covered.shape))}]", _SDBB_OP)
    covered = np.float32(covered)
    if not covered >= 0:
        raise InvalidArgumentError(f"Min object covered must be non-negative: "
                                   f"{_f32_text(covered)}", _SDBB_OP)
    flat = boxes.reshape(-1, 4)
    bad = flat[~((flat >= 0) & (flat <= 1))]
    if bad.size:
        raise InvalidArgumentError(f"All bounding box coordinates must be in [0.0, 1.0]: "
                                   f"{_f32_text(bad[0])}", _SDBB_OP)
    if not flat.size and not use_image:
        raise InvalidArgumentError(
            "No bounding boxes provided as input. One must enable "
            "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes.",
            _SDBB_OP)
    return _sdbb_outputs(size, np.ascontiguousarray(flat), seed, counter, covered,
                         aspect[0], aspect[1], area[0], area[1], np.int64(attempts), use_image)


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
                                  aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
                                  max_attempts=100, use_image_if_no_bounding_boxes=False,
                                  name=None):
    """A random crop box of an image covering part of its bounding boxes
    (``tf.image.stateless_sample_distorted_bounding_box``; TF's Inception crop).

    TensorFlow's algorithm and float32 arithmetic: each attempt ``a < max_attempts``
    draws an aspect ratio uniformly in ``aspect_ratio_range``; the crop height is
    ``round(sqrt(area_range[0] * H * W / aspect))`` plus a uniform draw up to the
    largest height whose area stays within ``area_range[1]`` and whose width
    ``round(height * aspect)`` fits (one row more or less where rounding leaves the
    area outside ``area_range``); the offsets are uniform in ``[0, H - h)`` and
    ``[0, W - w)`` (TF never draws the last offset; 0 when the crop fills the side).
    The first crop covering at least ``min_object_covered`` of one of the boxes
    (boxes of less than a pixel skipped; no boxes: the image, with
    ``use_image_if_no_bounding_boxes``) is taken; if no attempt succeeds, the whole
    image.

    Stateless, like nbdata's other random ops: TensorFlow's draws come from its Philox
    stream, nbdata's from ``nbdata.random`` (so the boxes follow TF's distribution,
    not its exact values): with ``seed = (s, c)`` and ``k = random.key(s, stream, c)``
    (stream the ASCII of ``b"sdbb_box"``), draw ``j`` of the element is
    ``random.bits(k, j)``: an aspect draw takes its top 24 bits as a float32 in [0, 1),
    each uniform integer below ``n`` is ``random.randint(k, j, 0, n)``, in TF's order.

    Args:
        image_size: ``[height, width, channels]``, a 1-D array of uint8, int8, int16,
            int32 or int64 (``extract_jpeg_shape``'s output, say).
        bounding_boxes: float ``[batch, N, 4]`` boxes ``[ymin, xmin, ymax, xmax]`` in
            [0, 1] (all batches' boxes are used, as in TF).
        seed: ``(seed, counter)``, two integers (required); pass e.g. the element index
            from ``Dataset.enumerate`` as the counter.
        min_object_covered: the fraction of a box the crop must cover (>= 0).
        aspect_ratio_range: ``(low, high)`` of the crop's width / height (> 0).
        area_range: ``(low, high)`` of the crop's area as a fraction of the image's,
            in (0, 1].
        max_attempts: attempts before the whole image is taken (> 0).
        use_image_if_no_bounding_boxes: with no boxes, take the whole image as the box
            (else InvalidArgumentError).
        name: ignored (TensorFlow's op name).

    Returns:
        ``(begin, size, bboxes)``: ``begin = [y, x, 0]`` and ``size = [h, w, -1]`` of
        ``image_size``'s dtype (``-1`` wraps for uint8, as in TF), for ``np`` slicing or
        ``decode_and_crop_jpeg``'s window ``[y, x, h, w]``, and the crop as a
        ``(1, 1, 4)`` float32 box ``[y/H, x/W, (y+h)/H, (x+w)/W]``.

    Raises:
        InvalidArgumentError: TensorFlow's errors for bad shapes, dtypes, ranges, box
            coordinates outside [0, 1], no boxes without
            ``use_image_if_no_bounding_boxes``.
        TypeError: ``seed`` missing or not two integers.

    Inside ``Dataset.map`` it compiles into the fused kernel (with the header shape
    from ``extract_jpeg_shape`` and the crop of ``decode_and_crop_jpeg``).

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> boxes = np.array([[[0.1, 0.2, 0.8, 0.9]]], np.float32)
        >>> begin, size, box = image.sample_distorted_bounding_box(
        ...     np.array([100, 200, 3], np.int32), boxes, seed=(1, 0))
        >>> begin.dtype, size[2], box.shape
        (dtype('int32'), np.int32(-1), (1, 1, 4))
        >>> image.sample_distorted_bounding_box(   # only the whole image fits
        ...     np.array([100, 200, 3]), boxes, seed=(1, 0), area_range=(1.0, 1.0),
        ...     aspect_ratio_range=(2.0, 2.0))[:2]
        (array([0, 0, 0]), array([100, 200,  -1]))
    """
    if is_symbolic(image_size, bounding_boxes, seed, min_object_covered):
        # Constants as arrays and tuples, so that a compiled twin reads them as such.
        if not is_symbolic(bounding_boxes):
            bounding_boxes = np.asarray(bounding_boxes, np.float32)
        if not is_symbolic(aspect_ratio_range) and aspect_ratio_range is not None:
            aspect_ratio_range = tuple(float(v) for v in aspect_ratio_range)
        if not is_symbolic(area_range) and area_range is not None:
            area_range = tuple(float(v) for v in area_range)
    return _sample_distorted_bounding_box(
        image_size, bounding_boxes, seed, min_object_covered, aspect_ratio_range, area_range,
        max_attempts, use_image_if_no_bounding_boxes, name)


def _transpose_nopython(image, perm):
    if not (isinstance(image, types.Array) and isinstance(image.dtype, (
            types.Boolean, types.Integer, types.Float))):
        raise TypingError(f"transpose: expected a numeric array, got {image}")
    if not (isinstance(perm, types.BaseTuple) and all(
            isinstance(t, types.Integer) for t in perm)):
        raise TypingError(f"transpose: perm must be a tuple of integers, got {perm}")
    if len(perm) != image.ndim:
        raise ValueError(f"transpose: perm has {len(perm)} axes but the array has "
                         f"{image.ndim}")
    return lambda image, perm: _transpose(image, perm)


@define(gpu=_Transpose, numba=_transpose_nopython)
def transpose(image, perm):
    """Permutes the axes of an array into a new C-contiguous array.

    ``np.transpose(image, perm).copy()``: the CPU twin of a GPU layout
    change, so the result is always a fresh C-contiguous copy.

    Args:
        image: An array of any numeric or bool dtype and any rank.
        perm: The permutation of ``range(image.ndim)``: output axis ``i``
            is input axis ``perm[i]``.

    Returns:
        A new C-contiguous array of the same dtype.

    Raises:
        ValueError: If ``perm`` is not a permutation of the array's axes.
        TypeError: If ``perm`` does not hold integers.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12).reshape(2, 3, 2)
        >>> out = image.transpose(img, (2, 0, 1))
        >>> out.shape, out.flags.c_contiguous, out[1].tolist()
        ((2, 2, 3), True, [[1, 3, 5], [7, 9, 11]])
    """
    image = np.asarray(image)
    if image.dtype.kind not in "biuf" or image.dtype == np.float16:
        raise TypeError(f"transpose: unsupported dtype {image.dtype}")
    perm = _int_pair("transpose", "perm", perm, count=image.ndim)
    return _transpose(image, perm)


def _hwc_to_chw_nopython(image):
    if not (isinstance(image, types.Array) and image.ndim in (3, 4)):
        raise TypingError(f"hwc_to_chw: expected an (H, W, C) or (N, H, W, C) array, "
                          f"got {image}")
    if image.ndim == 3:
        return lambda image: transpose(image, (2, 0, 1))
    return lambda image: transpose(image, (0, 3, 1, 2))


@define(gpu=lambda: _Transpose((2, 0, 1)), numba=_hwc_to_chw_nopython)
def hwc_to_chw(image):
    """Moves the channel axis first: (H, W, C) -> (C, H, W), (N, H, W, C) -> (N, C, H, W).

    A new C-contiguous array (see :func:`transpose`).

    Args:
        image: A 3-D (H, W, C) or 4-D (N, H, W, C) array.

    Returns:
        The (C, H, W) or (N, C, H, W) array, of the same dtype.

    Raises:
        ValueError: If the array is not 3-D or 4-D.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
        >>> image.hwc_to_chw(img)[0].tolist()
        [[0, 3], [6, 9]]
    """
    image = np.asarray(image)
    if image.ndim not in (3, 4):
        raise ValueError(f"hwc_to_chw: expected an (H, W, C) or (N, H, W, C) array, "
                         f"got shape {image.shape}")
    return transpose(image, (2, 0, 1) if image.ndim == 3 else (0, 3, 1, 2))


def _cast_nopython(image, dtype):
    if not (isinstance(image, types.Array) and isinstance(image.dtype, (
            types.Boolean, types.Integer, types.Float))):
        raise TypingError(f"cast: expected a numeric array, got {image}")
    if isinstance(dtype, types.NumberClass):
        target = dtype.instance_type
    elif isinstance(dtype, types.DType):
        target = dtype.dtype
    elif isinstance(dtype, types.StringLiteral):
        target = dtype.literal_value
    else:
        raise TypingError(f"cast: dtype must be a NumPy dtype or a constant string, got {dtype}")
    try:
        target = as_dtype(target) if isinstance(target, types.Type) else target
    except NotImplementedError:
        raise TypeError(f"cast: unsupported target dtype {target}") from None
    target_type = _cast_dtype(target).type
    return lambda image, dtype: _cast(image, target_type)


def _lift_cast(image, dtype):
    return expr.cast(image, _cast_dtype(dtype))


@define(lift=_lift_cast, gpu=_Cast, numba=_cast_nopython, numba_options={"prefer_literal": True})
def cast(image, dtype):
    """Converts an array's values to ``dtype``, like ``tf.cast`` (no rescaling).

    ``np.ascontiguousarray(image).astype(dtype)``: floats to integers
    truncate toward zero and bool is ``value != 0``. As in NumPy and TF,
    float values outside the target integer range (and NaN) give
    unspecified results, which may differ between CPU and GPU: clip first.
    Unlike ``tf.image.convert_image_dtype`` the values are not rescaled.

    Args:
        image: An array of any numeric or bool dtype and any rank.
        dtype: The target dtype (bool, an integer type, float32 or float64),
            as anything ``np.dtype`` accepts (``np.float32``, ``"uint8"``).

    Returns:
        A new C-contiguous array of ``dtype`` and the image's shape.

    Raises:
        TypeError: If ``dtype`` or the image's dtype is not supported.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> image.cast(np.array([[-1.7, 0.5, 2.9]]), np.int32)
        array([[-1,  0,  2]], dtype=int32)
        >>> image.cast(np.array([0, 255], dtype=np.uint8), "float32")
        array([  0., 255.], dtype=float32)
    """
    target = _cast_dtype(dtype)
    image = np.asarray(image)
    if image.dtype.kind not in "biuf" or image.dtype == np.float16:
        raise TypeError(f"cast: unsupported image dtype {image.dtype}")
    return _cast(image, target.type)


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
    s, counter = _seed_pair(op, seed)
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


_brightness_cpu = numba.njit(nogil=True, cache=True)(_brightness_value)
_contrast_cpu = numba.njit(nogil=True, cache=True)(_contrast_value)
_gray_cpu = numba.njit(nogil=True, cache=True)(_gray_value)
_saturated_cpu = numba.njit(nogil=True, cache=True, error_model="numpy")(_saturated_rgb)


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


@define(lift=_lift_brightness, numba=_brightness_nopython,
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
    max_delta = _check_max_delta(max_delta)
    u = expr.draw("uniform", seed[0], seed[1], _BRIGHTNESS_STREAM)
    delta = expr.apply_ufunc(np.add, -max_delta, expr.apply_ufunc(np.multiply, u, 2 * max_delta))
    return _lift_brightness_of(image, expr.cast(delta, np.float32))


def _check_max_delta(max_delta) -> float:
    max_delta = float(max_delta)
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return max_delta


def _random_brightness_nopython(image, max_delta, seed):
    to_float, from_float, low, high, dtype = _typing_conversion("random_brightness", image)
    _typing_pair("random_brightness", "seed", seed, types.Integer)

    def impl(image, max_delta, seed):
        if max_delta < 0:
            raise ValueError("max_delta must be non-negative.")
        u = random.uniform(random.key(np.int64(seed[0]), _BRIGHTNESS_STREAM, 0), np.int64(seed[1]))
        delta = np.float32(-np.float64(max_delta) + u * (2 * np.float64(max_delta)))
        return _adjust_brightness(image, delta, to_float, from_float, low, high,
                                  np.empty(image.shape, dtype))
    return impl


def _random_brightness_step(max_delta, seed):
    max_delta = _check_max_delta(max_delta)
    return _Brightness(drawn=(_BRIGHTNESS_STREAM, -max_delta, max_delta), seed=seed)


@define(lift=_lift_random_brightness, numba=_random_brightness_nopython,
        gpu=_random_brightness_step)
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
    max_delta = _check_max_delta(max_delta)
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


@define(numba=_contrast_nopython,
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


def _check_contrast_range(lower, upper) -> tuple:
    lower, upper = float(lower), float(upper)
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return lower, upper


def _random_contrast_nopython(image, lower, upper, seed):
    to_float, from_float, low, high, dtype = _typing_conversion("random_contrast", image)
    _check_contrast_rank(image)
    _typing_pair("random_contrast", "seed", seed, types.Integer)

    def impl(image, lower, upper, seed):
        if upper <= lower:
            raise ValueError("upper must be > lower.")
        if lower < 0:
            raise ValueError("lower must be non-negative.")
        u = random.uniform(random.key(np.int64(seed[0]), _CONTRAST_STREAM, 0), np.int64(seed[1]))
        factor = np.float32(np.float64(lower) + u * (np.float64(upper) - np.float64(lower)))
        return _adjust_contrast(image, factor, to_float, from_float, low, high,
                                np.empty(image.shape, dtype))
    return impl


def _random_contrast_step(lower, upper, seed):
    lower, upper = _check_contrast_range(lower, upper)
    return _Contrast(drawn=(_CONTRAST_STREAM, lower, upper), seed=seed)


@define(numba=_random_contrast_nopython, gpu=_random_contrast_step)
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
    lower, upper = _check_contrast_range(lower, upper)
    return adjust_contrast(image, _drawn("random_contrast", seed, _CONTRAST_STREAM, lower, upper))


# -- saturation and grayscale

def _pixel_step_shape(name: str, shape: tuple, channels: int) -> tuple:
    h, w, c = check_image(name, shape)
    if c != 3:
        raise ValueError(f"nd.gpu.{name}: input must have 3 channels but instead has {c} channels")
    return (h, w, channels)


@numba.njit(nogil=True, cache=True)
def _adjust_saturation(image, factor, to_float, from_float, low, high, out):
    x = np.ascontiguousarray(image).reshape(-1)
    o = out.reshape(-1)
    for p in range(x.size // 3):
        r, g, b = _saturated_cpu(np.float32(x[3 * p]) * to_float,
                                 np.float32(x[3 * p + 1]) * to_float,
                                 np.float32(x[3 * p + 2]) * to_float, factor)
        o[3 * p] = min(max(r * from_float, low), high)
        o[3 * p + 1] = min(max(g * from_float, low), high)
        o[3 * p + 2] = min(max(b * from_float, low), high)
    return out


class _Saturation(_ColorStep):
    name = "adjust_saturation"
    kind = "pixel"

    def out_shape(self, shape):
        return _pixel_step_shape(self.name, shape, 3)

    def sampler(self, g, names, in_shape, inner):
        def saturation(y, x, c):
            channels = [inner(y, x, str(k)) for k in range(3)]
            dtype = channels[0][1]
            to_float, from_float, low, high = self.converted(dtype)
            rgb = [g.fresh("r") for _ in range(3)]
            args = ", ".join(f"numba.float32({v}) * {to_float}" for v, _ in channels)
            g.emit(f"{', '.join(rgb)} = {g.device_function(_saturated_rgb)}({args}, "
                   f"{self.scalar(names)})")
            v = g.fresh("v")
            g.emit(f"{v} = {type_name(dtype)}(min(max(({rgb[0]} if {c} == 0 else ({rgb[1]} "
                   f"if {c} == 1 else {rgb[2]})) * {from_float}, {low}), {high}))")
            return v, dtype
        return saturation


def _check_rgb(op: str, image) -> None:
    if image.ndim < 1 or image.ndim < 3 and op == "adjust_saturation":
        raise TypingError(f"{op}: input must be at least 3-D, got {image}")


def _saturation_nopython(image, saturation_factor):
    to_float, from_float, low, high, dtype = _typing_conversion("adjust_saturation", image)
    _check_rgb("adjust_saturation", image)

    def impl(image, saturation_factor):
        if image.shape[-1] != 3:
            raise ValueError("adjust_saturation: input must have 3 channels")
        return _adjust_saturation(image, np.float32(saturation_factor), to_float, from_float,
                                  low, high, np.empty(image.shape, dtype))
    return impl


@define(numba=_saturation_nopython,
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
    return _color_call("adjust_saturation", _adjust_saturation, image, factor, min_rank=3,
                       rgb_to=3, op_name="AdjustSaturation")


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


@define(numba=_grayscale_nopython, gpu=_Grayscale)
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
