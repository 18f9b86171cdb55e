"""``repeat``: iterate the input ``count`` times (forever when None or -1)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.chunks import gather_grouped
from nbdata.ops.node import INFINITE, UNKNOWN, NotFusable, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter


@dataclasses.dataclass(frozen=True, eq=False)
class Repeat(UnaryNode):
    count: Any = arg_field()
    op = "repeat"
    fusion_role = "source"

    def cardinality(self) -> int:
        if not isinstance(self.count, int):
            return UNKNOWN
        n = self.input.cardinality()
        if self.count < 0:
            return 0 if n == 0 else INFINITE
        if self.count == 0:
            return 0
        if n in (INFINITE, UNKNOWN):
            return n
        return self.count * n

    def open_chunks(self, ctx, state=None):
        return RepeatChunks(self, ctx, state)

    def random_access(self) -> str | None:
        # TF: a finite repeat of a random-access input of known length is random access
        # (epoch e, row r is input row r drawn in epoch e); repeat(0) and forever are not.
        if not isinstance(self.count, int) or self.count <= 0:
            return f"`repeat({self.count})` does not support random access of tf.data datasets"
        if self.input.cardinality() < 0:
            return "repeat of a dataset of infinite or unknown length"
        return self.input.random_access()

    def gather(self, ctx, rows):
        n = max(1, self.input.cardinality())
        rows = np.asarray(rows, np.int64)
        return gather_grouped(rows % n, rows // n,
                              lambda epoch, r: self.input.gather(epoch_context(ctx, self.count,
                                                                               epoch), r))

    def is_noop(self) -> bool:
        return isinstance(self.count, int) and self.count == 1

    def fusion_source(self, planner):
        """An endless repeat of a node that can repeat as a chunk source (from_tensors)."""
        if self.count >= 0:
            raise NotFusable(f"repeat({self.count}) is not a chunk source (an endless repeat "
                             "of from_tensors is)")
        return self.input.repeated_source(planner)


def epoch_context(ctx, count: int, epoch: int):
    """The context of the input's epoch ``epoch``: random ops below draw anew per epoch.
    ``repeat(1)`` adds no epoch to the path, so it draws what its input alone draws (noop
    elimination removes it from fused plans; the values must not depend on that)."""
    return ctx if count == 1 else ctx.with_path(epoch)


class RepeatChunks(ChunkIter):
    """The input's chunks, epoch after epoch; an epoch that yields nothing ends a
    forever-repeat. State: the epoch, the input's state, whether this epoch yielded."""

    def __init__(self, node: Repeat, ctx, state):
        self.ctx, self.input_node = ctx, node.input
        self.count = int(ctx.value(node.count))
        # The epoch under way: below the count (at it once the last epoch ended).
        self.epoch = 0 if state is None else state_check.integer(
            state, "epoch", 0, self.count if self.count >= 0 else state_check.MAX_POSITION)
        self.yielded = False if state is None else state_check.flag(state, "yielded")
        inner = None if state is None else state_check.nested(state, "input")
        done = self.count == 0 or (state is not None and inner is None)
        self.it = None if done else \
            epoch_context(ctx, self.count, self.epoch).open_chunks(node.input, inner)

    def next(self, want: int):
        while self.it is not None:
            chunk = self.it.next(want)
            if chunk is not None:
                self.yielded = True
                return chunk
            self.it.close()
            self.epoch += 1
            if (0 <= self.count <= self.epoch) or (self.count < 0 and not self.yielded):
                self.it = None
                break
            self.yielded = False
            self.it = epoch_context(self.ctx, self.count, self.epoch).open_chunks(
                self.input_node)
        return None

    def save(self) -> dict:
        return {"epoch": self.epoch, "yielded": self.yielded,
                "input": None if self.it is None else self.it.save()}

    def close(self) -> None:
        if self.it is not None:
            self.it.close()
