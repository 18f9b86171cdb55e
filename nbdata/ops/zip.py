"""``zip``: elements of several datasets side by side, ending with the shortest."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.ops.fusion import ChunkSource, SourceReader
from nbdata.ops.node import INFINITE, UNKNOWN, Node
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

    def open(self, ctx):
        return ZipIterator(self.structure, [ctx.open(c) for c in self.children])

    def fusion_source(self, planner) -> ChunkSource:
        """The children's leaves side by side, in the order the element flattens them;
        rows end with the shortest child."""
        sources = [c.fusion_source(planner) for c in self.children]
        order = flatten(self.structure)  # child index at each leaf position
        leaves = [leaf for i in order for leaf in sources[i].leaves]
        counts = [s.rows for s in sources if s.rows not in (None, INFINITE)]
        rows = min(counts) if counts else (INFINITE if all(s.rows == INFINITE for s in sources)
                                           else None)

        def open_reader(ctx) -> SourceReader:
            readers = [s.open(ctx) for s in sources]
            return SourceReader.combine([readers[i] for i in order])

        return ChunkSource(self, leaves, rows, open_reader)


class ZipIterator:
    def __init__(self, structure, iterators):
        self.structure = structure
        self.iterators = iterators
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        values = []
        for it in self.iterators:
            try:
                values.append(next(it))
            except StopIteration:
                self.done = True
                raise
        return pack_as(self.structure, [values[i] for i in flatten(self.structure)])
