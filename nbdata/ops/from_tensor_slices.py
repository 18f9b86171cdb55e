"""``from_tensor_slices``: one element per row of the leading dimension, as zero-copy views
(arrays read as they go, :mod:`nbdata.ops.lazy_array`, a block of rows at a time)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np
from numba import types

from nbdata import state_check
from nbdata.errors import InvalidArgumentError
from nbdata.ops.from_tensors import leaf_spec, resolve_structure
from nbdata.chunks import Chunk
from nbdata.kernels.compact import compact
from nbdata.ops.fusion import ChunkSource, SourceReader, StreamLeaf, numba_dtype
from nbdata.ops.lazy_array import BlockReader, LazyArray
from nbdata.ops.runtime import PositionChunks
from nbdata.ops.node import UNKNOWN, Node, NotFusable
from nbdata.trace.placeholder import Placeholder
from nbdata.spec import TensorSpec, flatten, pack_as, string


def slice_leaf_spec(leaf):
    """Spec of a source leaf of ``from_tensor_slices``: an array, a placeholder or an
    array read as it goes."""
    return leaf.spec if isinstance(leaf, LazyArray) else leaf_spec(leaf)


def check_sliceable(value: Any, op: str) -> int | None:
    """Leading-dimension length shared by every leaf (None when a placeholder hides it)."""
    n = None
    for leaf in flatten(value):
        spec = slice_leaf_spec(leaf)
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"{op}: cannot slice a {type(leaf).__name__}")
        if spec.shape is not None and len(spec.shape) == 0:
            raise InvalidArgumentError(f"{op}: cannot slice a scalar (rank-0) component {leaf!r:.60}", op)
        dim = None if spec.shape is None else spec.shape[0]
        if dim is not None:
            if n is not None and dim != n:
                raise InvalidArgumentError(
                    f"{op}: all components must have the same size in dimension 0, "
                    f"got sizes {n} and {dim}", op)
            n = dim
    return n


def flat_rows(column: np.ndarray) -> np.ndarray | None:
    """A (rows, size) view of ``column`` with each row's elements in order, or None when
    a row's elements are not evenly spaced in memory (then only a copy could give it)."""
    size = math.prod(column.shape[1:])
    if column.size == 0:
        return np.empty((len(column), size), column.dtype)
    expected = column.itemsize
    for dim, stride in zip(reversed(column.shape[1:]), reversed(column.strides[1:])):
        if dim == 1:
            continue
        if stride != expected:
            return None
        expected = stride * dim
    return np.lib.stride_tricks.as_strided(column, (len(column), size),
                                           (column.strides[0], column.itemsize))


class ColumnLeaf(StreamLeaf):
    """Row ``r`` of an array: scalars read as values, array rows as in-place views."""


