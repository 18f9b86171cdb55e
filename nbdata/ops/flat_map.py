"""``flat_map``: map each element to a dataset and chain those datasets."""

from __future__ import annotations

import dataclasses

from nbdata import state_check
from nbdata.ops.function import UserFunction
from nbdata.ops.node import UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter, RowReader


@dataclasses.dataclass(frozen=True, eq=False)
class FlatMap(UnaryNode):
    fn: UserFunction = arg_field()
    op = "flat_map"

    @property
    def spec(self):
        return self.fn.output_spec.element_spec

    def cardinality(self) -> int:
        return UNKNOWN

    def open_chunks(self, ctx, state=None):
        return FlatMapChunks(self, ctx, state)

    def per_element(self) -> str | None:
        return "makes a dataset from each input element (their rows flow as chunks)"


class FlatMapChunks(ChunkIter):
    """The chunks of the dataset made from each input element, in turn.

    State: the input's state before the current element and the current dataset's
    iterator state; restoring reads that element again to remake its dataset (no
    element is saved, so windows, whose elements are datasets, can be saved too).
    """

    def __init__(self, node: FlatMap, ctx, state):
        self.node, self.ctx = node, ctx
        inner = None if state is None else state_check.nested(state, "inner")
        self.reader = RowReader(ctx, node.input, None if state is None else
                                state_check.nested(state, "input"), ctx.max_rows(node.input.spec))
        self.element_state = None
        self.inner = None
        if inner is not None:
            self.element_state = self.reader.save()
            ok, element = self.reader.next_element()
            if ok:
                self.inner = ctx.open_dataset_chunks(node.fn(element), inner)

    def next(self, want: int):
        while True:
            if self.inner is None:
                self.element_state = self.reader.save()
                ok, element = self.reader.next_element()
                if not ok:
                    return None
                self.inner = self.ctx.open_dataset_chunks(self.node.fn(element))
            chunk = self.inner.next(want)
            if chunk is not None:
                return chunk
            self.inner.close()
            self.inner = None

    def save(self) -> dict:
        if self.inner is None:
            return {"input": self.reader.save(), "inner": None}
        return {"input": self.element_state, "inner": self.inner.save()}

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
        self.reader.close()
