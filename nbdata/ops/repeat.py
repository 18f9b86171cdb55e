"""``repeat``: iterate the input ``count`` times (forever when None or -1)."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.ops.node import INFINITE, UNKNOWN, Node, NotFusable, arg_field, input_field


@dataclasses.dataclass(frozen=True, eq=False)
class Repeat(Node):
    input: Node = input_field()
    count: Any = arg_field()
    op = "repeat"
    fusion_role = "source"

    @property
    def spec(self):
        return self.input.spec

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

    def open(self, ctx):
        return RepeatIterator(ctx, self.input, int(ctx.value(self.count)))

    def is_noop(self) -> bool:
        return isinstance(self.count, int) and self.count == 1

    def fusion_source(self, planner):
        """An endless repeat of a node that can repeat as a chunk source (from_tensors)."""
        if self.count != -1:
            raise NotFusable(f"repeat({self.count}) is not a chunk source (an endless repeat "
                             "of from_tensors is)")
        return self.input.repeated_source(planner)


class RepeatIterator:
    """Reopens the input for each epoch; an epoch that yields nothing ends a forever-repeat."""

    def __init__(self, ctx, input_node, count):
        self.ctx, self.input_node, self.count = ctx, input_node, count
        self.epoch = 0
        self.it = ctx.open(input_node) if count != 0 else None
        self.yielded_this_epoch = False

    def __iter__(self):
        return self

    def __next__(self):
        while self.it is not None:
            try:
                value = next(self.it)
                self.yielded_this_epoch = True
                return value
            except StopIteration:
                self.epoch += 1
                if (0 <= self.count <= self.epoch) or (self.count < 0 and not self.yielded_this_epoch):
                    self.it = None
                    break
                self.yielded_this_epoch = False
                self.it = self.ctx.open(self.input_node)
        raise StopIteration
