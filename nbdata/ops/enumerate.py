"""``enumerate``: pair each element with its int64 position, counting from ``start``."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk
from nbdata.ops.fusion import CounterStep
from nbdata.ops.runtime import InputChunks
from nbdata.ops.node import UnaryNode, arg_field
from nbdata.spec import TensorSpec


@dataclasses.dataclass(frozen=True, eq=False)
class Enumerate(UnaryNode):
    start: int = arg_field()
    op = "enumerate"
    fusion_role = "step"

    @property
    def spec(self):
        return (TensorSpec((), np.int64), self.input.spec)

    def fusion_steps(self, planner, chain) -> list:
        return [EnumerateStep(self, (TensorSpec((), np.int64), chain.structure),
                              f"enumerate({self.start})", initial=self.start)]

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        chunk = self.input.gather(ctx, rows)
        return Chunk([np.asarray(rows, np.int64) + self.start] + chunk.columns, chunk.n)

    def open_chunks(self, ctx, state=None):
        return EnumerateChunks(ctx.open_chunks(self.input, None if state is None else state["input"]),
                               self.start if state is None else state_check.integer(
                                   state, "next", self.start, self.start + state_check.most_rows(
                                       self.input)))


@dataclasses.dataclass
class EnumerateStep(CounterStep):
    """Puts each row's position (counting from ``start``) in front of the element."""

    index_spec = TensorSpec((), np.int64)

    def emit_counter(self, em) -> None:
        em.line(f"{em.index}[i] = {em.c}")
        em.line(f"{em.c} += 1")

    def reference(self, element, counter):
        return (np.int64(counter), element), counter + 1, False


class EnumerateChunks(InputChunks):
    """Puts an int64 index column in front of each chunk. State: the next index."""

    def __init__(self, it, start: int):
        self.it, self.index = it, start

    def next(self, want: int):
        chunk = self.it.next(want)
        if chunk is None:
            return None
        index = np.arange(self.index, self.index + chunk.n, dtype=np.int64)
        self.index += chunk.n
        return Chunk([index] + chunk.columns, chunk.n)

    def save(self) -> dict:
        return {"next": self.index, "input": self.it.save()}
