"""Chunks: the unit that flows between stages. A chunk holds a run of ``n`` rows as one
column per leaf of the element.

A column is one of:

- a NumPy array of shape ``(n, *row_shape)``: numbers, or an object array of ``bytes``
  for string tensors; every row of the chunk has the same shape;
- a :class:`StringColumn`: scalar strings (records, lines) as uint8 ``data`` and int64
  ``offsets`` (row ``j`` is ``data[offsets[j]:offsets[j+1]]``);
- a :class:`RowList`: one Python value per row, for leaves whose rows differ in shape
  or are not arrays (datasets).

The functions here slice, gather and join columns of any kind and turn rows into
element values (what the user sees) and back.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from nbdata.spec import TensorSpec, flatten, map_structure, pack_as, packer, string

MAX_CHUNK_ROWS = 1 << 16
MAX_CHUNK_BYTES = 8 << 20


# -------------------------------------------------------------- string columns

@numba.njit(nogil=True, cache=True)
def _gather_rows(data, offsets, rows):
    n = len(rows)
    out_offsets = np.empty(n + 1, np.int64)
    out_offsets[0] = 0
    for j in range(n):
        r = rows[j]
        out_offsets[j + 1] = out_offsets[j] + offsets[r + 1] - offsets[r]
    out = np.empty(out_offsets[n], data.dtype)
    for j in range(n):
        r = rows[j]
        start = offsets[r]
        dst = out_offsets[j]
        for q in range(offsets[r + 1] - start):
            out[dst + q] = data[start + q]
    return out, out_offsets


def read_only(a):
    """``a`` as a read-only view (not a copy) when it is a writable NumPy array, else ``a``.

    Numba types a read-only array apart from a writable one, so a kernel called with both
    compiles twice (2-3 s each for the CSV decoder and the Example parser, on a cold
    cache). Kernels that only read an input take it through this: one signature whether
    the bytes come from a memory map or a decompressed block, a NumPy array or an Arrow
    buffer."""
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def copied(structure: Any) -> Any:
    """``structure`` with its arrays copied (a state a user function may update in place)."""
    return map_structure(lambda v: v.copy() if isinstance(v, np.ndarray) else v, structure)


def unshared(v: Any, arrays: list) -> Any:
    """``v``, copied where it is an array sharing memory with one of ``arrays``."""
    if isinstance(v, np.ndarray) and any(np.may_share_memory(v, a) for a in arrays):
        return v.copy()
    return v


def gather_strings(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray):
    """The strings at ``rows``, as fresh (data, offsets).

    >>> d, o = gather_strings(np.frombuffer(b"abcde", np.uint8), np.array([0, 2, 5]),
    ...                       np.array([1, 0, 1]))
    >>> d.tobytes(), o.tolist()
    (b'cdeabcde', [0, 3, 5, 8])
    """
    return _gather_rows(read_only(data), read_only(offsets), rows)


def concat_strings(datas: list, offsets_list: list):
    """One (data, offsets) of several string columns' rows, in order."""
    parts, offsets, base = [], [np.zeros(1, np.int64)], 0
    for data, off in zip(datas, offsets_list):
        lo, hi = int(off[0]), int(off[-1])
        parts.append(data[lo:hi])
        offsets.append(off[1:] - lo + base)
        base += hi - lo
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint8)), np.concatenate(offsets)


