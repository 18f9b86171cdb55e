"""``take``: the first ``count`` elements (all of them when -1)."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.ops.fusion import DROP, CounterStep
from nbdata.ops.node import INFINITE, UNKNOWN, Node, NotFusable, arg_field, input_field


@dataclasses.dataclass(frozen=True, eq=False)
class Take(Node):
    input: Node = input_field()
    count: Any = arg_field()
    op = "take"
    fusion_role = "step"

    @property
    def spec(self):
        return self.input.spec

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n == UNKNOWN or not isinstance(self.count, int):
            return UNKNOWN
        if self.count < 0:
            return n
        if n == INFINITE:
            return self.count
        return min(n, self.count)

    def is_noop(self) -> bool:
        return isinstance(self.count, int) and self.count < 0

    def fusion_steps(self, planner, chain) -> list:
        if not isinstance(self.count, int):
            raise NotFusable("take count is a placeholder")
        if self.count < 0:
            return []
        return [TakeStep(self, chain.structure, f"take({self.count})", count=self.count)]

    def open(self, ctx):
        count = int(ctx.value(self.count))
        return TakeIterator(ctx.open(self.input) if count != 0 else iter(()), count)


class TakeIterator:
    def __init__(self, source, count):
        self.source, self.remaining = source, count

    def __iter__(self):
        return self

    def __next__(self):
        if self.remaining == 0:
            raise StopIteration
        value = next(self.source)
        if self.remaining > 0:
            self.remaining -= 1
        return value


@dataclasses.dataclass
class TakeStep(CounterStep):
    """Keeps the first ``count`` rows that reach it, then ends the stage."""

    drops = True

    def emit_counter(self, em) -> None:
        em.line(f"if {em.c} >= {self.count}:")
        em.line(em.drop, 1)
        em.line("else:")
        em.line(f"{em.c} += 1", 1)
        em.after(f"if {em.c} >= {self.count}:")
        em.after("done = True", 1)

    def reference(self, element, counter):
        if counter >= self.count:
            return DROP, counter, True
        return element, counter + 1, counter + 1 >= self.count
