"""``assert_cardinality``: the input's elements, checked to number exactly ``count``."""

from __future__ import annotations

import dataclasses

from nbdata.errors import FailedPreconditionError
from nbdata.ops.node import INFINITE, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


@dataclasses.dataclass(frozen=True, eq=False)
class AssertCardinality(UnaryNode):
    """``cardinality()`` is ``count``; iterating raises FailedPreconditionError (TF's
    words) when the input yields element ``count + 1`` or ends before ``count``
    elements (``count`` INFINITE: whenever it ends)."""

    count: int = arg_field()
    op = "assert_cardinality"

    def cardinality(self) -> int:
        return self.count

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        """Rows at positions ``rows``; a position past the input's real length (the
        asserted count is larger) is the FailedPreconditionError iteration would give."""
        n = self.input.cardinality()
        if n >= 0 and len(rows) and int(max(rows)) >= n:
            raise FailedPreconditionError(
                f"Input dataset was expected to contain {_elements(self.count)} but "
                f"contained only {_elements(n)}.", "assert_cardinality")
        return self.input.gather(ctx, rows)

    def open_chunks(self, ctx, state=None):
        seen = 0 if state is None else int(state["seen"])
        return AssertCardinalityChunks(
            ctx.open_chunks(self.input, None if state is None else state["input"]),
            self.count, seen)


class AssertCardinalityChunks(InputChunks):
    """The input's rows, counted. State: rows passed on, the input's state."""

    def __init__(self, it, count: int, seen: int):
        self.it, self.count, self.seen = it, count, seen

    def next(self, want: int):
        if self.count >= 0:  # never more rows than asserted: one more is the error
            want = max(1, min(want, self.count - self.seen))
        chunk = self.it.next(want)
        if chunk is None:
            if self.count == INFINITE:
                raise FailedPreconditionError(
                    "Input dataset was expected to contain an infinite number of elements "
                    f"but contained only {_elements(self.seen)}.", "assert_cardinality")
            if self.seen < self.count:
                raise FailedPreconditionError(
                    f"Input dataset was expected to contain {_elements(self.count)} but "
                    f"contained only {_elements(self.seen)}.", "assert_cardinality")
            return None
        if self.count >= 0 and self.seen + chunk.n > self.count:
            raise FailedPreconditionError(
                f"Input dataset was expected to contain {_elements(self.count)} but "
                f"contained at least {_elements(self.count + 1)}.", "assert_cardinality")
        self.seen += chunk.n
        return chunk

    def save(self) -> dict:
        return {"seen": self.seen, "input": self.it.save()}
