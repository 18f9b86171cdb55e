"""Order-preserving compaction of chunk rows: the rows a fused stage kept (the kernel
lists their positions), gathered into fresh columns. Rows are copied as machine words:
one kernel, compiled once and cached on disk, serves every dtype and shape, and
generated kernels need no compaction code."""

from __future__ import annotations

import math

import numba
import numpy as np

from nbdata.chunks import read_only
from nbdata.kernels.tiers import tiered


_WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
          8: np.dtype(np.uint64)}


def _words(rows: np.ndarray) -> np.ndarray | None:
    """The bytes of a (rows, size) view as rows of the widest unsigned word (at most 8
    bytes) that divides a row, so that the gather kernel is compiled for a handful of
    word types whatever a pipeline's dtypes; None when a row is not contiguous."""
    n, size = rows.shape
    itemsize = rows.itemsize
    if rows.strides[1] != itemsize:
        if size != 1:
            return None
        rows = np.lib.stride_tricks.as_strided(rows, (n, 1), (rows.strides[0], itemsize))
    row_bytes = size * itemsize
    word = _WORDS[min(row_bytes & -row_bytes, 8)]
    if itemsize % word.itemsize and word.itemsize % itemsize:    # e.g. 3-byte strings
        rows = rows.view(np.uint8)
    return rows.view(word)


def _flat(words: np.ndarray) -> np.ndarray | None:
    """A (rows, 1) word view as a 1-D array, None for wider rows or rows apart in
    memory. Rows of one word (scalar columns) are gathered by the 1-D kernels: indexing
    a 2-D view per row made those gathers take twice as long."""
    if words.shape[1] == 1 and words.strides[0] == words.itemsize:
        return words.reshape(-1)
    return None


@tiered(nogil=True, cache=True)
def gather_rows(src, rows, out):
    """``out[j] = src[rows[j]]`` for (rows, size) views, rows in parallel."""
    width = src.shape[1]
    for j in numba.prange(len(rows)):
        r = rows[j]
        for q in range(width):
            out[j, q] = src[r, q]


@tiered(nogil=True, cache=True)
def gather_words(src, rows, out):
    """``out[j] = src[rows[j]]`` for rows of one word (1-D views), rows in parallel."""
    for j in numba.prange(len(rows)):
        out[j] = src[rows[j]]


class RowGather:
    """Rows of one column gathered into fresh arrays, as :func:`compact` gathers them,
    for a caller that gathers from the same column again and again (a fused stage
    taking kept rows from its source column at every pull): the column's word view is
    made once, so a call costs an allocation and the kernel's. ``flat``: the column's
    (rows, size) view, when the caller has one; object columns and rows not contiguous
    in memory are gathered by NumPy."""

    def __init__(self, column: np.ndarray, flat: np.ndarray | None = None):
        self.column = column
        self.shape = column.shape[1:]
        self.width = math.prod(self.shape)
        self.words = None
        if not column.dtype.hasobject and self.width * column.itemsize:
            words = _words(column.reshape(len(column), self.width) if flat is None else flat)
            if words is not None:
                one = _flat(words)
                self.words = read_only(words if one is None else one)
                self.kernel = gather_words if self.words.ndim == 1 else gather_rows
        # The parallel kernel itself, once its tier runs it for these types (a call
        # then skips the tier's lookup by argument fingerprints)
        self.parallel = None

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        if self.words is None or not len(rows):
            return self.column[rows]
        n = len(rows)
        out = np.empty((n,) + self.shape, self.column.dtype)
        # its bytes as the source's words: one signature per word type (and 1-D or 2-D),
        # whatever the dtypes
        words = out.reshape(n, self.width).view(np.uint8).view(self.words.dtype)
        if self.words.ndim == 1:
            words = words.reshape(n)
        # Row positions of the one type the direct call is for (of other types, Numba's
        # dispatcher would compile the parallel kernel anew, where the tier runs the
        # serial twin meanwhile)
        flags = rows.flags
        direct = (rows.dtype == np.int64 and rows.ndim == 1 and flags.c_contiguous
                  and flags.writeable and flags.aligned)
        if direct and self.parallel is not None:
            self.parallel(self.words, rows, words)
        else:
            self.kernel(self.words, rows, words)
            if direct:
                self.parallel = self.kernel.parallel_for((self.words, rows, words))
        return out


def compact(column: np.ndarray, rows: np.ndarray, flat: np.ndarray | None = None) -> np.ndarray:
    """A fresh array of ``column``'s rows at ``rows`` (one :class:`RowGather` call).

    >>> compact(np.arange(10).reshape(5, 2), np.array([0, 3])).tolist()
    [[0, 1], [6, 7]]
    """
    return RowGather(column, flat)(rows)


