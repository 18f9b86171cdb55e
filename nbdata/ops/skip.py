"""``skip``: drop the first ``count`` elements (all of them when -1)."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata import state_check
from nbdata.ops.fusion import DROP, CounterStep
from nbdata.ops.node import INFINITE, UNKNOWN, NotFusable, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks

SKIP_ALL = 1 << 62  # skip(-1) as a count no row number reaches


@dataclasses.dataclass(frozen=True, eq=False)
class Skip(UnaryNode):
    count: Any = arg_field()
    op = "skip"
    fusion_role = "step"

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n in (INFINITE, UNKNOWN) or not isinstance(self.count, int):
            return n if n in (INFINITE, UNKNOWN) else UNKNOWN
        if self.count < 0:
            return 0
        return max(0, n - self.count)

    def random_access(self) -> str | None:
        if not isinstance(self.count, int):
            return "skip with a placeholder count"
        return self.input.random_access()

    def global_shuffle_refusal(self) -> str | None:
        # TF: `at` on skip(-1) is simply empty, but a global shuffle refuses a negative
        # skip count (FailedPreconditionError).
        if isinstance(self.count, int) and self.count < 0:
            return f"skip({self.count}) with a negative count"
        return None

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows + max(0, self.count))

    def is_noop(self) -> bool:
        return isinstance(self.count, int) and self.count == 0

    def fusion_steps(self, planner, chain) -> list:
        if not isinstance(self.count, int):
            raise NotFusable("skip count is a placeholder")
        count = SKIP_ALL if self.count < 0 else self.count
        return [SkipStep(self, chain.structure, f"skip({self.count})", count=count)]

    def open_chunks(self, ctx, state=None):
        count = int(ctx.value(self.count))
        if state is None:
            left = count
        elif count >= 0:   # rows still to drop: at most the count
            left = state_check.integer(state, "left", 0, count)
        else:              # skip(-1) drops everything
            left = state_check.integer(state, "left", count, -1)
        return SkipChunks(ctx.open_chunks(self.input, None if state is None else
                                          state_check.nested(state, "input", False)),
                          left, ctx.max_rows(self.spec))


@dataclasses.dataclass
class SkipStep(CounterStep):
    """Drops the first ``count`` rows that reach it."""

    drops = True

    def emit_counter(self, em) -> None:
        em.line(f"if {em.c} < {self.count}:")
        em.line(em.drop, 1)
        em.line(f"{em.c} += 1", 1)

    def reference(self, element, counter):
        if counter < self.count:
            return DROP, counter + 1, False
        return element, counter, False


class SkipChunks(InputChunks):
    """Drops ``left`` rows (-1: all), then passes chunks through. State: rows still to
    drop, the input's state."""

    def __init__(self, it, left: int, limit: int):
        self.it, self.left, self.limit = it, left, limit

    def next(self, want: int):
        while self.left != 0:
            chunk = self.it.next(self.limit if self.left < 0 else min(self.limit, self.left + want))
            if chunk is None:   # skip(-1) stays dropping: its state never yields rows
                self.left = min(self.left, 0)
                return None
            if 0 < self.left < chunk.n:
                chunk = chunk.slice(self.left, chunk.n)
                self.left = 0
                return chunk
            if self.left > 0:
                self.left -= chunk.n
        return self.it.next(want)

    def save(self) -> dict:
        return {"left": self.left, "input": self.it.save()}