class StringColumn:
    """Scalar strings: row ``j`` is ``bytes(data[offsets[j]:offsets[j+1]])``.

    >>> c = StringColumn.from_values([b"ab", b"", b"xyz"])
    >>> len(c), c.row(2), c.take(np.array([2, 0])).values()
    (3, b'xyz', [b'xyz', b'ab'])
    >>> c.slice(1, 3).values(), c.slice(2, 3).to_objects().tolist()
    ([b'', b'xyz'], [b'xyz'])
    """

    __slots__ = ("_parts", "_n")

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self._parts = (data, offsets)
        self._n = None

    @classmethod
    def deferred(cls, n: int, make) -> "StringColumn":
        """``n`` strings that ``make()`` returns as ``(data, offsets)`` when first read:
        a column gathered from buffers that never change, which a fused kernel that
        does not read the strings then never gathers."""
        column = cls.__new__(cls)
        column._parts = make
        column._n = int(n)
        return column

    def _whole(self) -> tuple:
        parts = self._parts
        if callable(parts):
            parts = parts()
            self._parts = parts   # one attribute: threads see the thunk or the result
        return parts

    @property
    def data(self) -> np.ndarray:
        return self._whole()[0]

    @property
    def offsets(self) -> np.ndarray:
        return self._whole()[1]

    @classmethod
    def from_values(cls, values) -> "StringColumn":
        values = list(values)
        offsets = np.zeros(len(values) + 1, np.int64)
        if values:
            np.cumsum([len(v) for v in values], out=offsets[1:])
        return cls(np.frombuffer(b"".join(values), np.uint8), offsets)

    def __len__(self) -> int:
        return self._n if self._n is not None else len(self.offsets) - 1

    def row(self, j: int) -> bytes:
        data, offsets = self._whole()
        return data[offsets[j]:offsets[j + 1]].tobytes()

    def values(self) -> list:
        off = self.offsets
        base = int(off[0])
        data = self.data[base:int(off[-1])].tobytes()
        bounds = (off - base).tolist()
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def slice(self, a: int, b: int) -> "StringColumn":
        return StringColumn(self.data, self.offsets[a:b + 1])

    def take(self, rows: np.ndarray) -> "StringColumn":
        data, offsets = gather_strings(self.data, self.offsets, np.asarray(rows, np.int64))
        return StringColumn(data, offsets)

    def to_objects(self) -> np.ndarray:
        out = np.empty(len(self), dtype=object)
        out[:] = self.values()
        return out

    def to_records(self) -> "RecordArray":
        """The strings as a :class:`RecordArray`: an object array that decoders given it
        read through this column instead of joining its bytes again."""
        out = self.to_objects().view(RecordArray)
        out.column = self
        return out

    @property
    def nbytes(self) -> int:
        """The bytes it holds (a deferred column: none yet, beyond its row count)."""
        if callable(self._parts):
            return 8 * (len(self) + 1)
        return int(self.offsets[-1] - self.offsets[0]) + 8 * len(self.offsets)


class RecordArray(np.ndarray):
    """An object array of ``bytes`` that still knows the :class:`StringColumn` it was
    made from (``column``; None for any array derived from it, such as a slice, so a
    view never claims a column it does not match)."""

    column: "StringColumn | None" = None

    def __array_finalize__(self, obj) -> None:
        self.column = None


def string_column_of(values) -> "StringColumn | None":
    """The column behind a 1-D :class:`RecordArray` of strings, else None."""
    return values.column if isinstance(values, RecordArray) else None


class RowList(list):
    """A column of arbitrary per-row values."""

    def take(self, rows) -> "RowList":
        return RowList(self[int(r)] for r in rows)

    @property
    def nbytes(self) -> int:
        return sum(getattr(v, "nbytes", 64) for v in self)


def packed_offsets(shapes: np.ndarray) -> np.ndarray:
    """Where the rows of ``shapes`` (n, ndim) start in one packed buffer, and its end
    (n + 1 int64 values, in elements)."""
    offsets = np.zeros(len(shapes) + 1, np.int64)
    np.cumsum(np.prod(shapes, axis=1, dtype=np.int64), out=offsets[1:])
    return offsets


class PackedRows(RowList):
    """A column of arrays of one dtype and rank whose shapes differ per row (images
    decoded at their own sizes), held in one buffer: ``packed`` is ``(data, offsets,
    shapes)`` with row ``j`` = ``data[offsets[j]:offsets[j + 1]].reshape(shapes[j])``
    (the rows themselves are such views, made when the column is first iterated or
    sliced as a list: a column that only passes through ops reading ``packed`` —
    slicing, gathering, joining, padding, packing — makes no Python object per row).
    Fused kernels read the buffer as it is (``nbdata.ops.fusion.RaggedLeaf``)."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, shapes: np.ndarray):
        super().__init__()
        self.packed = (data, offsets, shapes)
        self._viewed = False

    def _views(self) -> None:
        if not self._viewed:
            data, offsets, shapes = self.packed
            super().extend(data[offsets[j]:offsets[j + 1]].reshape(tuple(shapes[j]))
                           for j in range(len(shapes)))
            self._viewed = True

    def __len__(self) -> int:
        return len(self.packed[2])

    def __iter__(self):
        self._views()
        return super().__iter__()

    def __getitem__(self, j):
        if isinstance(j, (int, np.integer)):
            data, offsets, shapes = self.packed
            n = len(shapes)
            j = int(j) + n if j < 0 else int(j)
            if not 0 <= j < n:
                raise IndexError("PackedRows index out of range")
            return data[offsets[j]:offsets[j + 1]].reshape(tuple(shapes[j]))
        self._views()
        return super().__getitem__(j)

    def __reduce__(self):
        return (PackedRows, self.packed)

    def take(self, rows) -> "PackedRows":
        data, offsets, shapes = self.packed
        rows = np.asarray(rows, np.int64)
        out_data, out_offsets = _gather_rows(read_only(data), read_only(offsets), rows)
        return PackedRows(out_data, out_offsets, shapes[rows])

    @classmethod
    def concat(cls, cols: list) -> "PackedRows":
        """One column of several packed columns' rows (one dtype and rank)."""
        datas, offsets, shapes, base = [], [np.zeros(1, np.int64)], [], 0
        for c in cols:
            data, off, shp = c.packed
            lo, hi = int(off[0]), int(off[-1])
            datas.append(data[lo:hi])
            offsets.append(off[1:] - lo + base)
            shapes.append(shp)
            base += hi - lo
        return cls(np.concatenate(datas), np.concatenate(offsets), np.concatenate(shapes))

    @classmethod
    def empty(cls, shapes: list, dtype, ndim: int) -> "PackedRows":
        """Rows of ``shapes`` (each of ``ndim`` dims; uninitialized), to be filled in place."""
        shapes = np.asarray(shapes, np.int64).reshape(len(shapes), ndim)
        offsets = packed_offsets(shapes)
        return cls(np.empty(int(offsets[-1]), dtype), offsets, shapes)

    @property
    def nbytes(self) -> int:
        data, offsets, shapes = self.packed
        return int(offsets[-1] - offsets[0]) * data.itemsize + 8 * (len(offsets) + shapes.size)

    def slice(self, a: int, b: int) -> "PackedRows":
        data, offsets, shapes = self.packed
        return PackedRows(data[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], shapes[a:b])


