"""The contract between ops and the fusion compiler: what an op module hands the planner
(sources, steps, terminals) and what each must do at run time.

An op module implements the hooks of :class:`nbdata.ops.node.Node` by returning the
objects defined here; the compiler plans stages and emits kernels by calling them,
never by naming ops. Code emission goes through emitter objects the compiler passes
in (``RowEmitter`` / ``CounterEmitter`` in ``nbdata/compiler/codegen.py``), so op
modules do not import the compiler.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Any, ClassVar

import numba
import numpy as np
from numba import types
from numba.core.datamodel import default_manager

from nbdata.chunks import PackedRows
from nbdata.ops.node import NotFusable, PartlyFusable
from nbdata.spec import DatasetSpec, TensorSpec, flatten, string, substructures

DROP = object()
"""Returned by a step's reference behaviour for a row it removes."""


# -------------------------------------------------------------------- dtypes

def numba_dtype(dtype, what: str):
    """The Numba type of a NumPy dtype; NotFusable for dtypes Numba cannot compute with
    (float16, complex256, strings, ...)."""
    if dtype is string or np.dtype(dtype).kind not in "biuf":
        raise NotFusable(f"{what} has dtype {dtype} (fused kernels take numbers and bools)")
    try:
        ty = numba.from_dtype(np.dtype(dtype))
        default_manager.lookup(ty)
    except (NotImplementedError, KeyError, numba.core.errors.NumbaError):
        raise NotFusable(f"{what} has dtype {np.dtype(dtype).name}, which Numba does not "
                         f"support") from None
    return ty


def spec_type(spec: TensorSpec, what: str = "value"):
    """The Numba type of a materialized (C-contiguous) value of ``spec``."""
    dt = numba_dtype(spec.dtype, what)
    return dt if len(spec.shape) == 0 else types.Array(dt, len(spec.shape), "C")


def check_structure(spec: Any, what: str, opaque_strings: bool = False,
                    ragged: bool = False) -> None:
    """Fused stages take tuples, dicts (string keys) and namedtuples of numeric leaves
    with dims known at plan time. With ``opaque_strings``, scalar string leaves pass
    too: a stage's input may hold strings its first function does not use (see
    :class:`OpaqueLeaf`); with ``ragged``, numeric leaves whose dims are known only per
    row (decoded images) pass too (see :class:`RaggedLeaf`)."""
    for s in substructures(spec):
        if isinstance(s, dict) and not all(isinstance(k, str) for k in s):
            raise NotFusable(f"{what} is a dict with non-string keys")
    for leaf in flatten(spec):
        if isinstance(leaf, DatasetSpec):
            raise NotFusable(f"{what} has dataset components")
        if leaf.dtype is string and opaque_strings and leaf.shape == ():
            continue
        if leaf.dtype is string:
            raise NotFusable(f"{what} has string components (strings run in Python)")
        if leaf.shape is None or (any(d is None for d in leaf.shape) and not ragged):
            raise NotFusable(f"{what} has dims unknown until run time {leaf.shape}")
        numba_dtype(leaf.dtype, what)


# ------------------------------------------------------------------- sources

class SourceLeaf:
    """One leaf of a chunk source's element, as a fused kernel reads row ``r`` of it.

    ``spec`` is the row spec, ``row_type`` the Numba type of a row value handed to
    user functions, ``arg_count`` how many kernel arguments the leaf takes.
    """

    arg_count: ClassVar[int] = 1

    def __init__(self, spec: TensorSpec, row_type):
        self.spec = spec
        self.row_type = row_type

    def emit_load(self, row, args: list[str]):
        """Emit the read of row ``r`` (``row`` is the compiler's RowEmitter, ``args`` the
        kernel argument names of this leaf) and return the row's Leaf."""
        raise NotImplementedError


