"""``unique``: each distinct element once, at its first occurrence.

Not fused: whether a row is new depends on every row before it (a set carried along the
stream, which the parallel fused kernels do not keep), so elements are checked one at a
time in Python against a set of the ones seen. The set is part of the saved state.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.ops.node import UNKNOWN
from nbdata.ops.stateful import ElementOp


def unique_key(element):
    """A hashable, saveable key of an int32/int64/string element (its shape and bytes)."""
    if isinstance(element, bytes):
        return element
    a = np.asarray(element)
    if a.dtype == object:
        return repr([bytes(v) for v in a.reshape(-1)] + [a.shape])
    return repr(a.shape) + ":" + a.tobytes().hex()


@dataclasses.dataclass(frozen=True, eq=False)
class Unique(ElementOp):
    op = "unique"

    def cardinality(self) -> int:
        n = self.input.cardinality()
        return n if n == 0 else UNKNOWN

    def start(self, ctx):
        return {}

    def step(self, ctx, state, element):
        key = unique_key(element)
        if key in state:
            return [], state, False
        state[key] = True
        return [element], state, False
