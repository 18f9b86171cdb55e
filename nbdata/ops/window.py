"""``window``: group elements into windows, each a (nested structure of) datasets."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from nbdata.ops.node import INFINITE, UNKNOWN, Node, arg_field, input_field
from nbdata.spec import DatasetSpec, flatten, pack_as


@dataclasses.dataclass(frozen=True, eq=False)
class ListSource(Node):
    """The elements of one window component (a plain list of leaf values)."""

    values: tuple
    leaf_spec: Any
    op = "window_component"

    @property
    def spec(self):
        return self.leaf_spec

    def cardinality(self) -> int:
        return len(self.values)

    def open(self, ctx):
        return iter(self.values)


@dataclasses.dataclass(frozen=True, eq=False)
class Window(Node):
    """Window ``k`` holds input elements ``k*shift + j*stride`` for ``j < size``."""

    input: Node = input_field()
    size: int = arg_field()
    shift: int = arg_field()
    stride: int = arg_field()
    drop_remainder: bool = arg_field()
    op = "window"

    @property
    def spec(self):
        return pack_as(self.input.spec, [DatasetSpec(s) for s in flatten(self.input.spec)])

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n in (INFINITE, UNKNOWN):
            return n
        if self.drop_remainder:
            rest = n - ((self.size - 1) * self.stride + 1)
            return 0 if rest < 0 else rest // self.shift + 1
        return n // self.shift + (0 if n % self.shift == 0 else 1)

    def open(self, ctx):
        return WindowIterator(self, ctx, ctx.open(self.input))


class WindowIterator:
    def __init__(self, node: Window, ctx, source):
        self.node, self.ctx, self.source = node, ctx, source
        self.buffer: collections.deque = collections.deque()
        self.buffer_start = 0  # input position of buffer[0]
        self.window_start = 0
        self.exhausted = False

    def __iter__(self):
        return self

    def __next__(self):
        node = self.node
        start = self.window_start
        last = start + (node.size - 1) * node.stride
        while self.buffer and self.buffer_start < start:
            self.buffer.popleft()
            self.buffer_start += 1
        while not self.exhausted and self.buffer_start + len(self.buffer) <= last:
            try:
                value = next(self.source)
            except StopIteration:
                self.exhausted = True
                break
            if self.buffer_start < start:  # the shift is larger than the window: skip
                self.buffer_start += 1
            else:
                self.buffer.append(value)
        if self.buffer_start < start:
            raise StopIteration
        available = self.buffer_start + len(self.buffer)
        members = [self.buffer[p - start] for p in range(start, min(last + 1, available), node.stride)]
        if not members or (node.drop_remainder and len(members) < node.size):
            raise StopIteration
        self.window_start = start + node.shift
        specs = flatten(node.input.spec)
        columns = list(zip(*(flatten(m) for m in members)))
        datasets = [self.ctx.make_dataset(ListSource(tuple(col), s)) for col, s in zip(columns, specs)]
        return pack_as(node.input.spec, datasets)
