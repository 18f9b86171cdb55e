"""``ignore_errors``: drop the elements whose production raised, keep every other one."""

from __future__ import annotations

import dataclasses
import logging

from nbdata.ops.node import Node, arg_field, input_field
from nbdata.ops.runtime import ChunkIter

log = logging.getLogger("nbdata")


@dataclasses.dataclass(frozen=True, eq=False)
class IgnoreErrors(Node):
    input: Node = input_field()
    log_warning: bool = arg_field()
    op = "ignore_errors"

    @property
    def spec(self):
        return self.input.spec

    def open_chunks(self, ctx, state=None):
        return IgnoreErrorsChunks(self, ctx, state)

    def _warn(self, error: BaseException) -> None:
        if self.log_warning:
            log.warning("ignore_errors: dropped an element: %s: %s", type(error).__name__, error)


class IgnoreErrorsChunks(ChunkIter):
    """Passes the input's chunks on. When reading a chunk raises, the input is reopened
    from its state before that chunk and read one row at a time, so that only the rows
    whose production raised are dropped (an input that raised has consumed the row
    that failed, as tf.data's iterators do, and goes on after it).

    State: the input's state."""

    def __init__(self, node: IgnoreErrors, ctx, state):
        self.node, self.ctx = node, ctx
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.single = 0  # rows still to read one at a time after an error

    def next(self, want: int):
        while True:
            before = None
            if not self.single:
                try:
                    before = self.it.save()
                except Exception:  # noqa: BLE001 - an input that cannot say where it is
                    before = None
            try:
                chunk = self.it.next(1 if self.single else want)
            except Exception as e:  # noqa: BLE001 - dropped, as tf.data does
                if before is not None:
                    # Read the failed chunk again, one row at a time, to keep its good rows.
                    try:
                        reopened = self.ctx.open_chunks(self.node.input, before)
                    except Exception:  # noqa: BLE001
                        reopened = None
                    if reopened is not None:
                        self.it.close()
                        self.it = reopened
                        self.single = max(1, want)
                        continue
                self.node._warn(e)
                self.single = max(0, self.single - 1)
                continue
            if chunk is None:
                return None
            if self.single:
                self.single = max(0, self.single - chunk.n)
            return chunk

    def save(self) -> dict:
        return {"input": self.it.save()}

    def close(self) -> None:
        self.it.close()
