"""Order-preserving compaction of chunk rows: the rows a fused stage kept (the kernel
lists their positions), gathered into fresh columns. Generic over dtypes and shapes,
compiled once and cached on disk, so that generated kernels need no compaction code."""

from __future__ import annotations

import numba
import numpy as np


_COMPILES: dict = {}


def _compiles(dtype) -> bool:
    """True for dtypes Numba computes with (not object, not float16)."""
    found = _COMPILES.get(dtype)
    if found is None:
        found = np.dtype(dtype).kind in "biufc"
        if found:
            try:
                from numba.core.datamodel import default_manager
                default_manager.lookup(numba.from_dtype(dtype))
            except Exception:  # noqa: BLE001 - any refusal means "gather with NumPy"
                found = False
        _COMPILES[dtype] = found
    return found


@numba.njit(parallel=True, nogil=True, cache=True)
def gather_rows(src, rows, out):
    """``out[j] = src[rows[j]]`` for (rows, size) views, rows in parallel."""
    width = src.shape[1]
    for j in numba.prange(len(rows)):
        r = rows[j]
        for q in range(width):
            out[j, q] = src[r, q]


def compact(column: np.ndarray, rows: np.ndarray, flat: np.ndarray | None = None) -> np.ndarray:
    """A fresh array of ``column``'s rows at ``rows`` (``flat``: the column's (rows, size)
    view, when the caller has one; object columns are gathered by NumPy).

    >>> compact(np.arange(10).reshape(5, 2), np.array([0, 3])).tolist()
    [[0, 1], [6, 7]]
    """
    if not _compiles(column.dtype):
        return column[rows]
    out = np.empty((len(rows),) + column.shape[1:], column.dtype)
    if len(rows):
        width = int(np.prod(column.shape[1:]))
        if flat is None:
            flat = column.reshape(len(column), width)
        gather_rows(flat, rows, out.reshape(len(rows), width))
    return out
