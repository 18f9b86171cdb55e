"""``from_tensors``: a dataset of exactly one element (repeated forever: a constant source)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numba
import numpy as np

from nbdata import state_check
from nbdata.chunks import chunk_from_elements
from nbdata.ops.fusion import ChunkSource, SourceLeaf, SourceReader, numba_dtype
from nbdata.ops.runtime import ChunkIter
from nbdata.ops.node import INFINITE, Node, NotFusable
from nbdata.trace.placeholder import Placeholder
from nbdata.spec import TensorSpec, flatten, pack_as, spec_of_value, string


def leaf_spec(leaf):
    """Spec of a source leaf, which may be a placeholder."""
    return leaf.spec if isinstance(leaf, Placeholder) else spec_of_value(leaf)


def resolve_structure(value: Any, ctx) -> Any:
    """Replace placeholders in a source structure by their fed values."""
    leaves = flatten(value)
    resolved = [ctx.value(v) for v in leaves]
    if all(a is b for a, b in zip(leaves, resolved)):
        return value
    return pack_as(value, resolved)


class ConstantLeaf(SourceLeaf):
    """The same value at every row (``from_tensors(x).repeat()``)."""

    def emit_load(self, row, args):
        return row.read(self.spec, args[0])


@dataclasses.dataclass(frozen=True, eq=False)
class FromTensors(Node):
    """Yields ``value`` once."""

    value: Any
    op = "from_tensors"

    @property
    def spec(self):
        return pack_as(self.value, [leaf_spec(v) for v in flatten(self.value)])

    def cardinality(self) -> int:
        return 1

    def open_chunks(self, ctx, state=None):
        return TensorChunks(self, ctx, state)

    def random_access(self) -> str | None:
        return None

    def gather(self, ctx, rows):
        value = resolve_structure(self.value, ctx)
        return chunk_from_elements([value] * len(rows), self.spec)

    def repeated_source(self, planner) -> ChunkSource:
        """This element at every row, endlessly (the source of ``repeat()``)."""
        leaves = []
        for v in flatten(self.value):
            if isinstance(v, Placeholder):
                raise NotFusable("the repeated tensor is a placeholder")
            spec = spec_of_value(v)
            if spec.dtype is string:
                raise NotFusable("the repeated tensor is a string (strings run in Python)")
            numba_dtype(spec.dtype, "the repeated tensor")
            leaves.append(ConstantLeaf(TensorSpec(np.shape(v), v.dtype), numba.typeof(v)))

        def open_reader(ctx) -> SourceReader:
            values = flatten(self.value)
            return SourceReader(None, list(values), lambda lo, k: list(values),
                                lambda r: list(values))

        return ChunkSource(self, leaves, INFINITE, open_reader)


class TensorChunks(ChunkIter):
    """The one element as a chunk of one row. State: whether it was handed out."""

    def __init__(self, node: FromTensors, ctx, state):
        self.value = resolve_structure(node.value, ctx)
        self.spec = node.spec
        self.done = False if state is None else state_check.flag(state, "done")

    def next(self, want: int):
        if self.done:
            return None
        self.done = True
        return chunk_from_elements([self.value], self.spec)

    def save(self) -> dict:
        return {"done": self.done}
