"""``at``: element ``index`` of a dataset with random access, computed on its own."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.ops.node import UnaryNode, arg_field
from nbdata.ops.runtime import PositionChunks


@dataclasses.dataclass(frozen=True, eq=False)
class At(UnaryNode):
    """One element: the input's row ``index``, gathered (no row before it is computed)."""

    index: int = arg_field()
    op = "at"

    def cardinality(self) -> int:
        return 1

    def open_chunks(self, ctx, state=None):
        return AtChunks(self, ctx, 0 if state is None else int(state["pos"]))


class AtChunks(PositionChunks):
    def __init__(self, node: At, ctx, pos: int):
        self.node, self.ctx = node, ctx
        super().__init__(1, pos)

    def rows(self, lo: int, hi: int):
        return self.node.input.gather(self.ctx, np.array([self.node.index], np.int64))
