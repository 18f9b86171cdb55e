"""Index plans of tf.data's buffer shuffle: which buffer slot each output comes from.

Draw ``k`` over a buffer of ``n`` slots picks slot ``(draw(key, k) * n) >> 64``, where
``draw(key, k)`` is SplitMix64's output function of ``key + (k + 1) * 0x9E3779B97F4A7C15``
(the SplitMix64 stream seeded with ``key``, read at position ``k``): counter-based, so
any draw is computed on its own, at about a nanosecond (the key itself, one per epoch,
comes from Philox: ``nbdata.random.key``). The plans only move row numbers; the caller
gathers the rows of every column with them, so one plan serves elements of any
structure.
"""

from __future__ import annotations

import numba
import numpy as np

from nbdata.kernels.tiers import tiered
from nbdata.random import _mul128

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(nogil=True, cache=True, inline="always")
def _mix(z):
    """SplitMix64's output function of the counter ``z``."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True, inline="always")
def draw(key, k):
    """64 random bits of draw ``k`` (``key``, ``k``: uint64)."""
    return _mix(key + (k + np.uint64(1)) * _GAMMA)


@numba.njit(nogil=True, cache=True, inline="always")
def _slot(key, k, n):
    """The slot of draw ``k`` among ``n``: the high word of ``draw(key, k) * n``."""
    return np.int64(_mul128(draw(key, k), np.uint64(n))[0])


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
        s = _slot(key, start + np.uint64(t), size)
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
        s = _slot(key, start + np.uint64(t), np.uint64(left))
        src[t] = order[s]
        order[s] = order[left - 1]
    return src


@tiered(nogil=True, cache=True)
def draw_slots(key, start, m, n):
    """The slots of draws ``start .. start+m`` over a full buffer of ``n`` slots (each
    draw depends only on its counter, so they are made in parallel)."""
    slots = np.empty(m, np.int64)
    size = np.uint64(n)
    for t in numba.prange(m):
        slots[t] = _slot(key, start + np.uint64(t), size)
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


@numba.njit(nogil=True, cache=True)
def replace_values(key, start, store, incoming, out):
    """``draw_slots`` and ``swap_rows`` in one pass for a buffer of single values (a
    shuffle of row numbers): incoming value ``t`` takes the place of the value drawn
    by draw ``start + t``, which goes to ``out[t]``."""
    size = np.uint64(len(store))
    for t in range(len(incoming)):
        s = _slot(key, start + np.uint64(t), size)
        out[t] = store[s]
        store[s] = incoming[t]


@numba.njit(nogil=True, cache=True)
def shuffle_row_numbers(key, t0, n, size, buffer, order, out):
    """Outputs ``t0 .. t0 + len(out)`` of the buffer shuffle of the row numbers
    ``0 .. n-1`` with a buffer of ``size`` slots, in one pass: the same draws, in the
    same order, as a shuffle reading ``range(n)`` (``replace_values`` while the input
    lasts, then ``drain_plan``). ``buffer`` holds the ``min(size, n)`` buffered row
    numbers after output ``t0`` (filled here with ``0 .. min(size, n)-1`` when ``t0`` is
    0) and ``order`` the slots left once the input ended (made here at the first output
    after it); both are updated.

    Output ``t`` while the input lasts (``t < n - size``) is draw ``t`` over the full
    buffer, replaced by row ``size + t``; after, draw ``t`` over the ``n - t`` rows
    left."""
    held = min(size, n)
    replacing = n - held   # outputs made while the input lasts
    full = np.uint64(size)
    if t0 == 0:
        for q in range(held):
            buffer[q] = q
    m = len(out)
    first = min(m, max(0, replacing - t0))   # this call's outputs while the input lasts
    # draw(key, t)'s counter, key + (t + 1) * GAMMA, stepped by GAMMA: the same draws as
    # _slot's, without a multiply and a branch per output (a fifth of the time)
    z = key + (np.uint64(t0) + np.uint64(1)) * _GAMMA
    incoming = held + t0
    for j in range(first):
        s = np.int64(_mul128(_mix(z), full)[0])
        out[j] = buffer[s]
        buffer[s] = incoming
        incoming += 1
        z += _GAMMA
    for j in range(first, m):
        t = t0 + j
        if t == replacing:
            for q in range(held):
                order[q] = q
        left = n - t
        s = np.int64(_mul128(_mix(z), np.uint64(left))[0])
        out[j] = buffer[order[s]]
        order[s] = order[left - 1]
        z += _GAMMA
