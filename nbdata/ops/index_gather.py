"""``IndexGather``: the rows of a random-access dataset at the positions an index
dataset names, in the index dataset's order (``nd.experimental.index_shuffle``: a
global shuffle of positions, with per-file skip/take, over the dataset a reader factory
made). Chunks of positions are gathered at once (``Node.gather``); with
``num_parallel_calls`` > 1 (or AUTOTUNE: the pipeline's thread budget) a chunk's
positions are split into that many consecutive parts gathered at once on nbdata's
shared pool (``kernels.threads.shared_pool``; the calling thread gathers the first
part) and joined in order, so the rows and their order are those of one call. The
state is the index dataset's (the same whatever ``num_parallel_calls``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.chunks import concat_chunks
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import AUTOTUNE, Node, input_field
from nbdata.ops.runtime import InputChunks

#: The fewest positions one parallel call gathers: smaller chunks are gathered at once.
MIN_ROWS_PER_CALL = 256


@dataclasses.dataclass(frozen=True, eq=False)
class IndexGather(Node):
    positions: Node = input_field()
    source: Node = input_field()
    # gathers at once (AUTOTUNE: the thread budget); not part of the plan's identity:
    # a state saved with one count restores with another
    num_parallel_calls: int = dataclasses.field(default=1, metadata={"identity": False})
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
        calls = self.num_parallel_calls
        calls = ctx.budget.total if calls == AUTOTUNE else max(1, int(calls))
        return GatherChunks(ctx.open_chunks(self.positions, state), self.source, ctx, calls)


class GatherChunks(InputChunks):
    def __init__(self, it, source: Node, ctx, calls: int = 1):
        self.it, self.source, self.ctx, self.calls = it, source, ctx, calls

    def next(self, want: int):
        chunk = self.it.next(want)
        if chunk is None:
            return None
        rows = np.asarray(chunk.columns[0], np.int64)
        parts = min(self.calls, len(rows) // MIN_ROWS_PER_CALL)
        if parts <= 1:
            return self.source.gather(self.ctx, rows)
        from nbdata.kernels.threads import shared_pool
        pieces = np.array_split(rows, parts)
        pool = shared_pool()
        futures = [pool.submit(self.source.gather, self.ctx, p) for p in pieces[1:]]
        try:
            out = [self.source.gather(self.ctx, pieces[0])]
            out += [f.result() for f in futures]   # the first part's error first
        except BaseException:
            for f in futures:   # none left running on this run's context
                if not f.cancel():
                    f.exception()
            raise
        return concat_chunks(out)

    def save(self) -> dict:
        return self.it.save()
