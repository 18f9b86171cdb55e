"""``batch``: stack consecutive elements along a new leading dimension."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk, PackedRows, RowList, col_values
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.ops.fusion import Terminal, check_structure
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN, UnaryNode, arg_field
from nbdata.kernels.batching import batch_columns, stack_leaves
from nbdata.ops.runtime import InputChunks, RowQueue
from nbdata.spec import SparseTensor, batched_spec, flatten


def batch_cardinality(n: int, batch_size: Any, drop_remainder: bool) -> int:
    if n in (INFINITE, UNKNOWN) or not isinstance(batch_size, (int, np.integer)):
        return n if n in (INFINITE, UNKNOWN) else UNKNOWN
    return n // batch_size if drop_remainder else -(-n // batch_size)


@dataclasses.dataclass(frozen=True, eq=False)
class Batch(UnaryNode):
    batch_size: Any = arg_field()
    drop_remainder: bool = arg_field()
    num_parallel_calls: Any = None     # caps the threads copying rows into batches
    # map_and_batch: an input error fails its whole batch, whose remaining input
    # elements are consumed with it (the next batch starts at the next multiple)
    whole_batch_errors: bool = False
    op = "batch"
    fusion_role = "terminal"

    @property
    def spec(self):
        dim = self.batch_size if self.drop_remainder and isinstance(self.batch_size, int) else None
        return batched_spec(self.input.spec, dim, self.op)

    def cardinality(self) -> int:
        return batch_cardinality(self.input.cardinality(), self.batch_size, self.drop_remainder)

    def fusion_terminal(self, planner, structure) -> Terminal:
        check_structure(structure, f"{self.op} input")
        return Terminal(self, self.batch_size, self.drop_remainder)

    def open_chunks(self, ctx, state=None):
        calls = self.num_parallel_calls
        return BatchChunks(self, ctx, state, self.batch_leaf,
                           threads=None if calls in (None, AUTOTUNE) else int(calls))

    def global_shuffle_refusal(self) -> str | None:
        """Why ``global_shuffle`` above this batch is refused (TF: a last partial batch
        would move to any position)."""
        if self.drop_remainder:
            return None
        return "`batch` does not support global shuffling with `drop_remainder=False`."

    def random_access(self) -> str | None:
        if not isinstance(self.batch_size, int):
            return "batch with a placeholder batch_size"
        return self.input.random_access()

    def gather(self, ctx, rows):
        """Batches at positions ``rows``: batch ``i`` holds input rows ``i*B .. (i+1)*B``."""
        n, b = self.input.cardinality(), self.batch_size
        batches = []
        for i in rows:
            lo = int(i) * b
            part = self.input.gather(ctx, np.arange(lo, min(n, lo + b), dtype=np.int64))
            batches.append([self.batch_leaf(col_values(c), k) for k, c in enumerate(part.columns)])
        columns = [[batch[k] for batch in batches] for k in range(len(flatten(self.spec)))]
        return Chunk([np.stack(c) if not isinstance(c[0], SparseTensor)
                      and len({np.shape(v) for v in c}) == 1 else RowList(c)
                      for c in columns], len(rows))

    def batch_leaf(self, values: list, component: int):
        """One component of one batch from its rows' values."""
        return stack_leaves(values, component, self.label)


def batch_size_of(node, ctx) -> int:
    """The batch size of a batching node (``batch_size`` may be a placeholder) for one
    run; InvalidArgumentError naming the op when it is not positive."""
    size = node.batch_size
    if type(size) is not int:   # (a placeholder: its value this run; a NumPy integer)
        size = int(ctx.value(size))
    if size <= 0:
        raise InvalidArgumentError(f"{node.label}: batch_size must be positive, got {size}",
                                   node.op)
    return size


def leaf_rows(column) -> list:
    """A batch's rows of one column, for a leaf function: packed rows as they are (a
    list whose row views are made only if the leaf iterates it; padding reads the
    packed buffer), other columns' values."""
    return column if isinstance(column, PackedRows) else col_values(column)


class BatchChunks(InputChunks):
    """Batches from an input chunk stream: full batches inside one input chunk are
    views of it; rows of a batch that straddles chunks are joined. State: the input's
    state and the rows read but not yet batched."""

    def __init__(self, node, ctx, state, leaf, pads: bool = False, threads: int | None = None):
        self.node = node
        self.leaf = leaf
        self.pads = pads
        self.size = batch_size_of(node, ctx)
        self.drop = node.drop_remainder
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.ctx = ctx
        self.threads = threads     # caps the kernel threads copying rows (None: the budget)
        # An input whose chunks are fresh arrays of its own (pack's rows): batches are
        # views of them, not copies.
        self.copy = not getattr(node.input, "batch_views", False)
        self.queue = RowQueue([] if state is None else state_check.row_pieces(
            state_check.record(state, "pieces")["pieces"], node.input.spec, "pieces"))
        self.ended = False if state is None else state_check.flag(state, "ended")
        self.error: BaseException | None = None

    def save(self) -> dict:
        return {"input": self.it.save(), "pieces": list(self.queue.pieces), "ended": self.ended}

    def _batches(self, rows: Chunk, count: int) -> Chunk:
        """``count`` batches; when one cannot be built, the ones before it, and its
        error raised by the next call."""
        if not self.pads and not any(isinstance(c, RowList) for c in rows.columns):
            with self.ctx.kernels(self.threads):
                return Chunk(batch_columns(rows.columns, count, self.size, self.leaf,
                                           copy=self.copy), count)
        done = []
        for j in range(count):
            part = rows.slice(j * self.size, (j + 1) * self.size)
            try:
                done.append([self.leaf(leaf_rows(c), i) for i, c in enumerate(part.columns)])
            except OpError as e:
                self.error = e
                break
        if not done:
            err, self.error = self.error, None
            raise err
        columns = [RowList(batch[i] for batch in done) for i in range(len(rows.columns))]
        return Chunk(columns, len(done))

    def next(self, want: int) -> Chunk | None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        b, queue = self.size, self.queue
        while queue.n < b * max(1, want) and not self.ended:
            try:
                chunk = self.it.next(b * max(1, want) - queue.n)
            except OpError as e:
                # The batch the failing element belongs to fails (its rows so far are
                # dropped, as in tf.data); the full batches before it go out first.
                whole = queue.n // b * b
                if getattr(self.node, "whole_batch_errors", False):
                    self._skip(b - (queue.n - whole) - 1)
                kept = queue.take(whole) if whole else None
                queue.clear()
                if kept is None:
                    raise
                queue.add(kept)
                self.error = e
                break
            if chunk is None:
                self.ended = True
                break
            queue.add(chunk)
        count = min(max(1, want), queue.n // b)
        if count and not self.copy:
            # Batches as views: those the first chunk holds (one joined if it holds none).
            count = queue.whole_groups(b, count)
        if count:
            return self._batches(queue.take(count * b), count)
        if queue.n and not self.drop:
            return self._batches_partial(queue.take(queue.n))
        queue.clear()
        return None

    def _skip(self, n: int) -> None:
        """Consume ``n`` more input elements (an error counts as one), for the rest of
        a batch that failed."""
        while n > 0 and not self.ended:
            try:
                chunk = self.it.next(n)
            except OpError:
                n -= 1
                continue
            if chunk is None:
                self.ended = True
                break
            n -= chunk.n

    def _batches_partial(self, rows: Chunk) -> Chunk:
        leaves = [self.leaf(leaf_rows(c), i) for i, c in enumerate(rows.columns)]
        return Chunk([v[None] if isinstance(v, (np.ndarray, np.generic)) else RowList([v])
                      for v in leaves], 1)
