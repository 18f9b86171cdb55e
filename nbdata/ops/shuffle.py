"""``shuffle``: tf.data's buffer shuffle driven by counter-based random numbers."""

from __future__ import annotations

import dataclasses
import itertools
import secrets
import threading
from typing import Any

from nbdata import random as nd_random
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import Node, arg_field, input_field, new_resource_key

RANDOM_BLOCK = 1024
SHUFFLE_STREAM = 0x5348554646  # "SHUFF": keeps shuffle draws apart from other ops' streams


class EpochCounter:
    """Hands out the epoch number of each new iteration (a shuffle's run-state resource)."""

    def __init__(self, reshuffle: bool):
        self.reshuffle = reshuffle
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next_epoch(self) -> int:
        if not self.reshuffle:
            return 0
        with self._lock:
            return next(self._counter)


@dataclasses.dataclass(frozen=True, eq=False)
class Shuffle(Node):
    """Fills a buffer of ``buffer_size`` elements, then repeatedly outputs a random
    buffer slot and refills it with the next input element. Draw ``k`` of epoch ``e``
    picks slot ``(bits(key(seed, SHUFFLE_STREAM, e), k) * len(buffer)) >> 64``."""

    input: Node = input_field()
    buffer_size: Any = arg_field()
    seed: int = arg_field()
    reshuffle_each_iteration: bool = arg_field()
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "shuffle"

    @property
    def spec(self):
        return self.input.spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def open(self, ctx):
        size = int(ctx.value(self.buffer_size))
        if size <= 0:
            raise InvalidArgumentError(f"shuffle: buffer_size must be positive, got {size}", self.op)
        epochs = ctx.resource(self.resource_key, lambda: EpochCounter(self.reshuffle_each_iteration))
        key = nd_random.key(self.seed, SHUFFLE_STREAM, epochs.next_epoch())
        return ShuffleIterator(ctx.open(self.input), size, key)


def random_seed() -> int:
    return secrets.randbits(63)


class ShuffleIterator:
    def __init__(self, source, size, key):
        self.source, self.size, self.key = source, size, key
        self.buffer: list = []
        self.draws = 0
        self.block: list = []
        self.block_start = 0
        self.exhausted = False

    def __iter__(self):
        return self

    def _draw(self, n: int) -> int:
        """Slot of draw ``k``: ``(bits(key, k) * n) >> 64``, bits made a block at a time."""
        k = self.draws
        self.draws = k + 1
        offset = k - self.block_start
        if offset >= len(self.block):
            self.block_start, offset = k, 0
            self.block = nd_random.bits_block(self.key, k, RANDOM_BLOCK).tolist()
        return (self.block[offset] * n) >> 64

    def _pull(self):
        try:
            return next(self.source), True
        except StopIteration:
            self.exhausted = True
            return None, False

    def __next__(self):
        while not self.exhausted and len(self.buffer) < self.size:
            element, ok = self._pull()
            if ok:
                self.buffer.append(element)
        if not self.buffer:
            raise StopIteration
        j = self._draw(len(self.buffer))
        chosen = self.buffer[j]
        if not self.exhausted:
            element, ok = self._pull()
            if ok:
                self.buffer[j] = element
                return chosen
        self.buffer[j] = self.buffer[-1]
        self.buffer.pop()
        return chosen
