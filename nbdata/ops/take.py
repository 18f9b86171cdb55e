"""``take``: the first ``count`` elements (all of them when -1)."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata import state_check
from nbdata.ops.fusion import DROP, CounterStep
from nbdata.ops.node import INFINITE, UNKNOWN, NotFusable, UnaryNode, arg_field
from nbdata.ops.runtime import EmptyChunks, InputChunks


@dataclasses.dataclass(frozen=True, eq=False)
class Take(UnaryNode):
    count: Any = arg_field()
    op = "take"
    fusion_role = "step"

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n == UNKNOWN or not isinstance(self.count, int):
            return UNKNOWN
        # TF's rule, also for a negative count other than -1 (which takes everything,
        # but whose cardinality TF gives as min(n, count)).
        if n == INFINITE:
            return self.count
        if self.count == -1:
            return n
        return min(n, self.count)

    def random_access(self) -> str | None:
        if not isinstance(self.count, int):
            return "take with a placeholder count"
        return self.input.random_access()

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows)

    def is_noop(self) -> bool:
        return isinstance(self.count, int) and self.count < 0

    def fusion_steps(self, planner, chain) -> list:
        if not isinstance(self.count, int):
            raise NotFusable("take count is a placeholder")
        if self.count < 0:
            return []
        return [TakeStep(self, chain.structure, f"take({self.count})", count=self.count)]

    def open_chunks(self, ctx, state=None):
        count = int(ctx.value(self.count))
        if state is None:
            left = count
        elif count >= 0:   # rows still to take: at most the count
            left = state_check.integer(state, "left", 0, count)
        else:              # take(-1) and other negative counts take everything
            left = state_check.integer(state, "left", count, -1)
        if left == 0:
            return TakenAll()
        return TakeChunks(ctx.open_chunks(self.input, None if state is None else
                                          state_check.nested(state, "input", False)), left)


class TakenAll(EmptyChunks):
    """A take with nothing left to take (its input is not opened). State: ``left`` 0."""

    def save(self) -> dict:
        return {"left": 0, "input": None}


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


class TakeChunks(InputChunks):
    """At most ``left`` more rows (-1: all). State: rows still to take, the input's state."""

    def __init__(self, it, left: int):
        self.it, self.left = it, left

    def next(self, want: int):
        if self.left == 0:
            return None
        chunk = self.it.next(want if self.left < 0 else min(want, self.left))
        if chunk is None:
            self.left = 0
            return None
        if 0 < self.left < chunk.n:
            chunk = chunk.slice(0, self.left)
        if self.left > 0:
            self.left -= chunk.n
            if self.left == 0:
                self.it.close()
        return chunk

    def save(self) -> dict:
        return {"left": self.left, "input": self.it.save()}