@dataclasses.dataclass(frozen=True, eq=False)
class FromTensorSlices(Node):
    """Yields ``value[i]`` (leaf-wise) for each row ``i``."""

    value: Any
    op = "from_tensor_slices"
    fusion_role = "source"

    @functools.cached_property
    def spec(self):   # (the value's arrays, hence its spec, are fixed: read per iteration)
        def sliced(leaf):
            s = slice_leaf_spec(leaf)
            return TensorSpec(None if s.shape is None else s.shape[1:], s.dtype)
        return pack_as(self.value, [sliced(v) for v in flatten(self.value)])

    def cardinality(self) -> int:
        return self._rows

    @functools.cached_property
    def _rows(self) -> int:   # (as spec: read per iteration, by a shuffle over it too)
        n = check_sliceable(self.value, self.op)
        return UNKNOWN if n is None else n

    @property
    def lazy(self) -> bool:
        """Whether a leaf is an array read as it goes (a memory map, HDF5, Zarr)."""
        return any(isinstance(v, LazyArray) for v in flatten(self.value))

    def describe(self) -> str:
        lazy = [v.label for v in flatten(self.value) if isinstance(v, LazyArray)]
        if not lazy:
            return super().describe()
        return f"{self.label}({', '.join(lazy)}, read a block at a time)"

    def columns(self, ctx) -> list:
        """The resolved leaf arrays, checked to share their leading dimension (arrays
        read as they go: :class:`BlockReader`s of a chunk's worth of rows a read)."""
        value = resolve_structure(self.value, ctx)
        leaves = flatten(value)
        check_sliceable(value, self.op)
        out = []
        for leaf in leaves:
            if isinstance(leaf, LazyArray):
                out.append(leaf.reader(ctx.max_rows(self.spec)))
                continue
            if not isinstance(leaf, np.ndarray) or leaf.ndim == 0:
                raise InvalidArgumentError(f"{self.op}: cannot slice a scalar component", self.op)
            out.append(leaf)
        return out

    def open_chunks(self, ctx, state=None):
        return SliceChunks(self.columns(ctx), state)

    def random_access(self) -> str | None:
        return None if self.cardinality() >= 0 else "from_tensor_slices of placeholders"

    def cheap_gather(self) -> bool:
        # A shuffle of arrays read as they go keeps its buffer of rows and reads the
        # arrays in blocks, in order (see Dataset.from_tensor_slices).
        return self.random_access() is None and not self.lazy

    def gather(self, ctx, rows: np.ndarray) -> Chunk:
        """The rows at ``rows`` (random access, for shuffles over indices): a parallel
        gather where a column's rows are contiguous, NumPy's indexing elsewhere; arrays
        read as they go read those rows only."""
        out = []
        with ctx.kernels():
            for c in self.columns(ctx):
                if isinstance(c, BlockReader):
                    out.append(c.take(rows))
                    continue
                flat = flat_rows(c) if c.ndim > 1 else c.reshape(len(c), 1)
                out.append(compact(c, rows, flat) if flat is not None else c[rows])
        return Chunk(out, len(rows))

    def fusion_source(self, planner) -> ChunkSource:
        if self.lazy:
            # Read a block at a time, the rows reach the fused stage as chunks.
            raise NotFusable("an array read as it goes is a stream of blocks")
        leaves = []
        for v in flatten(self.value):
            if isinstance(v, Placeholder):
                raise NotFusable("source data is a placeholder")
            if v.dtype.kind in "OSU" or leaf_spec(v).dtype is string:
                raise NotFusable(f"source column of dtype {v.dtype} (strings run in Python)")
            dt = numba_dtype(v.dtype, "source column")
            row = TensorSpec(v.shape[1:], v.dtype)
            layout = "C" if v.flags.c_contiguous else "A"
            # the column is passed as it is: a read-only array's rows are read-only
            leaves.append(ColumnLeaf(row, dt if v.ndim == 1 else types.Array(
                dt, v.ndim - 1, layout, readonly=not v.flags.writeable)))
        source = ChunkSource(self, leaves, self.cardinality(), self._reader)
        source.in_place = all(flat_rows(v) is not None for v in flatten(self.value) if v.ndim > 1)
        return source

    def _reader(self, ctx) -> SourceReader:
        reader = SourceReader.kept(self)
        if reader is not None:
            return reader
        cols = self.columns(ctx)
        n = len(cols[0]) if cols else 0
        flats = [flat_rows(c) if c.ndim > 1 else None for c in cols]
        in_place = all(f is not None for c, f in zip(cols, flats) if c.ndim > 1)

        def args_of(c, f):
            return [c] if c.ndim == 1 else [c, f]

        def chunk(lo, k):
            out = []
            for c, f in zip(cols, flats):
                part = c[lo:lo + k]
                if c.ndim > 1 and f is None:  # only these rows are copied, never the column
                    part = np.ascontiguousarray(part)
                    out += [part, part.reshape(len(part), math.prod(c.shape[1:]))]
                else:
                    out += args_of(part, None if f is None else f[lo:lo + k])
            return out

        args = [a for c, f in zip(cols, flats) for a in args_of(c, f)] if in_place else None
        reader = SourceReader(n, args, chunk, lambda r: [c[r] for c in cols])
        if not self.lazy and all(a is b for a, b in zip(cols, flatten(self.value))):
            # Arrays given as they are (no placeholder, nothing read as it goes): every
            # iteration reads them the same way, so one reader serves them all.
            reader.keep(self)
        return reader


class SliceChunks(PositionChunks):
    """Consecutive rows of the arrays, as views (arrays read as they go: a block of
    rows at a time, at most a block per chunk). State: the next row."""

    def __init__(self, columns: list, state):
        super().__init__(len(columns[0]) if columns else 0,
                         0 if state is None else state_check.integer(state, "pos"))
        self.columns = columns
        readers = [c for c in columns if isinstance(c, BlockReader)]
        self.limit = min(r.limit for r in readers) if readers else None

    def next(self, want: int) -> Chunk | None:
        return super().next(want if self.limit is None else min(want, self.limit))

    def rows(self, lo: int, hi: int) -> Chunk:
        return Chunk([c.rows(lo, hi) if isinstance(c, BlockReader) else c[lo:hi]
                      for c in self.columns], hi - lo)
