"""``prefetch``: produce up to ``buffer_size`` elements ahead on a background thread."""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Any

from nbdata.ops.node import AUTOTUNE, Node, arg_field, input_field
from nbdata.ops.runtime import BackgroundChunks

AUTOTUNE_BUFFER = 2


@dataclasses.dataclass(frozen=True, eq=False)
class Prefetch(Node):
    input: Node = input_field()
    buffer_size: Any = arg_field()
    op = "prefetch"

    @property
    def spec(self):
        return self.input.spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows)

    def open_chunks(self, ctx, state=None):
        """The input run on a background thread, ``buffer_size`` elements ahead (at least
        one chunk); AUTOTUNE grows the buffer while the consumer waits, within
        ``Options().autotune.ram_budget`` (default 256 MiB)."""
        size = int(ctx.value(self.buffer_size))
        if size == 0:
            return ctx.open_chunks(self.input, state)
        autotune = size == AUTOTUNE and ctx.options.autotune.enabled
        capacity = AUTOTUNE_BUFFER if size == AUTOTUNE else size
        return BackgroundChunks(ctx, lambda s: ctx.open_chunks(self.input, s), self.spec, state,
                                capacity, ctx.stats(self), self.label, autotune,
                                ctx.options.autotune.ram_budget)

    def open(self, ctx):
        size = int(ctx.value(self.buffer_size))
        if size == 0:
            return ctx.open(self.input)
        return PrefetchIterator(ctx.open(self.input), AUTOTUNE_BUFFER if size == AUTOTUNE else size)


_END = object()


class PrefetchIterator:
    """A producer thread fills a bounded queue; errors travel through the queue in order.

    The thread stops when the input ends, or soon after the iterator is dropped.
    """

    def __init__(self, source, size: int):
        self.queue: queue.Queue = queue.Queue(maxsize=size)
        self.stop = threading.Event()
        self.finished = False
        self.thread = threading.Thread(target=_produce, args=(source, self.queue, self.stop),
                                       name="nbdata-prefetch", daemon=True)
        self.thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self.finished:
            raise StopIteration
        kind, value = self.queue.get()
        if kind is _END:
            self.finished = True
            raise StopIteration
        if kind == "error":
            raise value
        return value

    def __del__(self):
        self.stop.set()


def _put(q: queue.Queue, item, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _produce(source, q: queue.Queue, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            item = ("value", next(source))
        except StopIteration:
            _put(q, (_END, None), stop)
            return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            item = ("error", e)
        if not _put(q, item, stop):
            return
