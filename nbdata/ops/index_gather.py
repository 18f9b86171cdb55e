"""``IndexGather``: the rows of a random-access dataset at the positions an index
dataset names, in the index dataset's order (``nd.experimental.index_shuffle``: a
global shuffle of positions, with per-file skip/take, over the dataset a reader factory
made). Chunks of positions are gathered at once (``Node.gather``); the state is the
index dataset's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import Node, input_field
from nbdata.ops.runtime import InputChunks


@dataclasses.dataclass(frozen=True, eq=False)
class IndexGather(Node):
    positions: Node = input_field()
    source: Node = input_field()
    op = "index_gather"

    @property
    def spec(self):
        return self.source.spec

    def cardinality(self) -> int:
        return self.positions.cardinality()

    def open_chunks(self, ctx, state=None):
        reason = self.source.random_access()
        if reason:
            raise InvalidArgumentError(f"index_shuffle: the reader's dataset does not support "
                                       f"random access ({reason})", "index_shuffle")
        return GatherChunks(ctx.open_chunks(self.positions, state), self.source, ctx)


class GatherChunks(InputChunks):
    def __init__(self, it, source: Node, ctx):
        self.it, self.source, self.ctx = it, source, ctx

    def next(self, want: int):
        chunk = self.it.next(want)
        if chunk is None:
            return None
        rows = np.asarray(chunk.columns[0], np.int64)
        return self.source.gather(self.ctx, rows)

    def save(self) -> dict:
        return self.it.save()
