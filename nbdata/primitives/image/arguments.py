"""Argument checks shared by the ``nd.image`` ops (Python and Numba typing forms)."""

import operator

import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError

from nbdata.errors import FormattedValueError


RESIZE_METHODS = ("bilinear", "nearest")


def as_image(op, image, kinds="iuf"):
    """``image`` as an (H, W, C) ndarray of a dtype kind in ``kinds``."""
    image = np.asarray(image)
    if image.dtype.kind not in kinds or image.dtype == np.float16:
        raise TypeError(f"{op}: unsupported image dtype {image.dtype}")
    if image.ndim != 3:
        raise ValueError(
            f"{op}: expected an (H, W, C) image, got an array of shape {image.shape}")
    return image


def as_int64(value):
    """A Python or NumPy integer wrapped into int64 (modulo 2**64)."""
    value = operator.index(value) & ((1 << 64) - 1)
    return np.int64(value - (1 << 64) if value >= 1 << 63 else value)


def int_pair(op, name, value, count=2):
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


def float_pair(op, name, value):
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


def seed_counter(op, seed):
    """``(seed, counter)`` as two int64 values."""
    if seed is None:
        raise TypeError(f"{op}: seed=(seed, counter) is required")
    return tuple(as_int64(v) for v in int_pair(op, "seed", seed))


def cast_dtype(dtype):
    """``dtype`` as a NumPy bool, integer, float32 or float64 dtype, or TypeError."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"cast: {dtype!r} is not a dtype") from None
    if target.kind not in "biuf" or target == np.float16:
        raise TypeError(f"cast: unsupported target dtype {target}")
    return target


def typing_image(op, image, ndims=(3,)):
    if not (isinstance(image, types.Array) and image.ndim in ndims
            and isinstance(image.dtype, (types.Integer, types.Float))
            and image.dtype != types.float16):
        shape = "(H, W, C)" if ndims == (3,) else f"{ndims[0]}-D to {ndims[-1]}-D"
        raise TypingError(f"{op}: expected a {shape} array of integers, float32 or "
                          f"float64, got {image}")


def typing_pair(op, name, value, kinds, required=True):
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
def pair_length(op, name, value):
    if len(value) != 2:
        raise FormattedValueError("{}: {} must have 2 values, got {}", op, name, len(value))
