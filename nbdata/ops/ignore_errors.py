"""``ignore_errors``: drop the elements whose production raised, keep every other one."""

from __future__ import annotations

import dataclasses
import logging

from nbdata.ops.node import UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks

log = logging.getLogger("nbdata")


@dataclasses.dataclass(frozen=True, eq=False)
class IgnoreErrors(UnaryNode):
    log_warning: bool = arg_field()
    op = "ignore_errors"

    def cardinality(self) -> int:
        return UNKNOWN

    def open_chunks(self, ctx, state=None):
        return IgnoreErrorsChunks(self, ctx, state)

    def _warn(self, error: BaseException) -> None:
        if self.log_warning:
            log.warning("ignore_errors: dropped an element: %s: %s", type(error).__name__, error)


class IgnoreErrorsChunks(InputChunks):
    """Passes the input's chunks on, dropping exactly the rows whose production raised.

    A chunk is read after saving the input's state; when reading it raises, the input
    is reopened from that state and the chunk read again one row at a time, so that
    only the rows that raise are dropped (an input that raised has consumed the row
    that failed, as tf.data's iterators do, and goes on after it). Saving and reopening
    are not an element's errors: they are raised (the good rows of a failed chunk could
    not be read again).

    State: the input's state."""

    def __init__(self, node: IgnoreErrors, ctx, state):
        self.node, self.ctx = node, ctx
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.single = 0  # rows still to read one at a time after an error

    def next(self, want: int):
        while True:
            rows = 1 if self.single else want
            before = self.it.save() if rows > 1 else None
            try:
                chunk = self.it.next(rows)
            except Exception as e:  # noqa: BLE001 - dropped, as tf.data does
                if rows > 1:   # read the failed chunk again, one row at a time
                    reopened = self.ctx.open_chunks(self.node.input, before)
                    self.it.close()
                    self.it = reopened
                    self.single = rows
                    continue
                self.node._warn(e)
                self.single = max(0, self.single - 1)
                continue
            if chunk is None:
                return None
            self.single = max(0, self.single - chunk.n)
            return chunk

    def save(self) -> dict:
        return {"input": self.it.save()}