class Chunk:
    """``n`` rows as one column per leaf (in ``flatten`` order of the element)."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: list, n: int):
        self.columns = columns
        self.n = n

    def __repr__(self) -> str:
        return f"Chunk(n={self.n}, columns={[type(c).__name__ for c in self.columns]})"

    def slice(self, a: int, b: int) -> "Chunk":
        a, b = max(0, a), min(self.n, b)
        return Chunk([col_slice(c, a, b) for c in self.columns], max(0, b - a))

    def take(self, rows: np.ndarray) -> "Chunk":
        return Chunk([col_take(c, rows) for c in self.columns], len(rows))

    @property
    def nbytes(self) -> int:
        return sum(col_nbytes(c) for c in self.columns)


# ----------------------------------------------------------------- columns

def read_only_chunk(chunk: "Chunk") -> "Chunk":
    """``chunk`` with its arrays as read-only views (no copy): what an op that keeps the
    rows it hands out (an in-memory cache) hands out, so an in-place edit of an element
    raises instead of changing what later epochs yield."""
    def column(c):
        if isinstance(c, np.ndarray):
            return read_only(c)
        if isinstance(c, PackedRows):
            data, offsets, shapes = c.packed
            return PackedRows(read_only(data), offsets, shapes)
        if isinstance(c, RowList):
            return RowList(_read_only_value(v) for v in c)
        return c
    return Chunk([column(c) for c in chunk.columns], chunk.n)


def _read_only_value(v):
    """A row's value with its arrays read-only: an array, or a ragged or sparse tensor
    (rebuilt over read-only views of its parts)."""
    if isinstance(v, np.ndarray):
        return read_only(v)
    if hasattr(v, "flat_values") and hasattr(v, "nested_row_splits"):
        return type(v)(read_only(v.flat_values), tuple(read_only(s) for s in v.nested_row_splits))
    if hasattr(v, "indices") and hasattr(v, "values") and hasattr(v, "dense_shape"):
        return type(v)(read_only(v.indices), read_only(v.values), read_only(v.dense_shape))
    return v


def col_slice(c, a: int, b: int):
    if isinstance(c, (StringColumn, PackedRows)):
        return c.slice(a, b)
    if isinstance(c, RowList):
        return RowList(c[a:b])
    return c[a:b]


def col_take(c, rows: np.ndarray):
    if isinstance(c, (StringColumn, RowList)):
        return c.take(rows)
    return c[rows]


def col_nbytes(c) -> int:
    return int(c.nbytes)


def col_row(c, j: int) -> Any:
    """Row ``j`` as an element leaf: a NumPy scalar, an array view, ``bytes``, a value."""
    if isinstance(c, StringColumn):
        return c.row(j)
    if isinstance(c, RowList):
        return c[j]
    return c[j]


def col_values(c) -> list:
    """Every row of a column as element leaves."""
    if isinstance(c, StringColumn):
        return c.values()
    if isinstance(c, RowList):
        return list(c)
    if c.ndim == 1:
        return list(c) if c.dtype != object else c.tolist()
    return [c[j] for j in range(len(c))]


def col_concat(cols: list):
    """One column of several columns' rows (kinds are unified where they differ)."""
    if len(cols) == 1:
        return cols[0]
    if all(isinstance(c, StringColumn) for c in cols):
        return StringColumn(*concat_strings([c.data for c in cols], [c.offsets for c in cols]))
    if all(isinstance(c, PackedRows) for c in cols) and \
            len({(c.packed[0].dtype, c.packed[2].shape[1]) for c in cols}) == 1:
        return PackedRows.concat(cols)
    if all(isinstance(c, np.ndarray) for c in cols):
        shapes = {c.shape[1:] for c in cols}
        if len(shapes) == 1 and len({c.dtype for c in cols}) == 1:
            return np.concatenate(cols)
    return RowList(v for c in cols for v in col_values(c))


