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


def split_size(rows: int, num_workers: int) -> int:
    """The rows of one split: about ``SPLITS_PER_WORKER`` splits per worker in an epoch,
    so that fast workers take more of them."""
    return max(1, rows // (SPLITS_PER_WORKER * max(1, num_workers)))


def plan_splits(ranges, size: int, boundaries=None) -> list:
    """The splits of ``ranges`` (``[start, stop)`` row ranges, in order): pieces of
    ``size`` rows, cut within each range (the rows of an epoch not assigned yet), and
    also at each of ``boundaries`` (a source's natural units: a Parquet file's row
    groups), so that no split straddles one.

    >>> plan_splits([[0, 10], [12, 15]], 4)
    [(0, 4), (4, 8), (8, 10), (12, 15)]
    >>> plan_splits([[0, 10]], 100, boundaries=[0, 3, 7])
    [(0, 3), (3, 7), (7, 10)]
    """
    cuts = sorted(int(v) for v in boundaries) if boundaries else []
    out = []
    for lo, b in ranges:
        lo, b = int(lo), int(b)
        inner = [c for c in cuts if lo < c < b]
        for start, stop in zip([lo] + inner, inner + [b]):
            out += [(a, min(stop, a + size)) for a in range(start, stop, size)]
    return out


def subtract(ranges: list, split) -> list:
    """``ranges`` (sorted, disjoint ``[start, stop)``) without the rows of ``split``.

    >>> subtract([[0, 10], [20, 30]], (5, 25))
    [[0, 5], [25, 30]]
    """
    a, b = int(split[0]), int(split[1])
    out = []
    for lo, hi in ranges:
        if hi <= a or lo >= b:
            out.append([lo, hi])
            continue
        if lo < a:
            out.append([lo, a])
        if hi > b:
            out.append([b, hi])
    return out


class Pools:
    """The rows of each epoch of the split source not assigned to any saved position:
    per epoch key, sorted ``[start, stop)`` ranges; a key not listed holds every row
    (``[0, rows)``), except the single-repeat keys ``e<n>`` with ``n < floor``, which
    hold none (epochs every position has moved past). This is the part of a
    ``distributed_epoch`` position that belongs to no worker, so that it re-splits
    among any number of workers."""

    def __init__(self, rows: int, saved: dict | None = None):
        self.rows = int(rows)
        saved = saved or {}
        self.floor = int(saved.get("floor", 0))
        self.remaining = {str(k): [[int(a), int(b)] for a, b in v]
                          for k, v in (saved.get("remaining") or {}).items()}

    def ranges(self, key: str) -> list:
        if key in self.remaining:
            return self.remaining[key]
        n = single_epoch(key)
        return [] if n is not None and n < self.floor else ([[0, self.rows]] if self.rows else [])

    def assign(self, key: str, split) -> None:
        self.remaining[key] = subtract(self.ranges(key), split)

    def compact(self) -> None:
        """Drops the epochs at the floor that are fully assigned (the state stays as
        small after many epochs of a repeat as after one)."""
        while self.remaining.get(f"e{self.floor}") == []:
            del self.remaining[f"e{self.floor}"]
            self.floor += 1

    def save(self) -> dict:
        self.compact()
        return {"floor": self.floor, "remaining": {k: [list(r) for r in v]
                                                    for k, v in self.remaining.items()}}


def epoch_key(path: tuple) -> str:
    """The name of the epoch a split source serves: the repeat epochs above it."""
    return "e" + ".".join(str(int(p)) for p in path)


def key_path(key: str) -> tuple:
    """The repeat epochs an epoch key names (keys order as these tuples).

    >>> key_path("e"), key_path("e3"), key_path("e1.2")
    ((), (3,), (1, 2))
    """
    return tuple(int(p) for p in key[1:].split(".")) if len(key) > 1 else ()


def single_epoch(key: str) -> int | None:
    """The epoch of a key under one repeat (``e<n>``), else None."""
    path = key_path(key)
    return path[0] if len(path) == 1 else None


def shift_key(key: str, base: int) -> str:
    """The key of a worker's epoch for a position that started at epoch ``base`` of a
    single forever-repeat (a fresh worker of a resumed run joins the epoch under way)."""
    if not base:
        return key
    path = key_path(key)
    return epoch_key((path[0] + base,) + path[1:]) if path else key


def forever_repeat(node: Node, source: Node) -> bool:
    """Whether the ops from ``node`` down to the split ``source`` hold exactly one
    repeat, and one that repeats forever (its epochs are the split keys ``e<n>``)."""
    repeats = []
    cur = node
    while cur is not source and cur.inputs:
        if cur.op == "repeat":
            repeats.append(cur)
        cur = cur.inputs[0]
    return (len(repeats) == 1 and isinstance(repeats[0].count, int)
            and not isinstance(repeats[0].count, bool) and repeats[0].count < 0)


def live_splits(state) -> dict:
    """Per epoch key, the smallest split number that the split sources in a saved
    pipeline state will ask for again (their saved ``taken``)."""
    found: dict = {}

    def walk(x, depth=0):
        if depth > 64:
            return
        if isinstance(x, dict):
            if "split_source" in x and "taken" in x:
                key, taken = str(x["split_source"]), int(x["taken"])
                # The current split is re-read from the state itself; a state saved
                # before a split was taken asks for ``taken`` again.
                found[key] = min(found.get(key, taken), taken)
                return
            for v in x.values():
                walk(v, depth + 1)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, depth + 1)

    walk(state)
    return found


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
    reading the source in place, their row numbers). State: the epoch key, how many
    splits this epoch took, the current split and the next row in it."""

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
        return {"split_source": self.key, "taken": self.taken,
                "split": None if self.split is None else list(self.split), "pos": self.pos}
