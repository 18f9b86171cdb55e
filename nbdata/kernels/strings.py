"""Kernels on string columns stored as uint8 data and int64 offsets."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _gather(data, offsets, rows):
    n = len(rows)
    out_offsets = np.empty(n + 1, np.int64)
    out_offsets[0] = 0
    for j in range(n):
        r = rows[j]
        out_offsets[j + 1] = out_offsets[j] + offsets[r + 1] - offsets[r]
    out = np.empty(out_offsets[n], np.uint8)
    for j in range(n):
        r = rows[j]
        start = offsets[r]
        dst = out_offsets[j]
        for q in range(offsets[r + 1] - start):
            out[dst + q] = data[start + q]
    return out, out_offsets


def gather_strings(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray):
    """The strings at ``rows``, as fresh (data, offsets).

    >>> d, o = gather_strings(np.frombuffer(b"abcde", np.uint8), np.array([0, 2, 5]),
    ...                       np.array([1, 0, 1]))
    >>> d.tobytes(), o.tolist()
    (b'cdeabcde', [0, 3, 5, 8])
    """
    return _gather(data, offsets, rows)


def concat_strings(datas: list, offsets_list: list):
    """One (data, offsets) of several string columns' rows, in order."""
    parts, offsets, base = [], [np.zeros(1, np.int64)], 0
    for data, off in zip(datas, offsets_list):
        lo, hi = int(off[0]), int(off[-1])
        parts.append(data[lo:hi])
        offsets.append(off[1:] - lo + base)
        base += hi - lo
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint8)), np.concatenate(offsets)
