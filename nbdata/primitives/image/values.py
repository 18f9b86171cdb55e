"""``nd.image``'s per-value ops: cast and normalize."""


import numba
import numpy as np
from numba.core import types
from numba.extending import overload
from numba.core.errors import TypingError
from numba.np.numpy_support import as_dtype

from nbdata.errors import FormattedValueError
from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.gpu import Step, type_name
from nbdata.primitives.image.arguments import cast_dtype
from nbdata.primitives.table import define


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
    raise FormattedValueError(
        "normalize: mean and std must be scalars or have one value per channel ({}), "
        "got {} values", channels, flat.size)


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


@numba.njit(nogil=True, cache=True)
def _cast(image, dtype):
    return np.ascontiguousarray(image.astype(dtype))  # astype keeps a Fortran layout


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


@define(tags=("image",), lift=_lift_normalize, gpu=_Normalize,
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
    return _normalize(image, _float32_values(mean), _float32_values(std))


def _float32_values(values):
    """Numbers, sequences and numeric arrays as the 1-D float32 array ``_per_channel``
    makes of them in compiled code (the same conversion, done here), so that eager calls
    compile ``_normalize`` once per image dtype whatever form ``mean`` and ``std`` take;
    anything else as it is (Numba's typing reports it). Lists always become arrays:
    Numba's reflected lists are deprecated."""
    if isinstance(values, (list, tuple, int, float, np.ndarray, np.number)):
        array = np.asarray(values)
        if array.dtype.kind in "iuf":
            return array.ravel().astype(np.float32)
    return np.asarray(values) if isinstance(values, list) else values


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
    target_type = cast_dtype(target).type
    return lambda image, dtype: _cast(image, target_type)


def _lift_cast(image, dtype):
    return expr.cast(image, cast_dtype(dtype))


@define(tags=("image",),
        lift=_lift_cast, gpu=_Cast, numba=_cast_nopython, numba_options={"prefer_literal": True})
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
    target = cast_dtype(dtype)
    image = np.asarray(image)
    if image.dtype.kind not in "biuf" or image.dtype == np.float16:
        raise TypeError(f"cast: unsupported image dtype {image.dtype}")
    return _cast(image, target.type)
