"""``zip``: elements of several datasets side by side, ending with the shortest."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata import state_check
from nbdata.chunks import Chunk
from nbdata.errors import OpError
from nbdata.ops.fusion import ChunkSource, SourceReader
from nbdata.ops.runtime import ChunkIter
from nbdata.ops.node import INFINITE, UNKNOWN, Node, NotFusable
from nbdata.spec import flatten, pack_as


@dataclasses.dataclass(frozen=True, eq=False)
class Zip(Node):
    """``structure`` is the user's nesting with one input index at each leaf."""

    structure: Any
    children: tuple
    op = "zip"
    fusion_role = "source"

    @property
    def inputs(self):
        return self.children

    def with_inputs(self, *inputs):
        return dataclasses.replace(self, children=tuple(inputs))

    @property
    def spec(self):
        return pack_as(self.structure, [self.children[i].spec for i in flatten(self.structure)])

    def cardinality(self) -> int:
        result = INFINITE
        for c in self.children:
            n = c.cardinality()
            if n == UNKNOWN:
                return UNKNOWN
            if n != INFINITE and (result == INFINITE or n < result):
                result = n
        return result

    def open_chunks(self, ctx, state=None):
        return ZipChunks(self, ctx, state)

    def random_access(self) -> str | None:
        for c in self.children:
            reason = c.random_access()
            if reason:
                return reason
        return None if self.cardinality() >= 0 else "zip of datasets of unknown length"

    def cheap_gather(self) -> bool:
        return all(c.cheap_gather() for c in self.children)

    def gather(self, ctx, rows) -> Chunk:
        parts = [c.gather(ctx, rows) for c in self.children]
        return Chunk([col for i in flatten(self.structure) for col in parts[i].columns], len(rows))

    def fusion_source(self, planner) -> ChunkSource:
        """The children's leaves side by side, in the order the element flattens them;
        rows end with the shortest child."""
        sources = [c.fusion_source(planner) for c in self.children]
        for child, source in zip(self.children, sources):
            if source.indexed:   # its reader gives rows in place, not at the row numbers
                raise NotFusable(f"its input {child.op} reads rows at shuffled row numbers")
        order = flatten(self.structure)  # child index at each leaf position
        leaves = [leaf for i in order for leaf in sources[i].leaves]
        counts = [s.rows for s in sources if s.rows not in (None, INFINITE)]
        rows = min(counts) if counts else (INFINITE if all(s.rows == INFINITE for s in sources)
                                           else None)

        def open_reader(ctx) -> SourceReader:
            readers = [s.open(ctx) for s in sources]
            return SourceReader.combine([readers[i] for i in order])

        source = ChunkSource(self, leaves, rows, open_reader)
        source.in_place = all(s.in_place for s in sources)
        return source


class ZipChunks(ChunkIter):
    """Rows of every input side by side; rows one input gave beyond the shortest wait
    in ``carry`` for the next call. State: the inputs' states and those rows."""

    def __init__(self, node: Zip, ctx, state):
        states = [None] * len(node.children) if state is None else state_check.record(
            state, "inputs", "carry", "ended")["inputs"]
        if state is not None:   # one state, and rows held back, per input
            for key in ("inputs", "carry"):
                if not isinstance(state[key], list) or len(state[key]) != len(node.children):
                    raise state_check.StateFieldError(key, state[key], f"expected a list of "
                                                      f"{len(node.children)} (one per input)")
            carry = [state_check.rows(v, c.spec, f"carry[{k}]", none=True)
                     for k, (v, c) in enumerate(zip(state["carry"], node.children))]
        self.inputs = [ctx.open_chunks(c, s) for c, s in zip(node.children, states)]
        self.carry = [None] * len(self.inputs) if state is None else carry
        self.order = flatten(node.structure)
        self.ended = False if state is None else state_check.flag(state, "ended")

    def next(self, want: int):
        if self.ended:
            return None
        parts = []
        for i, it in enumerate(self.inputs):
            part = self.carry[i]
            if part is None:
                part = it.next(want)
                if part is None:
                    # tf.data asks each later input once more, so that inputs of the
                    # same length reach their end too (their caches complete).
                    for k in range(i + 1, len(self.inputs)):
                        if self.carry[k] is None:
                            try:
                                self.inputs[k].next(1)
                            except OpError:
                                pass
                    self.ended = True
                    self.close()
                    return None
            parts.append(part)
        n = min(want, min(p.n for p in parts))
        self.carry = [p.slice(n, p.n) if p.n > n else None for p in parts]
        columns = [c for i in self.order for c in (parts[i].slice(0, n) if parts[i].n > n
                                                   else parts[i]).columns]
        return Chunk(columns, n)

    def save(self) -> dict:
        return {"inputs": [it.save() for it in self.inputs], "carry": list(self.carry),
                "ended": self.ended}

    def close(self) -> None:
        for it in self.inputs:
            it.close()
