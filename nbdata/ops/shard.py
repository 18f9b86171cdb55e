"""``shard``: every ``num_shards``-th element, starting at ``index``."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata import state_check
from nbdata.ops.node import INFINITE, UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks


@dataclasses.dataclass(frozen=True, eq=False)
class Shard(UnaryNode):
    num_shards: int = arg_field()
    index: int = arg_field()
    op = "shard"

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n in (INFINITE, UNKNOWN):
            return n
        return n // self.num_shards + (1 if self.index < n % self.num_shards else 0)

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows * self.num_shards + self.index)

    def open_chunks(self, ctx, state=None):
        return ShardChunks(ctx.open_chunks(self.input, None if state is None else state["input"]),
                           self.num_shards, self.index, 0 if state is None else state_check.integer(
                               state, "pos", 0, state_check.most_rows(self.input)),
                           ctx.max_rows(self.spec))


class ShardChunks(InputChunks):
    """The rows at input positions ``index``, ``index + num_shards``, ... State: the
    input position reached, the input's state."""

    def __init__(self, it, num_shards: int, index: int, pos: int, limit: int):
        self.it, self.n, self.index, self.pos, self.limit = it, num_shards, index, pos, limit

    def next(self, want: int):
        while True:
            chunk = self.it.next(min(want * self.n, max(self.limit, self.n)))
            if chunk is None:
                return None
            first = (self.index - self.pos) % self.n
            self.pos += chunk.n
            rows = np.arange(first, chunk.n, self.n)
            if len(rows):
                return chunk.take(rows) if self.n > 1 else chunk

    def save(self) -> dict:
        return {"pos": self.pos, "input": self.it.save()}
