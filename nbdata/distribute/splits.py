"""Splits of a dataset's source for ``distributed_epoch``, and the source node a worker
runs over the splits the job hands it.

A dataset is splittable when following its single-input ops down reaches a source
with random access and a known number of rows (``range``, ``from_tensor_slices``,
the file names under the file datasets and ``list_files``): a split is then a
range of that source's rows (one file name when the rows are files). A worker's copy
of the dataset has that source replaced by :class:`SplitSource`, whose chunk
iterator asks the job for its next split whenever the current one ends.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from nbdata.chunks import Chunk
from nbdata.errors import UnimplementedError
from nbdata.ops.fusion import IndexedSource
from nbdata.ops.node import INFINITE, UNKNOWN, Node, NotFusable
from nbdata.ops.runtime import ChunkIter
from nbdata.random import derive_seed

SPLITS_PER_WORKER = 16


def splittable_source(node: Node) -> Node:
    """The source ``distributed_epoch`` splits: the leaf below ``node``'s chain of
    single-input ops. Raises UnimplementedError naming the op that stops it."""
    cur = node
    while cur.inputs:
        if len(cur.inputs) > 1:
            raise UnimplementedError(
                f"distribute(processing_mode='distributed_epoch'): cannot split {cur.label}, "
                f"which reads {len(cur.inputs)} datasets; a split epoch needs one source "
                "with random access (range, from_tensor_slices, file names); use "
                "processing_mode='parallel_epochs', or distribute each input first", cur.op)
        cur = cur.inputs[0]
    why = cur.random_access()
    rows = cur.cardinality()
    if why is not None or rows in (INFINITE, UNKNOWN):
        reason = why if why is not None else f"its number of rows is {'infinite' if rows == INFINITE else 'unknown'}"
        raise UnimplementedError(
            f"distribute(processing_mode='distributed_epoch'): cannot split the source "
            f"{cur.label} ({reason}); splittable sources are range, from_tensor_slices, "
            "list_files and the file datasets over a list of names; use "
            "processing_mode='parallel_epochs' for this dataset", cur.op)
    return cur


def plan_splits(source: Node, num_workers: int) -> list:
    """The splits of one epoch: ``(start, stop)`` row ranges of ``source``, about
    ``SPLITS_PER_WORKER`` per worker so that fast workers take more of them."""
    rows = source.cardinality()
    size = max(1, rows // (SPLITS_PER_WORKER * num_workers))
    return [(a, min(rows, a + size)) for a in range(0, rows, size)]


def epoch_key(path: tuple) -> str:
    """The name of the epoch a split source serves: the repeat epochs above it."""
    return "e" + ".".join(str(int(p)) for p in path)


def replace_node(node: Node, target: Node, replacement: Node) -> Node:
    """``node``'s plan with ``target`` (found by identity) replaced."""
    if node is target:
        return replacement
    if not node.inputs:
        return node
    return node.with_inputs(*[replace_node(c, target, replacement) for c in node.inputs])


def reseed(node: Node, index: int) -> Node:
    """``node``'s plan with each explicit random seed replaced by one derived for worker
    ``index`` (ops without a seed derive theirs from the pipeline seed, which the
    worker sets per index too)."""
    inputs = [reseed(c, index) for c in node.inputs]
    if inputs:
        node = node.with_inputs(*inputs)
    if node.seeded and node.seed is not None:
        node = dataclasses.replace(node, seed=derive_seed(int(node.seed), index))
    return node


@dataclasses.dataclass(frozen=True, eq=False)
class SplitSource(Node):
    """The rows of ``source`` in the splits ``take_split(epoch_key, k)`` hands out (the
    ``k``-th split this worker takes in that epoch, None once there are no more)."""

    source: Node
    take_split: Callable = dataclasses.field(compare=False, repr=False)
    op = "split_source"
    fusion_role = "source"

    @property
    def spec(self):
        return self.source.spec

    def describe(self) -> str:
        return f"split_source({self.source.describe()}, splits from the job)"

    def open_chunks(self, ctx, state=None):
        return SplitChunks(self, ctx, state)

    def fusion_source(self, planner):
        """The source read in place at the row numbers of the splits (no row copied
        before the kernel runs), as a shuffle over row numbers reads it."""
        source = self.source.fusion_source(planner)
        if not source.in_place or source.indexed:
            raise NotFusable(f"{self.source.op} is not read in place")
        return IndexedSource(self, source, lambda ctx, state: SplitChunks(self, ctx, state, False))


class SplitChunks(ChunkIter):
    """Rows of one split after another, gathered from the source (or, for a fused stage
    reading the source in place, their row numbers). State: how many splits this epoch
    took, the current split and the next row in it."""

    def __init__(self, node: SplitSource, ctx, state: dict | None, gather: bool = True):
        self.node, self.ctx, self.gather = node, ctx, gather
        self.key = epoch_key(ctx.path)
        self.limit = ctx.max_rows(node.spec)
        if state is None:
            self.taken, self.split, self.pos = 0, None, 0
        else:
            self.taken = int(state["taken"])
            self.split = None if state["split"] is None else tuple(int(v) for v in state["split"])
            self.pos = int(state["pos"])

    def next(self, want: int):
        while True:
            if self.split is None:
                split = self.node.take_split(self.key, self.taken)
                if split is None:
                    return None
                self.taken += 1
                self.split, self.pos = (int(split[0]), int(split[1])), int(split[0])
            stop = min(self.split[1], self.pos + max(1, min(want, self.limit)))
            if stop > self.pos:
                rows = np.arange(self.pos, stop, dtype=np.int64)
                self.pos = stop
                return self.node.source.gather(self.ctx, rows) if self.gather else Chunk([rows], len(rows))
            self.split = None

    def save(self) -> dict:
        return {"taken": self.taken, "split": None if self.split is None else list(self.split),
                "pos": self.pos}