@numba.njit(nogil=True, cache=True)
def group_by_unit(rows, starts):
    """The rows of a chunk grouped by the unit holding them (a row group, a record
    batch; unit ``u`` holds rows ``starts[u]`` to ``starts[u + 1]``), in one pass and a
    stable counting sort: ``(bad, offsets, order, local)``, where the chunk positions of
    unit ``u``'s rows are ``order[offsets[u]:offsets[u + 1]]`` (ascending) and their
    rows within the unit ``local[offsets[u]:offsets[u + 1]]``. ``bad`` is -1, or the
    position of a row outside ``[0, starts[-1])`` (then the arrays are empty).

    A row's unit is looked up in a table of the unit at each of ``4 * units`` even
    steps of the rows, then stepped forward to the row: a binary search (a chain of
    dependent loads) cost 20 ns a row. Where ``row * steps`` could overflow, the
    binary search it is."""
    n = len(rows)
    units = len(starts) - 1
    total = starts[units] if units >= 1 else 0
    steps = 4 * units
    offsets = np.zeros(units + 1, np.int64)
    unit = np.empty(n, np.int64)
    table = np.zeros(steps + 1, np.int64)
    exact = units >= 1 and total < (1 << 62) // (steps + 1)   # no overflow in r * steps
    if exact:
        u = 0
        for b in range(steps + 1):
            at = (b * total) // steps
            while u < units - 1 and starts[u + 1] <= at:
                u += 1
            table[b] = u
    for i in range(n):
        r = rows[i]
        if units < 1 or r < starts[0] or r >= total:
            return i, offsets, np.empty(0, np.int64), np.empty(0, np.int64)
        if exact:
            u = table[(r * steps) // total]
            while starts[u + 1] <= r:
                u += 1
        else:   # a binary search: the last unit starting at or before r
            u, size = 0, units
            while size > 1:
                half = size >> 1
                u += half * (starts[u + half] <= r)
                size -= half
        unit[i] = u
        offsets[u + 1] += 1
    for u in range(units):
        offsets[u + 1] += offsets[u]
    fill = offsets[:units].copy()
    order = np.empty(n, np.int64)
    local = np.empty(n, np.int64)
    for i in range(n):
        u = unit[i]
        j = fill[u]
        order[j] = i
        local[j] = rows[i] - starts[u]
        fill[u] = j + 1
    return -1, offsets, order, local


@numba.njit(nogil=True, cache=True)
def _put_rows(out, src, at, rows):
    width = out.shape[1]
    for i in range(len(at)):
        o, r = at[i], rows[i]
        for j in range(width):
            out[o, j] = src[r, j]


@numba.njit(nogil=True, cache=True)
def _put_words(out, src, at, rows):
    """_put_rows for rows of one word (1-D views)."""
    for i in range(len(at)):
        out[at[i]] = src[rows[i]]


def gather_units(columns: list, picked: list, local: list) -> np.ndarray | None:
    """One column of several decoded blocks (arrays of one dtype and row shape):
    ``result[picked[u]] = columns[u][local[u]]`` for each block ``u``, written in place
    (no temporary per block); None when a block's rows are not contiguous (the caller
    takes them itself)."""
    first = columns[0]
    n = sum(len(p) for p in picked)
    out = np.empty((n,) + first.shape[1:], first.dtype)
    words = _words(out.reshape(n, -1)) if n else None
    if words is None:
        return out if n == 0 else None
    sources = [_words(c.reshape(len(c), -1)) if len(c) else None for c in columns]
    if any(s is None or s.dtype != words.dtype or s.shape[1] != words.shape[1]
           for s, p in zip(sources, picked) if len(p)):
        return None
    flat_out = _flat(words)
    for s, p, r in zip(sources, picked, local):
        if len(p):
            flat_src = _flat(s) if flat_out is not None else None
            if flat_src is not None:
                _put_words(flat_out, flat_src, p, r)
            else:
                _put_rows(words, s, p, r)
    return out


@numba.njit(nogil=True, cache=True)
def gather_spans(data, starts, counts, out, out_offsets):
    """``out[out_offsets[j]:][:counts[j]] = data[starts[j]:][:counts[j]]`` for every j
    (rows of varying size gathered from one buffer into another)."""
    for j in range(len(starts)):
        a, b = starts[j], out_offsets[j]
        for q in range(counts[j]):
            out[b + q] = data[a + q]
