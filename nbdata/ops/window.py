"""``window``: group elements into windows, each a (nested structure of) datasets."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from nbdata.errors import OpError
from nbdata import state_check
from nbdata.chunks import Chunk, RowList, chunk_from_elements
from nbdata.ops.node import INFINITE, UNKNOWN, Node, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter, PositionChunks, RowReader
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

    def open_chunks(self, ctx, state=None):
        return ListChunks(self, 0 if state is None else state_check.integer(state, "pos"))


@dataclasses.dataclass(frozen=True, eq=False)
class Window(UnaryNode):
    """Window ``k`` holds input elements ``k*shift + j*stride`` for ``j < size``."""

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

    def open_chunks(self, ctx, state=None):
        return WindowChunks(self, ctx, state)

    def per_element(self) -> str | None:
        return "makes datasets of each window's elements"


class Windows:
    """The window algorithm over elements read one at a time: ``read()`` returns
    (ok, tag, element), the tag of an element (the chunk path keeps the input's state
    before it) staying with it in the buffer."""

    def __init__(self, node: Window, read, buffer_start: int = 0, window_start: int = 0):
        self.node, self.read = node, read
        self.buffer: collections.deque = collections.deque()   # (tag, element)
        self.buffer_start = buffer_start   # input position of buffer[0]
        self.window_start = window_start
        self.exhausted = False

    def fill(self, count: int) -> None:
        """Read ``count`` elements into the buffer (restoring a saved buffer)."""
        for _ in range(count):
            ok, tag, element = self.read()
            if not ok:
                self.exhausted = True
                return
            self.buffer.append((tag, element))

    def members(self) -> list | None:
        """The elements of the next window, or None when there is none."""
        node = self.node
        start = self.window_start
        last = start + (node.size - 1) * node.stride
        while self.buffer and self.buffer_start < start:
            self.buffer.popleft()
            self.buffer_start += 1
        while not self.exhausted and self.buffer_start + len(self.buffer) <= last:
            ok, tag, element = self.read()
            if not ok:
                self.exhausted = True
                break
            if self.buffer_start < start:  # the shift is larger than the window: skip
                self.buffer_start += 1
            else:
                self.buffer.append((tag, element))
        if self.buffer_start < start:
            return None
        available = self.buffer_start + len(self.buffer)
        members = [self.buffer[p - start][1] for p in range(start, min(last + 1, available), node.stride)]
        if not members or (node.drop_remainder and len(members) < node.size):
            return None
        self.window_start = start + node.shift
        failed = next((m for m in members if isinstance(m, FailedElement)), None)
        if failed is not None:   # tf.data: an element's error surfaces with its window
            raise failed.error
        return members


class FailedElement:
    """An input element whose production raised ``error``: as in tf.data, the error
    counts only for a window that holds it (stride and shift may skip it)."""

    def __init__(self, error: BaseException):
        self.error = error


def window_datasets(ctx, node: Window, members: list) -> list:
    """One dataset per component of the element, holding the members' values."""
    specs = flatten(node.input.spec)
    columns = list(zip(*(flatten(m) for m in members)))
    return [ctx.make_dataset(ListSource(tuple(col), s)) for col, s in zip(columns, specs)]


class ListChunks(PositionChunks):
    """The values of a window component. State: the next position."""

    def __init__(self, node: ListSource, pos: int):
        super().__init__(len(node.values), pos)
        self.node = node

    def rows(self, lo: int, hi: int) -> Chunk:
        return chunk_from_elements(list(self.node.values[lo:hi]), self.node.leaf_spec)


class WindowChunks(ChunkIter):
    """Windows as chunks whose columns hold datasets (one per component).

    State: the input's state before the first buffered element, the buffer's length
    and the window position; restoring reads the buffered elements again.
    """

    def __init__(self, node: Window, ctx, state):
        self.node, self.ctx = node, ctx
        self.width = len(flatten(node.input.spec))
        start = None if state is None else state_check.nested(state, "input")
        # Window k starts at input position k * shift: the buffer starts at most one
        # shift before the next window and holds at most one window's span.
        span = (node.size - 1) * node.stride + 1
        buffer_start = 0 if state is None else state_check.integer(
            state, "buffer_start", 0, state_check.most_rows(node.input))
        window_start = 0 if state is None else state_check.integer(
            state, "window_start", buffer_start, buffer_start + max(node.shift, span))
        buffered = 0 if state is None else state_check.integer(state, "buffered", 0, span)
        self.reader = RowReader(ctx, node.input, start, ctx.max_rows(node.input.spec))

        def read():
            before = self.reader.save()
            try:
                ok, element = self.reader.next_element()
            except OpError as e:   # kept in its place: an error only if a window holds it
                return True, before, FailedElement(e)
            return ok, before, element

        self.windows = Windows(node, read, buffer_start, window_start)
        self.windows.fill(buffered)

    def next(self, want: int):
        windows = []
        while len(windows) < want:
            members = self.windows.members()
            if members is None:
                break
            windows.append(window_datasets(self.ctx, self.node, members))
        if not windows:
            return None
        return Chunk([RowList(w[k] for w in windows) for k in range(self.width)], len(windows))

    def save(self) -> dict:
        w = self.windows
        before = w.buffer[0][0] if w.buffer else self.reader.save()
        return {"input": before, "buffered": len(w.buffer), "buffer_start": w.buffer_start,
                "window_start": w.window_start}

    def close(self) -> None:
        self.reader.close()
