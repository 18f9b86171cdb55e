"""``take_while``: the elements before the first one for which a predicate is False.

Not fused: the stage stops at the first False (a sequential cut the fused kernels have
no step for), so the predicate runs once per element in Python, up to and including
that element; the input is not read past it.
"""

from __future__ import annotations

import dataclasses

from nbdata.ops.filter import keep
from nbdata.ops.function import UserFunction
from nbdata.ops.node import INFINITE, UNKNOWN, arg_field
from nbdata.ops.stateful import ElementOp


@dataclasses.dataclass(frozen=True, eq=False)
class TakeWhile(ElementOp):
    predicate: UserFunction = arg_field()
    op = "take_while"

    def cardinality(self) -> int:
        return 0 if self.input.cardinality() == 0 else UNKNOWN

    def step(self, ctx, state, element):
        if keep(self.predicate, element, self.op):
            return [element], state, False
        return [], state, True