def column_from_values(values: list, spec) -> Any:
    """A column holding ``values`` (element leaves of ``spec``), dense when rows agree."""
    if not isinstance(spec, TensorSpec):  # datasets, sparse tensors
        return RowList(values)
    if spec.dtype is string:
        if spec.shape == () and all(isinstance(v, bytes) for v in values):
            return StringColumn.from_values(values)
        shapes = {np.shape(v) for v in values}
        if len(shapes) == 1:
            out = np.empty((len(values),) + shapes.pop(), dtype=object)
            for j, v in enumerate(values):
                out[j] = v
            return out
        return RowList(values)
    if not values:
        return np.empty((0,) + tuple(d or 0 for d in (spec.shape or ())), spec.dtype)
    first = np.shape(values[0])
    if len(values) == 1 and isinstance(values[0], np.ndarray) and first != () and \
            values[0].dtype == spec.dtype:
        return values[0][np.newaxis]   # one array (from_tensors' element): a view, no copy
    if all(np.shape(v) == first for v in values):
        return np.array(values, dtype=spec.dtype) if first == () else np.stack(values)
    return RowList(values)


# ------------------------------------------------------------------ chunks

def chunk_from_elements(elements: list, spec) -> Chunk:
    """A chunk of element values (each a nested structure of ``spec``)."""
    specs = flatten(spec)
    if not elements:
        return Chunk([column_from_values([], s) for s in specs], 0)
    rows = [flatten(e) for e in elements]
    return Chunk([column_from_values([r[k] for r in rows], s) for k, s in enumerate(specs)],
                 len(elements))


def chunk_elements(chunk: Chunk, spec) -> list:
    """The element values of a chunk's rows."""
    pack = packer(spec)
    columns = [col_values(c) for c in chunk.columns]
    if not columns:
        return [pack([]) for _ in range(chunk.n)]
    return [pack(list(leaves)) for leaves in zip(*columns)]


def concat_chunks(chunks: list) -> Chunk:
    if len(chunks) == 1:
        return chunks[0]
    width = len(chunks[0].columns)
    return Chunk([col_concat([c.columns[k] for c in chunks]) for k in range(width)],
                 sum(c.n for c in chunks))


def gather_grouped(rows: np.ndarray, groups: np.ndarray, gather) -> Chunk:
    """The rows at ``rows`` where row ``j`` belongs to group ``groups[j]``: one
    ``gather(group, rows_of_that_group)`` call per group, reassembled in the order of
    ``rows`` (random access through repeat and concatenate)."""
    if len(rows) == 0:
        return gather(0, rows)
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    cuts = np.flatnonzero(np.diff(ordered)) + 1
    if len(cuts) == 0:
        return gather(int(ordered[0]), rows)
    bounds = [0, *cuts.tolist(), len(rows)]
    parts = [gather(int(ordered[a]), rows[order[a:b]]) for a, b in zip(bounds, bounds[1:])]
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return concat_chunks(parts).take(inverse)


def row_bytes(spec) -> int:
    """An estimate of one row's size, for chunk sizing."""
    total = 0
    for s in flatten(spec):
        if isinstance(s, TensorSpec) and s.dtype is not string and s.shape is not None:
            total += math.prod(d if d is not None else 16 for d in s.shape) * s.dtype.itemsize
        else:
            total += 64
    return max(total, 1)


def max_chunk_rows(spec) -> int:
    """Rows per chunk for elements of ``spec``: at most MAX_CHUNK_BYTES of data."""
    return max(1, min(MAX_CHUNK_ROWS, MAX_CHUNK_BYTES // row_bytes(spec)))


__all__ = ["Chunk", "PackedRows", "RowList", "packed_offsets", "StringColumn", "chunk_elements", "chunk_from_elements",
           "col_concat", "col_row", "col_slice", "col_take", "col_values", "column_from_values",
           "concat_chunks", "max_chunk_rows", "pack_as"]
