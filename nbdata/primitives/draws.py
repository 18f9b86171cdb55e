"""Stateless random values as op-table entries: uniform, normal and truncated normal
values of a static shape, a pure function of ``seed = (seed, counter)`` as nbdata's other
random ops are (``nd.image.random_crop`` and the rest, ``nbdata/primitives/image``).

They are what TF1's random ops become inside a ``Dataset.map`` function
(``nbdata.compat.v1``: ``tf.random_uniform``, ``tf.random_normal``,
``tf.truncated_normal``): there ``seed[0]`` is the element's key (drawn from the map's
seed, the epoch and the element's index, ``nbdata/ops/keyed_map.py``) and ``seed[1]`` the
op's place among the function's random ops, so the values are the same at any thread
count, fused or not, and after an iterator restore.

Draw ``i`` of an op (``i = 0, 1, ...`` in order) is
``random.uniform(random.key(seed[0], stream, 0), seed[1] + (i << 32))`` (``randint``
for integers), with a stream per kind of op; a scalar uniform value is draw 0, so it is
the same counter-based draw as the image ops' and lifts into fused kernels as one
(:func:`nbdata.primitives.expr.draw`). Uniform floats are ``float64(minval) + (maxval -
minval) * u`` in float64, then cast; integers are uniform in ``[minval, maxval)``;
normal values take two draws each (Box-Muller: ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``);
truncated normal values draw again (two more draws) while beyond two standard
deviations. Every value is computed by one compiled kernel, whether called eagerly or
from a fused kernel.

>>> import numpy as np
>>> from nbdata.primitives.draws import stateless_uniform
>>> a = stateless_uniform((3,), (7, 0), 0.0, 1.0, np.float32)
>>> a.dtype, a.shape, bool(np.array_equal(a, stateless_uniform((3,), (7, 0), 0.0, 1.0, np.float32)))
(dtype('float32'), (3,), True)
>>> int(stateless_uniform((), (7, 1), -10, 10, np.int64)) in range(-10, 10)
True
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError

from nbdata import random
from nbdata.errors import InvalidArgumentError
from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.image.arguments import seed_counter, typing_pair
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec

UNIFORM_STREAM = 0x756E69666F726D5F   # b"uniform_"
NORMAL_STREAM = 0x6E6F726D616C5F5F    # b"normal__"
TRUNCATED_STREAM = 0x7472756E635F6E6F  # b"trunc_no"
_SHIFT = np.int64(32)


@numba.njit(nogil=True, cache=True)
def _unit(key, counter, i):
    return random.uniform(key, counter + (np.int64(i) << _SHIFT))


@numba.njit(nogil=True, cache=True)
def _fill_uniform(out, seed, counter, low, span):
    key = random.key(seed, UNIFORM_STREAM, 0)
    for j in range(out.size):
        out[j] = low + span * _unit(key, counter, j)


@numba.njit(nogil=True, cache=True)
def _fill_integers(out, seed, counter, low, high):
    if high <= low:
        raise ValueError("Need minval < maxval")
    key = random.key(seed, UNIFORM_STREAM, 0)
    for j in range(out.size):
        out[j] = random.randint(key, counter + (np.int64(j) << _SHIFT), low, high)


@numba.njit(nogil=True, cache=True)
def _normal(key, counter, i):
    u1 = 1.0 - _unit(key, counter, i)
    u2 = _unit(key, counter, i + 1)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@numba.njit(nogil=True, cache=True)
def _fill_normal(out, seed, counter, mean, stddev, truncated):
    key = random.key(seed, TRUNCATED_STREAM if truncated else NORMAL_STREAM, 0)
    i = 0
    for j in range(out.size):
        z = _normal(key, counter, i)
        i += 2
        while truncated and abs(z) > 2.0:
            z = _normal(key, counter, i)
            i += 2
        out[j] = mean + stddev * z


def _dtype(op: str, dtype, kinds: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in kinds or dt == np.float16:
        raise TypeError(f"{op}: unsupported dtype {dt}")
    return dt


def _shape(op: str, shape) -> tuple:
    dims = tuple(int(d) for d in np.asarray(shape, np.int64).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{op}: shape must be non-negative, got {list(dims)}")
    return dims


def _value(out: np.ndarray, shape: tuple):
    """The array filled (a scalar of its dtype for shape ())."""
    return out.reshape(shape) if shape else out[0]


def _spec(op: str, kinds: str):
    def rule(shape, seed, a=None, b=None, dtype=np.float32):
        return TensorSpec(_shape(op, shape), _dtype(op, dtype, kinds))
    return rule


# ------------------------------------------------------------------ numba forms

def _out_dtype(op: str, dtype, kinds: str):
    if isinstance(dtype, types.NumberClass):
        dt = dtype.instance_type
    elif isinstance(dtype, types.DType):
        dt = dtype.dtype
    else:
        raise TypingError(f"{op}: dtype must be a NumPy dtype, got {dtype}")
    if not isinstance(dt, (types.Integer, types.Float)) or dt == types.float16 or \
            (kinds == "f" and not isinstance(dt, types.Float)):
        raise TypingError(f"{op}: unsupported dtype {dt}")
    return dt


def _typing_shape(op: str, shape) -> int:
    if isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer) for t in shape):
        return len(shape)
    raise TypingError(f"{op}: shape must be a tuple of integers, got {shape}")


@numba.njit(nogil=True, cache=True)
def _fill_uniform_of(out, seed, minval, maxval):
    low = np.float64(minval)
    _fill_uniform(out, np.int64(seed[0]), np.int64(seed[1]), low, np.float64(maxval) - low)


@numba.njit(nogil=True, cache=True)
def _fill_integers_of(out, seed, minval, maxval):
    _fill_integers(out, np.int64(seed[0]), np.int64(seed[1]), np.int64(minval), np.int64(maxval))


def _uniform_nopython(shape, seed, minval, maxval, dtype):
    dt = _out_dtype("stateless_uniform", dtype, "iuf")
    typing_pair("stateless_uniform", "seed", seed, types.Integer)
    fill = _fill_integers_of if isinstance(dt, types.Integer) else _fill_uniform_of

    if _typing_shape("stateless_uniform", shape) == 0:
        def impl(shape, seed, minval, maxval, dtype):
            out = np.empty(1, dt)
            fill(out, seed, minval, maxval)
            return out[0]
    else:
        def impl(shape, seed, minval, maxval, dtype):
            out = np.empty(shape, dt)
            fill(out.reshape(-1), seed, minval, maxval)
            return out
    return impl


def _normal_nopython(truncated: bool):
    op = "stateless_truncated_normal" if truncated else "stateless_normal"

    def typing(shape, seed, mean, stddev, dtype):
        dt = _out_dtype(op, dtype, "f")
        typing_pair(op, "seed", seed, types.Integer)

        if _typing_shape(op, shape) == 0:
            def impl(shape, seed, mean, stddev, dtype):
                out = np.empty(1, dt)
                _fill_normal(out, np.int64(seed[0]), np.int64(seed[1]), np.float64(mean),
                             np.float64(stddev), truncated)
                return out[0]
        else:
            def impl(shape, seed, mean, stddev, dtype):
                out = np.empty(shape, dt)
                _fill_normal(out.reshape(-1), np.int64(seed[0]), np.int64(seed[1]),
                             np.float64(mean), np.float64(stddev), truncated)
                return out
        return impl
    return typing


# ------------------------------------------------------------------ lift rules

def _lift_uniform(shape, seed, minval=0, maxval=None, dtype=np.float32):
    """A scalar uniform value with constant bounds: one counter-based draw."""
    if tuple(shape) != () or not isinstance(seed, (tuple, list)) or len(seed) != 2 \
            or isinstance(minval, expr.Expr) or isinstance(maxval, expr.Expr):
        raise NotElementwise("stateless_uniform of an array shape or with computed bounds")
    dt = _dtype("stateless_uniform", dtype, "iuf")
    if dt.kind in "iu":
        low, high = int(minval), int(maxval)
        if high <= low:
            raise NotElementwise("integer bounds the kernel refuses")
        return expr.cast(expr.draw("randint", seed[0], seed[1], UNIFORM_STREAM, low, high), dt)
    low = np.float64(minval)
    span = np.float64(maxval) - low
    u = expr.draw("uniform", seed[0], seed[1], UNIFORM_STREAM)
    return expr.cast(expr.apply_ufunc(np.add, low, expr.apply_ufunc(np.multiply, span, u)), dt)


# ------------------------------------------------------------------ entries

@define(abstract=_spec("stateless_uniform", "iuf"), lift=_lift_uniform, numba=_uniform_nopython)
def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=np.float32):
    """Values of ``shape`` uniform in ``[minval, maxval)`` (``maxval`` 1 for floats by
    default; integers need it), a pure function of ``seed = (seed, counter)`` (see the
    module docstring for the exact draws).

    >>> import numpy as np
    >>> v = stateless_uniform((1000,), (3, 0), 3, 7, np.int32)
    >>> v.dtype, sorted(set(v.tolist()))
    (dtype('int32'), [3, 4, 5, 6])
    """
    dt = _dtype("stateless_uniform", dtype, "iuf")
    dims = _shape("stateless_uniform", shape)
    seed, counter = seed_counter("stateless_uniform", seed)
    out = np.empty(int(np.prod(dims, dtype=np.int64)), dt)
    if dt.kind in "iu":
        if maxval is None:
            raise ValueError(f"stateless_uniform: integer dtype {dt} needs maxval")
        low, high = int(minval), int(maxval)
        if high <= low:
            raise InvalidArgumentError(f"Need minval < maxval: {low} >= {high}")
        _fill_integers(out, seed, counter, np.int64(low), np.int64(high))
    else:
        low = np.float64(minval)
        _fill_uniform(out, seed, counter, low, np.float64(1.0 if maxval is None else maxval) - low)
    return _value(out, dims)


def _normal_values(op, shape, seed, mean, stddev, dtype, truncated):
    dt = _dtype(op, dtype, "f")
    dims = _shape(op, shape)
    seed, counter = seed_counter(op, seed)
    out = np.empty(int(np.prod(dims, dtype=np.int64)), dt)
    _fill_normal(out, seed, counter, np.float64(mean), np.float64(stddev), truncated)
    return _value(out, dims)


@define(abstract=_spec("stateless_normal", "f"), numba=_normal_nopython(False))
def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=np.float32):
    """Normally distributed values of ``shape``, a pure function of ``seed = (seed,
    counter)``.

    >>> import numpy as np
    >>> v = stateless_normal((4000,), (5, 0), 5.0, 0.5, np.float64)
    >>> bool(abs(v.mean() - 5.0) < 0.05 and abs(v.std() - 0.5) < 0.05)
    True
    """
    return _normal_values("stateless_normal", shape, seed, mean, stddev, dtype, False)


@define(abstract=_spec("stateless_truncated_normal", "f"), numba=_normal_nopython(True))
def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=np.float32):
    """Normal values of ``shape`` drawn again while beyond two standard deviations, a
    pure function of ``seed = (seed, counter)``.

    >>> import numpy as np
    >>> bool(np.abs(stateless_truncated_normal((4000,), (5, 0))).max() <= 2.0)
    True
    """
    return _normal_values("stateless_truncated_normal", shape, seed, mean, stddev, dtype, True)


__all__ = ["NORMAL_STREAM", "TRUNCATED_STREAM", "UNIFORM_STREAM", "stateless_normal",
           "stateless_truncated_normal", "stateless_uniform"]
