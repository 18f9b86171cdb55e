"""``bucket_by_sequence_length`` a chunk at a time, for elements of numeric components
(known shapes, or 1-D of varying length: token sequences, Arrow list columns).

Same output as tf.data's recipe (``group_by_window``, which other elements still use):
bucket ``b`` takes lengths in ``[boundaries[b-1], boundaries[b])``, a bucket's batch goes
out (padded) as soon as it holds ``bucket_batch_sizes[b]`` elements, and at the end of
the input the partial batches go out in bucket order (none with ``drop_remainder``).

Per input chunk: the lengths (``element_length_func`` compiled by Numba over the rows'
views of the packed buffer where it compiles and the element is one sequence; else
called per row in Python), the buckets (vectorized), the batches each bucket fills (in
the order they fill, found per bucket with NumPy), and one padding per batch (packed rows
are padded by one masked assignment). State: the input's state and each bucket's rows
held back.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from typing import Any

import numba
import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk, RowList, col_values, concat_chunks
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.ops.batch import leaf_rows
from nbdata.ops.fusion import pack_ragged
from nbdata.ops.node import UNKNOWN, UnaryNode, arg_field
from nbdata.ops.packed_calls import python_semantics_njit
from nbdata.ops.padded_batch import pad_component
from nbdata.ops.runtime import InputChunks
from nbdata.spec import TensorSpec, flatten, pack_as, string
from nbdata.trace.abstract import call_unpacked

INT32_MIN, INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def eligible(spec) -> bool:
    """Elements this op batches a chunk at a time: numeric components of a known shape
    or 1-D of varying length."""
    return all(isinstance(s, TensorSpec) and s.dtype is not string and s.shape is not None
               and np.dtype(s.dtype).kind in "biuf"
               and (s.shape == (None,) or None not in s.shape) for s in flatten(spec))


@dataclasses.dataclass(frozen=True, eq=False)
class BucketBySequenceLength(UnaryNode):
    """``shapes[b]`` / ``padding_values``: padded_batch's normalized arguments for bucket
    ``b`` (``shapes[b]`` None: pad_to_bucket_boundary's last bucket, an error)."""

    length_fn: Any = arg_field()
    boundaries: tuple = arg_field()
    sizes: tuple = arg_field()
    shapes: tuple = ()
    padding_values: tuple = ()
    drop_remainder: bool = arg_field(False)
    out_spec: Any = None
    op = "bucket_by_sequence_length"

    @property
    def spec(self):
        return self.out_spec

    def cardinality(self) -> int:
        return 0 if self.input.cardinality() == 0 else UNKNOWN

    def kernel_note(self) -> str | None:
        return ("bucket_by_sequence_length: lengths, buckets and batches a chunk at a time; "
                "packed rows padded without Python per row")

    def open_chunks(self, ctx, state=None):
        return BucketChunks(self, ctx, state)


_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _compiled_lengths(fn):
    """A Numba kernel computing ``fn(row)`` for each packed 1-D row, or None when ``fn``
    does not compile (compiled once per function, not per iteration)."""
    try:
        return _COMPILED[fn]
    except (KeyError, TypeError):
        pass
    kernel = _compile_lengths(fn)
    try:
        _COMPILED[fn] = kernel
    except TypeError:       # not weakly referable: compiled again next time
        pass
    return kernel


def _compile_lengths(fn):
    try:
        one = python_semantics_njit(fn)

        @numba.njit(nogil=True)
        def lengths(values, offsets):
            n = len(offsets) - 1
            out = np.empty(n, np.int64)
            for i in range(n):
                out[i] = one(values[offsets[i]:offsets[i + 1]])
            return out
        probe = np.zeros(3, np.int64)
        lengths(probe, np.array([0, 1, 3], np.int64))
        return lengths
    except Exception:   # noqa: BLE001 - it runs in Python then
        return None


class BucketChunks(InputChunks):
    def __init__(self, node: BucketBySequenceLength, ctx, state):
        self.node, self.ctx = node, ctx
        self.specs = flatten(node.input.spec)
        self.lows = np.array([INT32_MIN] + list(node.boundaries), np.int64)
        self.highs = np.array(list(node.boundaries) + [INT32_MAX], np.int64)
        self.it = ctx.open_chunks(node.input, None if state is None else
                                  state_check.nested(state, "input"))
        nb = len(node.sizes)
        if state is None:
            self.pending: list = [None] * nb
            self.ended = False
        else:
            held = state_check.record(state, "pending")["pending"]
            if not isinstance(held, list) or len(held) != nb:
                raise state_check.StateFieldError("pending", held, f"expected {nb} buckets' rows")
            self.pending = [state_check.rows(p, node.input.spec, f"pending[{b}]", none=True)
                            for b, p in enumerate(held)]
            for b, p in enumerate(self.pending):
                if p is not None and p.n >= node.sizes[b]:
                    raise state_check.StateFieldError(
                        f"pending[{b}]", p, f"holds {p.n} rows, a batch is {node.sizes[b]}")
            self.ended = state_check.flag(state, "ended")
        self.error: BaseException | None = None
        single = isinstance(node.input.spec, TensorSpec) and node.input.spec.shape == (None,)
        self.kernel = _compiled_lengths(node.length_fn) if single else None

    def _lengths(self, chunk: Chunk) -> np.ndarray:
        if self.kernel is not None:
            values, offsets, _ = pack_ragged(chunk.columns[0], self.specs[0])
            return self.kernel(values, offsets)
        spec = self.node.input.spec
        columns = [col_values(c) for c in chunk.columns]
        out = np.empty(chunk.n, np.int64)
        for j in range(chunk.n):
            element = pack_as(spec, [c[j] for c in columns])
            out[j] = call_unpacked(self.node.length_fn, element)
        return out

    def _batch(self, rows: Chunk, b: int) -> list:
        node = self.node
        shapes = node.shapes[b]
        if shapes is None:
            raise InvalidArgumentError(
                f"{node.label}: with pad_to_bucket_boundary=True elements must be shorter than "
                "max(bucket_boundaries); an element is longer, add a boundary", node.op)
        out = []
        for k, col in enumerate(rows.columns):
            if isinstance(col, np.ndarray) and col.shape[1:] == tuple(
                    d if w is None else w for d, w in zip(col.shape[1:], shapes[k])):
                out.append(col.copy())
                continue
            out.append(pad_component(leaf_rows(col), shapes[k], node.padding_values[k], k,
                                     node.label))
        return out

    def _chunk(self, batches: list) -> Chunk | None:
        if not batches:
            return None
        columns = [RowList(batch[k] for batch in batches) for k in range(len(self.specs))]
        return Chunk(columns, len(batches))

    def next(self, want: int) -> Chunk | None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        node = self.node
        while not self.ended:
            chunk = self.it.next(max(1, want))
            if chunk is None:
                self.ended = True
                if node.drop_remainder:
                    return None
                batches = [self._batch(p, b) for b, p in enumerate(self.pending)
                           if p is not None and p.n]
                self.pending = [None] * len(self.pending)
                return self._chunk(batches)
            if not chunk.n:
                continue
            lengths = self._lengths(chunk)
            inside = (self.lows[None, :] <= lengths[:, None]) & (lengths[:, None] < self.highs[None, :])
            buckets = np.argmax(inside, axis=1)
            events = []     # (last row, bucket, its batch number in this chunk, rows)
            carried = {}    # bucket -> rows held back before this chunk, in its first batch
            for b, size in enumerate(node.sizes):
                mine = np.flatnonzero(buckets == b)
                held = self.pending[b]
                c = 0 if held is None else held.n
                full = (c + len(mine)) // size
                for j in range(full):
                    lo, hi = j * size - c, (j + 1) * size - c
                    events.append((int(mine[hi - 1]), b, j, mine[max(lo, 0):hi]))
                if full:
                    if c:
                        carried[b] = held
                    held = None
                rest = mine[max(full * size - c, 0):]
                if len(rest):
                    part = chunk.take(rest)
                    held = part if held is None else concat_chunks([held, part])
                self.pending[b] = held
            if not events:
                continue
            events.sort(key=lambda e: e[0])
            batches = []
            for _, b, j, rows in events:
                part = chunk.take(rows)
                if j == 0 and b in carried:
                    part = concat_chunks([carried[b], part])
                try:
                    batches.append(self._batch(part, b))
                except OpError:
                    if not batches:
                        raise
                    self.error = sys.exc_info()[1]    # the batches before it go out first
                    break
            return self._chunk(batches)
        return None

    def save(self) -> dict:
        return {"input": self.it.save(), "pending": list(self.pending), "ended": self.ended}
