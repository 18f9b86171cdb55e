"""Sequence packing kernels (``nd.experimental.pack``): where each variable-length
sequence goes in the fixed-length packed rows, and the copy of the values there.

The placement is first-fit over ``nbins`` open rows (``first_fit``): a sequence
(all its features, each cut to its row length) goes into the first open row where every
feature still fits; when none has room and fewer than ``nbins`` rows are open, a new
row opens; when ``nbins`` are open, all of them are finished (handed out in the order
they opened) and a new row opens with the sequence. Sequences whose features are all
empty are left out. With ``nbins == 1`` this is the greedy sequential packer (next fit).

Rows are numbered in a work buffer: the rows still open from the previous chunk are
rows ``0 .. nopen - 1``; bin ``k`` is always row ``first + k``, so the finished rows
are the prefix ``0 .. first - 1``.
"""

from __future__ import annotations

import numba
import numpy as np

from nbdata.kernels.tiers import tiered


@numba.njit(nogil=True, cache=True)
def first_fit(lengths, caps, nbins, fill, segs, nopen):
    """Place each sequence (``lengths``: (n, F) int64, one column per feature) into rows
    of ``caps`` (F,) values per feature. ``fill`` (nbins, F) and ``segs`` (nbins,) are
    the open rows' used lengths and segment counts, updated in place; ``nopen`` the
    number open. Returns (row (n,), start (n, F), segment id (n,), first, total, nopen,
    used (total, F)): row -1 for a sequence left out, ``first`` the rows finished,
    ``total`` the rows of the work buffer, ``used`` each work row's filled length."""
    n, nf = lengths.shape
    rows = np.empty(n, np.int64)
    starts = np.zeros((n, nf), np.int64)
    segids = np.zeros(n, np.int64)
    used = np.zeros((n + nopen, nf), np.int64)    # each work row's filled length
    for k in range(nopen):
        for f in range(nf):
            used[k, f] = fill[k, f]
    first = 0
    total = nopen
    for i in range(n):
        empty = True
        for f in range(nf):
            if lengths[i, f] > 0:
                empty = False
        if empty:
            rows[i] = -1
            continue
        placed = -1
        for k in range(nopen):
            ok = True
            for f in range(nf):
                take = min(lengths[i, f], caps[f])
                if fill[k, f] + take > caps[f]:
                    ok = False
                    break
            if ok:
                placed = k
                break
        if placed < 0:
            if nopen == nbins:
                first = total
                nopen = 0
            placed = nopen
            nopen += 1
            total += 1
            for f in range(nf):
                fill[placed, f] = 0
            segs[placed] = 0
        rows[i] = first + placed
        for f in range(nf):
            starts[i, f] = fill[placed, f]
            fill[placed, f] += min(lengths[i, f], caps[f])
            used[first + placed, f] = fill[placed, f]
        segs[placed] += 1
        segids[i] = segs[placed]
    return rows, starts, segids, first, total, nopen, used[:total]


@tiered(nogil=True, cache=True)
def scatter(values, offsets, rows, starts, segids, cap, out, out_seg, out_pos, used, held):
    """Copy sequence ``i`` (``values[offsets[i]:offsets[i + 1]]``, cut to ``cap``) to
    row ``rows[i]`` of ``out`` from ``starts[i]``, with its segment id and positions.
    Sequences go to places of their own, so they are copied in parallel threads (run it
    in the pipeline's kernel section, ``ExecContext.kernels``). Rows from ``held`` on
    are fresh (uninitialized): their padding after ``used[r]`` is zeroed."""
    for r in numba.prange(held, out.shape[0]):
        for q in range(used[r], cap):
            out[r, q] = 0
            out_seg[r, q] = 0
            out_pos[r, q] = 0
    for i in numba.prange(len(rows)):
        r = rows[i]
        if r < 0:
            continue
        a = offsets[i]
        take = min(offsets[i + 1] - a, cap)
        s = starts[i]
        seg = segids[i]
        for q in range(take):
            out[r, s + q] = values[a + q]
            out_seg[r, s + q] = seg
            out_pos[r, s + q] = q


__all__ = ["first_fit", "scatter"]
