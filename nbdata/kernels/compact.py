"""Order-preserving compaction of chunk rows: the rows a fused stage kept, gathered into
fresh columns. Generic over dtypes and shapes, compiled once and cached on disk, so
that generated kernels need no compaction code of their own."""

from __future__ import annotations

import numba
import numpy as np

KEEP = 1      # a row the chain keeps
DROP = 0      # a row a filter, take or skip removed
PENDING = 2   # a row whose loop body has not finished (its function raised)


@numba.njit(nogil=True, cache=True)
def kept_rows(status, k, n):
    """The ``n`` positions among the first ``k`` whose status is KEEP, in order."""
    rows = np.empty(n, np.int64)
    j = 0
    for i in range(k):
        if status[i] == 1:
            rows[j] = i
            j += 1
    return rows


@numba.njit(parallel=True, nogil=True, cache=True)
def gather_rows(src, rows, out):
    """``out[j] = src[rows[j]]`` for (rows, size) views, rows in parallel."""
    width = src.shape[1]
    for j in numba.prange(len(rows)):
        r = rows[j]
        for q in range(width):
            out[j, q] = src[r, q]


def compact(column: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A fresh array of ``column``'s rows at ``rows``.

    >>> compact(np.arange(10).reshape(5, 2), np.array([0, 3])).tolist()
    [[0, 1], [6, 7]]
    """
    out = np.empty((len(rows),) + column.shape[1:], column.dtype)
    if len(rows):
        width = int(np.prod(column.shape[1:]))
        gather_rows(column.reshape(len(column), width), rows, out.reshape(len(rows), width))
    return out