# Sources' readers kept for their next iterations (apart from the nodes, which pickle
# without them): SourceReader.keep.
_STATIC_READERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class SourceReader:
    """A chunk source opened for one run.

    ``rows`` is the row count (None: endless). ``args`` are the kernel arguments of
    every leaf over all rows (the kernel reads row ``lo + i``), or None when a leaf
    cannot be read in place (a column whose rows are not contiguous): then
    ``chunk(lo, k)`` gives arguments for rows ``lo .. lo+k`` only, read from 0.
    ``row_values(r)`` gives the leaf values of row ``r`` for reference re-runs.
    """

    # Whether every iteration reads the source through this same reader (its source
    # keeps it: arrays given as they are), so a run starting over keeps it unasked.
    static = False

    def __init__(self, rows: int | None, args: list | None, chunk, row_values):
        self.rows = rows
        self.args = args
        self.chunk = chunk
        self.row_values = row_values

    @staticmethod
    def kept(source) -> "SourceReader | None":
        """The reader ``source`` (a source node) keeps for every iteration, if any."""
        return _STATIC_READERS.get(source)

    def keep(self, source) -> "SourceReader":
        """Kept by ``source`` for its next iterations (it reads the same rows the same
        way each time: arrays given as they are, a range's constant bounds), so that
        ``kept`` gives it and a run starting over keeps it (``static``)."""
        self.static = True
        _STATIC_READERS[source] = self
        return self

    @classmethod
    def combine(cls, readers: list["SourceReader"]) -> "SourceReader":
        """One reader over the leaves of several (zip): the shortest row count."""
        counts = [r.rows for r in readers if r.rows is not None]
        rows = min(counts) if counts else None
        args = None if any(r.args is None for r in readers) else [a for r in readers for a in r.args]
        return cls(rows, args,
                   lambda lo, k: [a for r in readers for a in r.chunk(lo, k)],
                   lambda i: [v for r in readers for v in r.row_values(i)])


class ChunkSource:
    """What a fusable source gives the planner: its leaves (planning) and ``open(ctx)``
    (run time) giving a :class:`SourceReader`. ``stream`` is None: the kernel reads
    the source's rows in place."""

    stream = None
    indexed = False
    in_place = True   # its reader has kernel arguments over all rows (reader.args)

    def __init__(self, node, leaves: list[SourceLeaf], rows: int | None, opener):
        self.node = node
        self.leaves = leaves
        self.rows = rows          # None: known only at run time
        self._opener = opener

    @property
    def spec(self):
        return self.node.spec

    def describe(self) -> str:
        return self.node.describe()

    def open(self, ctx) -> SourceReader:
        return self._opener(ctx)


class IndexedSource(ChunkSource):
    """A chunk source read at given row numbers: the rows of ``source`` (read in place)
    in the order of an index stream (a shuffle over row numbers, a global shuffle). The
    kernel reads row ``rowidx[i]``, so no row is copied before it runs."""

    indexed = True

    def __init__(self, node, source: ChunkSource, open_indices):
        super().__init__(node, source.leaves, source.rows, source._opener)
        self.source = source
        self.open_indices = open_indices   # (ctx, state) -> chunk iterator of int64 rows

    def describe(self) -> str:
        return f"{self.source.describe()} at the row numbers of {self.node.describe()}"


class StreamLeaf(SourceLeaf):
    """Row ``r`` of a column of an input chunk (C-contiguous, the planned dtype, unless
    ``row_type`` says otherwise); array rows take the column and its (rows, size) view.
    A stage passes its input chunks' columns read-only, so an array row is typed
    read-only: the type a compiled function is planned with is the one the kernel calls
    it with (a writable type compiled every such function twice)."""

    def __init__(self, spec: TensorSpec, row_type=None):
        if row_type is None:
            dt = numba_dtype(spec.dtype, "stage input")
            row_type = dt if not spec.shape else types.Array(dt, len(spec.shape), "C",
                                                             readonly=True)
        super().__init__(spec, row_type)
        self.arg_count = 2 if spec.shape else 1

    def emit_load(self, row, args):
        if self.spec.shape:
            return row.row_view(self.spec, args[0], args[1])
        return row.read(self.spec, f"{args[0]}[r]")


