"""User functions over variable-length numeric rows held packed (an Arrow list column's
values and offsets: :class:`nbdata.chunks.PackedRows`), compiled by Numba and called
once per chunk instead of once per row in Python: a filter's predicate and a map whose
function keeps each row's length (``x * 2``, ``np.abs(x)``, ``x.astype(...)``).

A function is compiled with Python's error model and bounds checks, once (weakly
cached per function); it is used only where its compiled result type is what the map's
or filter's traced spec says. Where it does not compile, or a row raises, or a row's
result has another length, the caller runs the rows in Python (which raises the
function's error naming the op).
"""

from __future__ import annotations

import types
import weakref

import numba
import numpy as np

from nbdata.spec import TensorSpec, string

_PREDICATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def one_packed_leaf(spec) -> bool:
    """Whether an element is one numeric 1-D leaf of varying length."""
    return isinstance(spec, TensorSpec) and spec.dtype is not string and \
        spec.shape == (None,) and np.dtype(spec.dtype).kind in "biuf"


def _plain(function):
    fn = getattr(function, "fn", None)
    return fn if isinstance(fn, types.FunctionType) else None


def python_semantics_njit(fn):
    """``fn`` compiled by Numba with Python's error model and bounds checks: an index out
    of range raises IndexError, an integer division by zero ZeroDivisionError, as
    calling ``fn`` in Python does (never a value read past a row)."""
    return numba.njit(fn, error_model="python", boundscheck=True)


def _cached(cache, fn, key: tuple, make):
    """``make()``'s kernel for ``fn`` and ``key`` (the dtypes it was checked for: the
    same function over other dtypes is checked again), None where it does not apply."""
    per_fn = cache.setdefault(fn, {})
    if key not in per_fn:
        try:
            per_fn[key] = make()
        except Exception:   # noqa: BLE001 - it runs in Python then
            per_fn[key] = None
    return per_fn[key]


def predicate_kernel(function, spec):
    """``kernel(values, offsets, out)``: ``out[i] = fn(row i)`` (bools), or None."""
    fn = _plain(function)
    if fn is None or not one_packed_leaf(spec):
        return None

    def make():
        one = python_semantics_njit(fn)

        @numba.njit(nogil=True)
        def verdicts(values, offsets, out):
            for i in range(len(offsets) - 1):
                out[i] = one(values[offsets[i]:offsets[i + 1]])
        verdicts(np.zeros(3, spec.dtype), np.array([0, 1, 3], np.int64), np.empty(2, np.bool_))
        ok = all(sig.return_type == numba.types.boolean for sig in one.nopython_signatures)
        return verdicts if ok else None
    return _cached(_PREDICATES, fn, (np.dtype(spec.dtype).str,), make)


def map_kernel(function, spec, out_spec):
    """``kernel(values, offsets, out) -> bool``: ``out[offsets[i]:offsets[i + 1]] =
    fn(row i)`` for rows whose result keeps their length (False at the first that does
    not), or None where the function does not compile to 1-D arrays of ``out_spec``'s
    dtype."""
    fn = _plain(function)
    if fn is None or not one_packed_leaf(spec) or not one_packed_leaf(out_spec):
        return None

    def make():
        one = python_semantics_njit(fn)

        @numba.njit(nogil=True)
        def rows(values, offsets, out):
            for i in range(len(offsets) - 1):
                a, b = offsets[i], offsets[i + 1]
                r = one(values[a:b])
                if r.ndim != 1 or len(r) != b - a:
                    return False
                for j in range(b - a):   # not out[a:b] = r: see resizing.py's row copy
                    out[a + j] = r[j]
            return True
        rows(np.zeros(3, spec.dtype), np.array([0, 1, 3], np.int64),
             np.empty(3, out_spec.dtype))
        want = numba.from_dtype(np.dtype(out_spec.dtype))
        ok = all(isinstance(sig.return_type, numba.types.Array) and sig.return_type.ndim == 1
                 and sig.return_type.dtype == want for sig in one.nopython_signatures)
        return rows if ok else None
    return _cached(_MAPS, fn, (np.dtype(spec.dtype).str, np.dtype(out_spec.dtype).str), make)


__all__ = ["map_kernel", "one_packed_leaf", "predicate_kernel", "python_semantics_njit"]
