"""``random_map``: a map whose function also gets a counter-based random generator."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata import state_check
from nbdata.chunks import chunk_from_elements
from nbdata.ops.function import UserFunction
from nbdata.trace.abstract import call_unpacked, canonical_output, conform
from nbdata.ops.node import UnaryNode, arg_field, new_resource_key
from nbdata.ops.runtime import InputChunks, PerElement

RANDOM_MAP_STREAM = 0x524D4150  # "RMAP": keeps these draws apart from other ops' streams


def with_generator(fn, element, generator) -> Any:
    """``fn(*element, generator)`` for tuple elements, ``fn(element, generator)`` else."""
    if isinstance(element, tuple):
        return fn(*element, generator)
    return fn(element, generator)


@dataclasses.dataclass(frozen=True, eq=False)
class RandomMap(UnaryNode):
    """Calls ``fn(*element, rng)`` with ``rng`` a :class:`nbdata.random.Generator` keyed on
    (seed, this op, epoch, element index): the same values at any thread count, fused or
    not, and after an iterator restore. ``traced`` is the function as traced for its
    output spec (with a fixed generator)."""

    fn: Any = arg_field()
    traced: UserFunction = None
    seed: Any = arg_field(None)
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "random_map"
    seeded = True

    @property
    def spec(self):
        return self.traced.output_spec

    def describe(self) -> str:
        return f"{self.label}(fn={self.traced.name}, seed={self.seed!r})"

    def _key(self, ctx, epoch: int | None = None) -> tuple[int, int]:
        if epoch is None:
            epoch = ctx.epoch(self, True)
        return epoch, int(nd_random.key(ctx.op_seed(self), RANDOM_MAP_STREAM, epoch))

    def _call(self, fn, key: int):
        spec, label, name = self.spec, self.traced.op, self.traced.name

        key = np.uint64(key)

        def call(element, index):
            generator = nd_random.Generator(key, np.uint64(index))
            try:
                out = with_generator(fn, element, generator)
            except Exception as e:  # noqa: BLE001 - reported naming the op, as map does
                from nbdata.errors import InvalidArgumentError, OpError
                if isinstance(e, OpError):
                    raise
                raise InvalidArgumentError(f"{label}: function {name} raised "
                                           f"{type(e).__name__}: {e}", label) from e
            return conform(canonical_output(out, label, name), spec, label, name)
        return call

    def per_element(self) -> str | None:
        return f"calls {self.traced.name} with a generator for each element"

    def open_chunks(self, ctx, state=None):
        epoch, key = self._key(ctx, None if state is None else state_check.integer(state, "epoch", 0, state_check.MAX_EPOCH))
        spec = self.spec
        it = PerElement(ctx, self, None if state is None else state["run"],
                        self._call(self.fn, key), lambda rows, values: chunk_from_elements(values, spec),
                        1, True, ctx.stats(self), indexed=True)
        return _EpochState(it, epoch)


class _EpochState(InputChunks):
    """A chunk iterator whose state also records the epoch its randomness is keyed on."""

    def __init__(self, it, epoch: int):
        self.it, self.epoch = it, epoch

    def next(self, want: int):
        return self.it.next(want)

    def save(self) -> dict:
        return {"epoch": self.epoch, "run": self.it.save()}


def probe_generator():
    """The generator user functions get while their output spec is traced."""
    return nd_random.Generator(nd_random.key(0, RANDOM_MAP_STREAM, 0), 0)


__all__ = ["RandomMap", "call_unpacked", "probe_generator", "with_generator"]
