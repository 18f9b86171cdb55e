"""Ops that carry a state from one input element to the next (``scan``, ``take_while``,
``unique``, ``group_by_window``, ``group_by_reducer``, ``rejection_resample``, ``rebatch``
with several sizes): the shared chunk iterator.

A :class:`ElementOp` node says how it starts (``start(ctx)``: its first state), what one
input element does (``step(ctx, state, element)`` -> (output elements, new state, done))
and what the end of its input does (``finish(ctx, state)`` -> output elements). States
are plain data (numbers, arrays, lists and dicts of elements), saved with the input's
position, so an iterator restores at the same element with the same state. These ops run
one element at a time in Python; ``explain()`` says so.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from nbdata.chunks import chunk_from_elements
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.ops.node import UnaryNode
from nbdata.ops.runtime import ChunkIter, RowReader


def call_user(fn, args: tuple, op: str, name: str):
    """``fn(*args)``; an exception that is not an nd error is raised as
    InvalidArgumentError naming the op, with the user's chained."""
    try:
        return fn(*args)
    except OpError:
        raise
    except Exception as e:
        raise InvalidArgumentError(f"{op}: function {name} raised {type(e).__name__}: {e}",
                                   op) from e


@dataclasses.dataclass(frozen=True, eq=False)
class ElementOp(UnaryNode):
    """A node whose output comes from a Python loop over its input's elements with a
    state carried along (see the module docstring)."""

    def start(self, ctx) -> Any:
        return None

    def step(self, ctx, state: Any, element: Any) -> tuple[list, Any, bool]:
        raise NotImplementedError

    def finish(self, ctx, state: Any) -> list:
        return []

    def per_element(self) -> str | None:
        return f"{self.op} carries a state from element to element (runs in Python)"

    def open_chunks(self, ctx, state=None):
        return ElementOpChunks(self, ctx, state)


class ElementOpChunks(ChunkIter):
    """The outputs of an :class:`ElementOp`, in chunks. State: the input's position, the
    op's state, outputs made but not handed out yet, and whether the input ended."""

    def __init__(self, node: ElementOp, ctx, state):
        self.node, self.ctx = node, ctx
        self.spec = node.spec
        self.reader = RowReader(ctx, node.input, None if state is None else state["input"],
                                ctx.max_rows(node.input.spec))
        if state is None:
            self.state = node.start(ctx)
            self.pending: list = []
            self.ended = False
        else:
            self.state = copy.deepcopy(state["op"])
            self.pending = list(state["pending"])
            self.ended = bool(state["ended"])
        self.error: BaseException | None = None

    def next(self, want: int):
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        out: list = []
        while len(out) < want:
            if self.pending:
                out.append(self.pending.pop(0))
                continue
            if self.ended:
                break
            try:
                ok, element = self.reader.next_element()
                if not ok:
                    self.ended = True
                    self.pending.extend(self.node.finish(self.ctx, self.state))
                    continue
                outs, self.state, done = self.node.step(self.ctx, self.state, element)
            except OpError as e:
                if not out:
                    raise
                self.error = e
                break
            self.pending.extend(outs)
            if done:
                self.ended = True
        if not out:
            return None
        return chunk_from_elements(out, self.spec)

    def save(self) -> dict:
        return {"input": self.reader.save(), "op": copy.deepcopy(self.state),
                "pending": list(self.pending), "ended": self.ended}

    def close(self) -> None:
        self.reader.close()
