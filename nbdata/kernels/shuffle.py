"""Index plans of tf.data's buffer shuffle: which buffer slot each output comes from.

Draw ``k`` over a buffer of ``n`` slots picks slot ``(bits(key, k) * n) >> 64``. The
plans only move row numbers; the caller gathers the rows of every column with them,
so one plan serves elements of any structure.
"""

from __future__ import annotations

import numba
import numpy as np

from nbdata.random import _bits, _mulhilo


@numba.njit(nogil=True, cache=True)
def replace_plan(key, start, m, owner):
    """Outputs for ``m`` incoming rows while the buffer is full: draw ``start + t``
    picks a slot, whose row goes out and is replaced by incoming row ``t``.

    ``owner[s]`` is the row in slot ``s``: ``< n`` a buffer row, ``n + t`` incoming row
    ``t`` (updated in place). Returns the row of each output, coded the same way.
    """
    n = len(owner)
    src = np.empty(m, np.int64)
    size = np.uint64(n)
    for t in range(m):
        s = np.int64(_mulhilo(_bits(key, start + np.uint64(t)), size)[0])
        src[t] = owner[s]
        owner[s] = n + t
    return src


@numba.njit(nogil=True, cache=True)
def drain_plan(key, start, m, order, length):
    """Outputs for ``m`` draws after the input ended: draw ``start + t`` picks one of
    the ``length - t`` rows left (``order[:length]``), which goes out, and the last
    row takes its slot. Returns the rows in output order; ``order`` is updated."""
    src = np.empty(m, np.int64)
    for t in range(m):
        left = length - t
        s = np.int64(_mulhilo(_bits(key, start + np.uint64(t)), np.uint64(left))[0])
        src[t] = order[s]
        order[s] = order[left - 1]
    return src


@numba.njit(parallel=True, nogil=True, cache=True)
def draw_slots(key, start, m, n):
    """The slots of draws ``start .. start+m`` over a full buffer of ``n`` slots (each
    draw depends only on its counter, so they are made in parallel)."""
    slots = np.empty(m, np.int64)
    size = np.uint64(n)
    for t in numba.prange(m):
        slots[t] = np.int64(_mulhilo(_bits(key, start + np.uint64(t)), size)[0])
    return slots


@numba.njit(nogil=True, cache=True)
def swap_rows(store, incoming, slots, out):
    """For each incoming row ``t`` in order: the row in slot ``slots[t]`` goes out and
    incoming row ``t`` takes its place ((rows, size) views of one column)."""
    width = store.shape[1]
    for t in range(len(slots)):
        s = slots[t]
        for q in range(width):
            out[t, q] = store[s, q]
            store[s, q] = incoming[t, q]
