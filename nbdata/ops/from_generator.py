"""``from_generator``: elements produced by a Python generator, checked against a declared spec."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata import state_check
from nbdata.chunks import unshared
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.trace.abstract import function_name
from nbdata.trace.graph import leaves_where
from nbdata.ops.runtime import CollectedChunks
from nbdata.ops.node import Node
from nbdata.spec import (TensorSpec, cast_leaf, flatten, is_namedtuple, pack_as, same_structure,
                         string, structure_repr, to_element, to_leaf)


@dataclasses.dataclass(frozen=True, eq=False)
class FromGenerator(Node):
    """Calls ``generator(*args)`` anew for each iteration and converts what it yields."""

    generator: Callable
    args: tuple
    output_spec: Any
    op = "from_generator"

    @property
    def spec(self):
        return self.output_spec

    def describe(self) -> str:
        return f"from_generator({function_name(self.generator)})"

    def open_chunks(self, ctx, state=None):
        return GeneratorChunks(self, ctx, state)

    def per_element(self) -> str | None:
        return "a Python generator yields one element at a time"


def _empty_nest(value: list) -> bool:
    """A (nested) list holding no value at all: ``[]``, ``[[], []]``."""
    return all(isinstance(v, list) and _empty_nest(v) for v in value)


def _to_element(value: Any, spec: Any, what: str) -> Any:
    """Canonicalise a yielded value along the declared spec: an empty list takes the
    declared dtype (``[]`` for a string vector is an empty string vector, as in
    tf.data, not a float64 array)."""
    if isinstance(spec, TensorSpec):
        if isinstance(value, tuple) and not is_namedtuple(value):
            # the declared structure decides: a tuple where a tensor is declared is its
            # value, as tf.data flattens the yielded value up to the declared structure
            value = list(value)
        if isinstance(value, list) and _empty_nest(value):
            return np.array(value, dtype=object if spec.dtype is string else spec.dtype)
        if (isinstance(value, (int, list)) and not isinstance(value, bool)
                and spec.dtype is not string and np.dtype(spec.dtype).kind == "u"):
            # Python ints for an unsigned dtype convert when they fit (tf.data converts
            # the yielded value to the declared dtype)
            try:
                arr = np.asarray(value)
                if arr.dtype.kind == "i" and (arr.size == 0 or (
                        arr.min() >= 0 and arr.max() <= np.iinfo(spec.dtype).max)):
                    return arr.astype(spec.dtype)[()]
            except (ValueError, TypeError):
                pass
        return to_element(value, what)
    if isinstance(spec, Mapping) and isinstance(value, Mapping) and sorted(value) == sorted(spec):
        return {k: _to_element(value[k], spec[k], what) for k in value}
    if isinstance(spec, tuple) and isinstance(value, tuple) and len(value) == len(spec) and (
            is_namedtuple(value) == is_namedtuple(spec)):
        items = [_to_element(v, s, what) for v, s in zip(value, spec)]
        return type(value)(*items) if is_namedtuple(value) else tuple(items)
    return to_element(value, what)


class GeneratorChunks(CollectedChunks):
    """The generator's elements, gathered into chunks as the consumer asks for them.

    State: how many elements were taken. A generator's own state cannot be saved, so
    restoring calls the generator again and skips that many elements: exact for
    generators that yield the same sequence each time they are called.
    """

    def __init__(self, node: FromGenerator, ctx, state):
        self.node = node
        self.count = 0
        args = tuple(to_leaf(ctx.value(a), "from_generator args") for a in node.args)
        try:
            self.gen = iter(node.generator(*args))
        except Exception as e:
            raise InvalidArgumentError(
                f"from_generator: calling {function_name(node.generator)} raised "
                f"{type(e).__name__}: {e}", node.op) from e
        super().__init__(node.spec, self._produce)
        for _ in range(0 if state is None else state_check.integer(state, "count")):
            try:
                if not self._produce()[0]:
                    break
            except OpError:  # an element that was delivered as an error
                pass

    def _produce(self):
        node = self.node
        try:
            value = next(self.gen)
        except StopIteration:
            return False, None
        except OpError:
            self.count += 1
            raise
        except Exception as e:
            self.count += 1
            raise InvalidArgumentError(
                f"from_generator: generator {function_name(node.generator)} raised "
                f"{type(e).__name__}: {e}", node.op) from e
        what = f"from_generator: element {self.count} yielded by {function_name(node.generator)}"
        self.count += 1
        spec = node.output_spec
        if isinstance(value, list) and isinstance(spec, tuple):
            value = tuple(value)
        value = _to_element(value, spec, what)
        if not same_structure(value, spec):
            raise InvalidArgumentError(
                f"{what} has structure {structure_repr(value)}, expected {structure_repr(spec)}",
                node.op)
        # The element is taken when yielded, as tf.data converts it to a tensor then: a
        # generator that fills one buffer and yields it again and again (an efficient
        # Python idiom) gave every element held ahead (a batch's rows, a shuffle buffer,
        # a prefetched chunk) the buffer's last contents.
        yielded = leaves_where(value, lambda v: isinstance(v, np.ndarray))
        return True, pack_as(spec, [unshared(cast_leaf(v, s, what), yielded)
                                    for v, s in zip(flatten(value), flatten(spec))])

    def save(self) -> dict:
        return {"count": self.count}
