"""``batch``: stack consecutive elements along a new leading dimension."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.errors import InvalidArgumentError
from nbdata.ops.fusion import Terminal, check_structure
from nbdata.ops.node import INFINITE, UNKNOWN, Node, arg_field, input_field
from nbdata.spec import DatasetSpec, TensorSpec, flatten, pack_as


def batched_spec(spec: Any, batch_dim: int | None, op: str) -> Any:
    def leaf(s):
        if isinstance(s, DatasetSpec):
            raise TypeError(f"{op}: cannot batch elements that are datasets; flat_map them first")
        return TensorSpec(None if s.shape is None else (batch_dim,) + s.shape, s.dtype)
    return pack_as(spec, [leaf(s) for s in flatten(spec)])


def batch_cardinality(n: int, batch_size: Any, drop_remainder: bool) -> int:
    if n in (INFINITE, UNKNOWN) or not isinstance(batch_size, (int, np.integer)):
        return n if n in (INFINITE, UNKNOWN) else UNKNOWN
    return n // batch_size if drop_remainder else -(-n // batch_size)


def stack_leaves(values: list, component: int, op: str) -> np.ndarray:
    """Stack one component of several elements; shapes must agree."""
    first = values[0]
    if isinstance(first, bytes) or (isinstance(first, np.ndarray) and first.dtype == object):
        shape0 = np.shape(first) if isinstance(first, np.ndarray) else ()
        for j, v in enumerate(values):
            shape = np.shape(v) if isinstance(v, np.ndarray) else ()
            if shape != shape0:
                raise_shape_mismatch(op, component, shape0, j, shape)
        out = np.empty((len(values),) + shape0, dtype=object)
        for j, v in enumerate(values):
            out[j] = v
        return out
    shape0 = np.shape(first)
    for j, v in enumerate(values):
        if np.shape(v) != shape0:
            raise_shape_mismatch(op, component, shape0, j, np.shape(v))
    return np.stack(values)


def raise_shape_mismatch(op, component, shape0, j, shape):
    raise InvalidArgumentError(
        f"{op}: cannot batch tensors with different shapes in component {component}: the first "
        f"element had shape {list(shape0)} and element {j} had shape {list(shape)}; use "
        f"padded_batch to pad them to a common shape", op)


def stack_elements(elements: list, op: str) -> Any:
    columns = list(zip(*(flatten(e) for e in elements)))
    return pack_as(elements[0], [stack_leaves(list(col), k, op) for k, col in enumerate(columns)])


@dataclasses.dataclass(frozen=True, eq=False)
class Batch(Node):
    input: Node = input_field()
    batch_size: Any = arg_field()
    drop_remainder: bool = arg_field()
    op = "batch"
    fusion_role = "terminal"

    @property
    def spec(self):
        dim = self.batch_size if self.drop_remainder and isinstance(self.batch_size, int) else None
        return batched_spec(self.input.spec, dim, self.op)

    def cardinality(self) -> int:
        return batch_cardinality(self.input.cardinality(), self.batch_size, self.drop_remainder)

    def fusion_terminal(self, planner, structure) -> Terminal:
        check_structure(structure, f"{self.op} input")
        return Terminal(self, self.batch_size, self.drop_remainder)

    def open(self, ctx):
        size = int(ctx.value(self.batch_size))
        if size <= 0:
            raise InvalidArgumentError(f"batch: batch_size must be positive, got {size}", self.op)
        return BatchIterator(ctx.open(self.input), size, self.drop_remainder,
                             lambda els: stack_elements(els, self.op))


class BatchIterator:
    """Collects ``size`` elements and hands them to ``combine``; shared by padded_batch."""

    def __init__(self, source, size, drop_remainder, combine):
        self.source, self.size = source, size
        self.drop_remainder = drop_remainder
        self.combine = combine
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        elements = []
        while len(elements) < self.size:
            try:
                elements.append(next(self.source))
            except StopIteration:
                self.done = True
                break
        if not elements or (self.drop_remainder and len(elements) < self.size):
            self.done = True
            raise StopIteration
        return self.combine(elements)