class OpaqueLeaf(SourceLeaf):
    """A scalar string leaf of a stage's input chunks that the kernel never reads: the
    stage's first function must not use it (it is decoded, checked and dropped before
    the kernel; a row re-run on the reference path still sees it). Its row type is
    None, which the planner refuses to hand to a compiled function."""

    arg_count = 0

    def __init__(self, spec: TensorSpec):
        super().__init__(spec, None)

    def emit_load(self, row, args):
        return row.unread(self.spec)


def has_opaque(leaves) -> bool:
    return any(isinstance(leaf, OpaqueLeaf) for leaf in leaves)


class RaggedLeaf(SourceLeaf):
    """A numeric leaf of a stage's input chunks whose rows differ in shape (images
    decoded at their own sizes): the kernel reads row ``r`` as an array view of one
    packed buffer, ``data[offsets[r]:offsets[r + 1]].reshape(shapes[r])``. Only a map
    takes it (its function must make the rows uniform: a resize, a crop to a fixed
    size), so a ragged row is never stored by a kernel; see :func:`pack_ragged`."""

    arg_count = 3

    def __init__(self, spec: TensorSpec):
        dt = numba_dtype(spec.dtype, "stage input")   # read-only, as StreamLeaf's rows
        super().__init__(spec, types.Array(dt, len(spec.shape), "C", readonly=True))

    def emit_load(self, row, args):
        return row.ragged_view(self.spec, *args)


def is_ragged(spec) -> bool:
    return (isinstance(spec, TensorSpec) and spec.dtype is not string and spec.shape is not None
            and any(d is None for d in spec.shape))


def has_ragged(leaves) -> bool:
    return any(isinstance(leaf, RaggedLeaf) for leaf in leaves)


def pack_ragged(column, spec: TensorSpec) -> list:
    """The kernel arguments of a :class:`RaggedLeaf` for a column (a RowList of arrays
    or a uniform array): the rows' values in one C-ordered buffer of the spec's dtype,
    int64 offsets (rows + 1) and int64 shapes (rows, ndim). A column that carries its
    packed form already (``column.packed``) is not copied."""
    packed = getattr(column, "packed", None)
    dtype = np.dtype(spec.dtype)
    ndim = len(spec.shape)
    if packed is not None and packed[0].dtype == dtype:
        return list(packed)
    if isinstance(column, np.ndarray) and column.dtype != object:
        n = len(column)
        data = np.ascontiguousarray(column, dtype).reshape(-1)
        size = math.prod(column.shape[1:])
        offsets = np.arange(n + 1, dtype=np.int64) * size
        shapes = np.empty((n, ndim), np.int64)
        shapes[:] = column.shape[1:]
        return [data, offsets, shapes]
    rows = [np.asarray(v) for v in column]
    for v in rows:
        if v.ndim != ndim:
            raise ValueError(f"a row of rank {v.ndim} in a column of rank {ndim}")
    out = PackedRows.empty([v.shape for v in rows], dtype, ndim)
    for dst, v in zip(out, rows):
        dst[...] = v
    return list(out.packed)


class StreamSource(ChunkSource):
    """The chunks of another stage (a shuffle, a cache, an interleave, ...) as the input
    of a fused stage: its kernel runs once per input chunk. Scalar string leaves are
    :class:`OpaqueLeaf`s (the planner fuses such a stage only when its first step is a
    map that drops them)."""

    def __init__(self, node):
        check_structure(node.spec, f"{node.op} output", opaque_strings=True, ragged=True)
        super().__init__(node, [OpaqueLeaf(s) if s.dtype is string else
                                RaggedLeaf(s) if is_ragged(s) else StreamLeaf(s)
                                for s in flatten(node.spec)], node.cardinality(), None)

    @property
    def stream(self):
        return self.node

    def over(self, node) -> "StreamSource":
        return StreamSource(node)

    def describe(self) -> str:
        return f"the chunks of {self.node.describe()}"


