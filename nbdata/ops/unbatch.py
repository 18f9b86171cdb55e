"""``unbatch``: split each element along its leading dimension into several elements."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk, col_values, column_from_values
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import INFINITE, UNKNOWN, UnaryNode
from nbdata.ops.runtime import InputChunks
from nbdata.spec import (DatasetSpec, SparseTensor, SparseTensorSpec, TensorSpec, flatten,
                         pack_as)


@dataclasses.dataclass(frozen=True, eq=False)
class Unbatch(UnaryNode):
    op = "unbatch"

    @property
    def spec(self):
        dims = {s.shape[0] for s in flatten(self.input.spec)
                if isinstance(s, (TensorSpec, DatasetSpec, SparseTensorSpec)) and s.shape
                and s.shape[0] is not None}
        if len(dims) > 1:
            raise InvalidArgumentError(
                f"unbatch: components have different leading dimensions {sorted(dims)}", self.op)
        out = []
        for s in flatten(self.input.spec):
            if isinstance(s, DatasetSpec) and s.shape:   # a batch of datasets: each of them
                out.append(DatasetSpec(s.element_spec, tuple(s.shape[1:])))
                continue
            if isinstance(s, SparseTensorSpec) and s.shape:   # rows of a sparse batch
                out.append(SparseTensorSpec(tuple(s.shape[1:]), s.dtype))
                continue
            if not isinstance(s, TensorSpec) or (s.shape is not None and len(s.shape) == 0):
                raise InvalidArgumentError(
                    f"unbatch: every component must have rank >= 1, got {s}", self.op)
            out.append(TensorSpec(None if s.shape is None else s.shape[1:], s.dtype))
        return pack_as(self.input.spec, out)

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n in (INFINITE, UNKNOWN):
            return n
        dims = {None if s.shape is None else s.shape[0] for s in flatten(self.input.spec)}
        known = dims - {None}
        if len(known) == 1:
            return n * known.pop()
        return UNKNOWN

    def open_chunks(self, ctx, state=None):
        return UnbatchChunks(self, ctx, state)

    def _batch_size(self) -> int | None:
        """The one static leading dim of the dense components (None: not known)."""
        specs = flatten(self.input.spec)
        if not all(isinstance(s, TensorSpec) and s.shape for s in specs):
            return None
        dims = {s.shape[0] for s in specs}
        return dims.pop() if len(dims) == 1 and None not in dims else None

    def random_access(self) -> str | None:
        reason = self.input.random_access()
        if reason is not None:
            return reason
        if self._batch_size() is None:
            return ("unbatch of batches whose size is not static (row i of the output is "
                    "row i % b of batch i // b only for a fixed b: batch(..., drop_remainder=True))")
        return None

    def gather(self, ctx, rows) -> Chunk:
        b = self._batch_size()
        rows = np.asarray(rows, np.int64)
        batches = self.input.gather(ctx, rows // b)
        within = rows % b
        specs = flatten(self.spec)
        return Chunk([column_from_values([col[j][k] for j, k in enumerate(within)], s)
                      for col, s in zip((col_values(c) for c in batches.columns), specs)], len(rows))


def _leading(value) -> int:
    """The number of rows of one batch component (a sparse one's: its dense dim 0)."""
    if isinstance(value, SparseTensor):
        return int(value.dense_shape[0])
    return len(value)


def _row(value, k: int):
    """Row ``k`` of one batch component (of a sparse one: its entries in row ``k``)."""
    if isinstance(value, SparseTensor):
        mask = value.indices[:, 0] == k
        return SparseTensor(value.indices[mask, 1:], value.values[mask], value.dense_shape[1:])
    return value[k]


def _mismatch(sizes) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"unbatch: components of an element have different leading dimensions "
        f"{sorted(sizes)}", "unbatch")


class UnbatchChunks(InputChunks):
    """Rows of the input's batches: dense batch columns are reshaped (views), batches of
    varying sizes are joined. State: the input's state and rows not yet handed out."""

    def __init__(self, node: Unbatch, ctx, state):
        self.specs = flatten(node.spec)
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.pending: Chunk | None = None if state is None else state_check.rows(
            state_check.record(state, "pending")["pending"], node.spec, "pending", none=True)
        self.error: BaseException | None = None
        first = {s.shape[0] for s in flatten(node.input.spec)
                 if isinstance(s, TensorSpec) and s.shape and s.shape[0]}
        self.per_batch = first.pop() if len(first) == 1 else 1

    def save(self) -> dict:
        return {"input": self.it.save(), "pending": self.pending}

    def _rows(self, chunk: Chunk) -> Chunk:
        if all(isinstance(c, np.ndarray) for c in chunk.columns):
            sizes = {c.shape[1] if c.ndim > 1 else -1 for c in chunk.columns}
            if -1 in sizes:
                raise InvalidArgumentError("unbatch: every component must have rank >= 1", "unbatch")
            if len(sizes) > 1:
                raise _mismatch(sizes)
            size = sizes.pop() if sizes else 0
            return Chunk([c.reshape((chunk.n * size,) + c.shape[2:]) for c in chunk.columns],
                         chunk.n * size)
        columns = [col_values(c) for c in chunk.columns]
        parts: list[list] = [[] for _ in columns]
        rows = 0
        for j in range(chunk.n):
            sizes = {_leading(col[j]) for col in columns}
            if len(sizes) > 1:
                if rows == 0:
                    raise _mismatch(sizes)
                self.error = _mismatch(sizes)
                break
            for part, col in zip(parts, columns):
                part.extend(_row(col[j], k) for k in range(_leading(col[j])))
            rows += sizes.pop() if sizes else 0
        return Chunk([column_from_values(part, s) for part, s in zip(parts, self.specs)], rows)

    def next(self, want: int):
        while self.pending is None or self.pending.n == 0:
            if self.error is not None:
                err, self.error = self.error, None
                raise err
            chunk = self.it.next(max(1, want // self.per_batch))
            if chunk is None:
                return None
            self.pending = self._rows(chunk)
        out = self.pending
        if out.n > want:
            self.pending = out.slice(want, out.n)
            return out.slice(0, want)
        self.pending = None
        return out
