"""``concatenate``: all elements of one dataset, then all of another."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata import state_check
from nbdata.chunks import gather_grouped
from nbdata.ops.node import INFINITE, UNKNOWN, Node, input_field
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import merge_specs


@dataclasses.dataclass(frozen=True, eq=False)
class Concatenate(Node):
    first: Node = input_field()
    second: Node = input_field()
    op = "concatenate"

    @property
    def spec(self):
        return merge_specs(self.first.spec, self.second.spec)

    def cardinality(self) -> int:
        a, b = self.first.cardinality(), self.second.cardinality()
        if INFINITE in (a, b):
            return INFINITE
        if UNKNOWN in (a, b):
            return UNKNOWN
        return a + b

    def open_chunks(self, ctx, state=None):
        return ConcatenateChunks(self, ctx, state)

    def random_access(self) -> str | None:
        if self.first.cardinality() < 0:
            return "concatenate after a dataset of infinite or unknown length"
        return self.first.random_access() or self.second.random_access()

    def gather(self, ctx, rows):
        n = self.first.cardinality()
        rows = np.asarray(rows, np.int64)
        second = rows >= n
        parts = (self.first, self.second)
        return gather_grouped(rows - n * second, second.astype(np.int64),
                              lambda part, r: parts[part].gather(ctx, r))


class ConcatenateChunks(ChunkIter):
    """The first input's chunks, then the second's. State: which input, and its state."""

    def __init__(self, node: Concatenate, ctx, state):
        self.node, self.ctx = node, ctx
        self.part = 0 if state is None else state_check.integer(state, "part", 0, 2)
        inner = None if state is None else state_check.nested(state, "input", self.part > 1)
        self.it = None if self.part > 1 else ctx.open_chunks(node.inputs[self.part], inner)

    def next(self, want: int):
        while self.it is not None:
            chunk = self.it.next(want)
            if chunk is not None:
                return chunk
            self.it.close()
            self.part += 1
            self.it = self.ctx.open_chunks(self.node.second) if self.part == 1 else None
        return None

    def save(self) -> dict:
        return {"part": self.part, "input": None if self.it is None else self.it.save()}

    def close(self) -> None:
        if self.it is not None:
            self.it.close()