# --------------------------------------------------------------------- steps

@dataclasses.dataclass
class Step:
    """One element-wise op of a fused chain.

    ``kind`` is ``"row"`` (runs inside the parallel row loop: map, filter) or
    ``"counter"`` (a sequential pass over the rows kept so far, with one int64
    counter carried across chunks: take, skip, enumerate). ``out_spec`` is the
    element structure after the step; ``node`` the logical node it comes from.
    """

    node: Any
    out_spec: Any
    label: str
    kind: ClassVar[str] = "row"
    drops: ClassVar[bool] = False      # may remove rows (filter, take, skip)


@dataclasses.dataclass
class RowStep(Step):
    """A map or filter: ``fn`` the user function, ``plan`` how the compiler runs it
    (lifted expressions or a Numba-compiled call), filled in by the planner."""

    fn: Any = None
    plan: Any = None
    materializes: ClassVar[bool] = True   # later ops see fresh values (map) or the same (filter)

    def emit_row(self, row, leaves: list, structure: Any) -> list:
        raise NotImplementedError

    def reference(self, element: Any) -> Any:
        raise NotImplementedError


@dataclasses.dataclass
class CounterStep(Step):
    """A take, skip or enumerate: ``initial`` is the counter's start value;
    ``index_spec`` is the spec of a leaf the step puts in front of the element
    (enumerate's index), or None. A step with ``run_slots`` keeps that many int64
    values of its run after its counter (a keyed map's key for the epoch): set from
    ``run_values(ctx)`` when the stage opens, saved and restored with the counters."""

    count: int = 0
    initial: int = 0
    kind: ClassVar[str] = "counter"
    index_spec: ClassVar[TensorSpec | None] = None
    run_slots: ClassVar[int] = 0

    def emit_counter(self, em) -> None:
        """Emit the body run for each kept row ``i`` in order, with the counter in
        ``em.c``; ``em.index`` names the index column when ``index_spec`` is set, and
        ``em.run[j]`` the run value ``j``."""
        raise NotImplementedError

    def run_values(self, ctx) -> list[int]:
        """The int64 values of the ``run_slots`` for a run opened in ``ctx``."""
        return []

    def reference(self, element: Any, counter: int, *run: int) -> tuple[Any, int, bool]:
        """(element, DROP, ...) for one row: the output (or DROP), the new counter,
        and whether the chain is finished after this row (``run``: the run values)."""
        raise NotImplementedError


def counter_slots(steps: list) -> list[tuple[Any, int]]:
    """``(step, slot)`` of each counter step of a chain: where its counter is in the
    stage's state (its run values follow it)."""
    out, slot = [], 0
    for step in steps:
        if step.kind == "counter":
            out.append((step, slot))
            slot += 1 + step.run_slots
    return out


@dataclasses.dataclass
class Terminal:
    """A batch at the end of a fused chain: output columns resliced into batches.
    ``assemble(columns)`` turns one batch's columns into its final leaves (padding)."""

    node: Any
    batch_size: Any
    drop_remainder: bool
    pads: ClassVar[bool] = False        # assemble() changes columns (padded_batch)
    # batches end where each batch_size input rows end, not every batch_size output rows
    # (nbdata/ops/masked_batch.py)
    groups: ClassVar[bool] = False

    def assemble(self, columns: list) -> list:
        return columns


__all__ = ["DROP", "ChunkSource", "CounterStep", "counter_slots", "IndexedSource", "NotFusable", "PartlyFusable",
           "RowStep", "SourceLeaf", "SourceReader", "StreamLeaf", "StreamSource", "Step", "Terminal", "check_structure", "numba_dtype", "spec_type"]
