"""``interleave``: cycle over datasets made from input elements, ``block_length`` at a time."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from nbdata.chunks import concat_chunks
from nbdata.ops.function import UserFunction
from nbdata.ops.node import AUTOTUNE, UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import BackgroundChunks, ChunkIter, RowReader


@dataclasses.dataclass(frozen=True, eq=False)
class Interleave(UnaryNode):
    fn: UserFunction = arg_field()
    cycle_length: Any = arg_field()
    block_length: int = arg_field()
    num_parallel_calls: Any = None
    deterministic: Any = None
    op = "interleave"

    @property
    def spec(self):
        return self.fn.output_spec.element_spec

    def cardinality(self) -> int:
        return UNKNOWN

    def cycle(self, ctx) -> int:
        """``cycle_length``: None or AUTOTUNE mean the number of cores."""
        cycle = self.cycle_length
        if cycle is None or cycle == AUTOTUNE:
            cycle = ctx.budget.total
        return int(cycle)

    def open_chunks(self, ctx, state=None):
        return InterleaveChunks(self, ctx, state)

    def per_element(self) -> str | None:
        return "makes a dataset from each input element (their rows flow as chunks)"


class InterleaveChunks(ChunkIter):
    """tf.data's interleave order on chunks: slot by slot, ``block_length`` rows from
    each open dataset; an exhausted slot is refilled from the input when the cycle
    comes back to it. With ``num_parallel_calls`` each slot's dataset is read ahead on
    its own background thread (the order stays tf.data's); ``deterministic=False``
    lets a slot whose rows are not ready yet give its turn to the next one.

    State: the input's state, and for each open slot the input's state before its
    element and its dataset's iterator state (restoring reads the elements again).
    """

    def __init__(self, node: Interleave, ctx, state):
        self.node, self.ctx = node, ctx
        self.block = int(node.block_length)
        calls = node.num_parallel_calls
        self.parallel = calls is not None and (calls == AUTOTUNE or int(calls) > 1)
        self.deterministic = ctx.options.deterministic if node.deterministic is None else bool(node.deterministic)
        if self.parallel:
            ctx.stats(node).chosen["parallel slots"] = node.cycle(ctx)
        self.limit = ctx.max_rows(node.input.spec)
        self.reader = RowReader(ctx, node.input, None if state is None else state["input"], self.limit)
        cycle = node.cycle(ctx)
        self.slots: list = [None] * cycle          # (state before element, chunk iterator)
        # With parallel reads, the datasets of the next input elements are opened (and
        # start reading) before their turn: (state before element, chunk iterator).
        self.future: collections.deque = collections.deque()
        self.cycle_index = 0 if state is None else int(state["cycle_index"])
        self.block_index = 0 if state is None else int(state["block_index"])
        self.end_of_input = False if state is None else bool(state["end_of_input"])
        if state is not None:
            for i, slot in enumerate(state["slots"]):
                if slot is not None:
                    element_state, inner = slot
                    reader = RowReader(ctx, node.input, element_state, self.limit)
                    ok, element = reader.next_element()
                    reader.close()
                    if ok:
                        self.slots[i] = (element_state, self._open(element, inner))

    def _open(self, element, state=None):
        ds = self.node.fn(element)
        if self.parallel:
            ctx = self.ctx
            return BackgroundChunks(ctx, lambda s: ctx.open_dataset_chunks(ds, s), ds.element_spec,
                                    state, self.block, ctx.stats(self.node), self.node.label,
                                    start=True)
        return self.ctx.open_dataset_chunks(ds, state)

    def _read(self):
        before = self.reader.save()
        ok, element = self.reader.next_element()
        return (before, self._open(element)) if ok else None

    def _next_dataset(self):
        """The dataset of the next input element (already reading, when parallel)."""
        if self.parallel:
            while not self.end_of_input and len(self.future) < len(self.slots):
                opened = self._read()
                if opened is None:
                    self.end_of_input = True
                    break
                self.future.append(opened)
            return self.future.popleft() if self.future else None
        return None if self.end_of_input else self._read()

    def _advance(self) -> None:
        self.block_index = 0
        self.cycle_index = (self.cycle_index + 1) % len(self.slots)

    def next(self, want: int):
        parts, have = [], 0
        skipped = 0
        while have < want:
            if self.end_of_input and not self.future and all(s is None for s in self.slots):
                break
            slot = self.slots[self.cycle_index]
            if slot is None:
                if self.end_of_input and not self.future:
                    self._advance()
                    continue
                opened = self._next_dataset()
                if opened is None:
                    self.end_of_input = True
                    continue
                self.slots[self.cycle_index] = opened
                continue
            if (self.parallel and not self.deterministic and parts and not slot[1].ready()
                    and skipped < len(self.slots)):
                skipped += 1
                self._advance()
                continue
            chunk = slot[1].next(min(self.block - self.block_index, want - have))
            if chunk is None:
                slot[1].close()
                self.slots[self.cycle_index] = None
                self._advance()
                continue
            if chunk.n:
                parts.append(chunk)
                have += chunk.n
                self.block_index += chunk.n
            if self.block_index >= self.block:
                self._advance()
        return concat_chunks(parts) if parts else None

    def save(self) -> dict:
        # datasets opened ahead are not part of the state: their elements are read again
        reader = self.future[0][0] if self.future else self.reader.save()
        return {"input": reader, "cycle_index": self.cycle_index,
                "block_index": self.block_index,
                "end_of_input": self.end_of_input and not self.future,
                "slots": [None if s is None else (s[0], s[1].save()) for s in self.slots]}

    def close(self) -> None:
        for s in list(self.slots) + list(self.future):
            if s is not None:
                s[1].close()
        self.reader.close()
