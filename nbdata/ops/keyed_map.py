"""A ``map`` whose function draws random values per element: TF1's random ops
(``tf.random_uniform``, ``tf.image.random_flip_left_right``, ...) in a ``Dataset.map``
function, made counter-based.

The function is recorded a second time as a function of ``(key, element)``
(:func:`nbdata.trace.function.record_keyed`): each random op in it becomes a stateless
op-table entry (``nbdata/primitives/draws.py``, the ``nd.image`` random ops) drawing with
``seed = (key, slot)``, ``slot`` its place among the function's random ops. The key of
element ``i`` (its index in the map's input, counting from 0 in each iteration) is
``int64(random.bits(random.key(seed, KEYED_MAP_STREAM, epoch), i))``, ``seed`` the map's
(from the ops' seeds under TF1's rules; without any, the pipeline's), ``epoch`` the
iteration as other random ops key theirs. So the values are the same at any thread
count, fused or not, and after an iterator restore, and differ per element and per
epoch, as TF1's draws do.

Fused, the key is a counter step (:class:`KeyStep`: a sequential pass numbering the
rows and writing their keys), then the keyed function runs as any map does: lifted into
the kernel where its ops lift, else as a compiled call of its graph. Unfused, it is
called per element with the element's index (``PerElement``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata import state_check
from nbdata.chunks import chunk_elements, chunk_from_elements
from nbdata.ops.fusion import CounterStep, check_structure
from nbdata.ops.map import MapStep, call_threads
from nbdata.ops.node import UnaryNode, arg_field, new_resource_key
from nbdata.ops.random_map import _EpochState
from nbdata.ops.runtime import PerElement
from nbdata.spec import TensorSpec

KEYED_MAP_STREAM = 0x4B4D4150   # "KMAP": keeps the keys apart from other ops' streams
KEY_SPEC = TensorSpec((), np.int64)
_MASK63 = (1 << 63) - 1


def _int64(value) -> int:
    """A 64-bit word as the int64 with its bits."""
    value = int(value) & ((1 << 64) - 1)
    return value - (1 << 64) if value >= 1 << 63 else value


def element_key(map_key: int, index: int) -> np.int64:
    """The key of element ``index`` of a map whose key for the epoch is ``map_key``."""
    return np.int64(_int64(nd_random.bits(map_key, index)))


def map_seed(seeds: list) -> int | None:
    """The map's seed from its random ops' seeds (in the order the function computes
    them): None when none has one (the pipeline's seed then decides), else a seed
    depending on each given seed and its place."""
    if all(s is None for s in seeds):
        return None
    acc = 0
    for k, s in enumerate(seeds):
        if s is not None:
            acc = int(nd_random.key(int(s), KEYED_MAP_STREAM + k, acc)) & _MASK63
    return acc


@dataclasses.dataclass(frozen=True, eq=False)
class KeyedMap(UnaryNode):
    """``map(fn)`` where ``fn`` draws random values: ``keyed`` is ``fn`` recorded as a
    function of ``(key, element)`` (graph only), run with each element's key (see the
    module docstring). ``fn`` is the user's function: its name, spec and identity."""

    fn: Any = arg_field()
    keyed: Any = dataclasses.field(default=None, metadata={"identity": False})
    seed: Any = arg_field(None)
    num_parallel_calls: Any = None
    deterministic: Any = None
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "map"
    fusion_role = "step"
    seeded = True

    @property
    def spec(self):
        return self.fn.output_spec

    def describe(self) -> str:
        return f"{self.label}(fn={self.fn.name}, random ops drawn per element, seed={self.seed!r})"

    def map_key(self, ctx, epoch: int | None = None) -> tuple[int, int]:
        """(epoch, the map's key for it) of this run (or of ``epoch``, when restoring)."""
        if epoch is None:
            epoch = ctx.epoch(self, True)
        return epoch, _int64(nd_random.key(ctx.op_seed(self), KEYED_MAP_STREAM, epoch))

    # ------------------------------------------------------------- fused
    def fusion_steps(self, planner, chain) -> list:
        keys = KeyStep(self, (KEY_SPEC, chain.structure), "element keys (counter-based draws)")
        keyed_chain = planner.advance(chain, keys)
        check_structure(self.keyed.output_spec, f"map({self.fn.name}) output")
        plan = planner.function(self.keyed, keyed_chain, "map")
        return [keys, MapStep(self, self.keyed.output_spec, f"map({self.fn.name}) [{plan.how}; "
                              "random ops drawn per element]", fn=self.keyed, plan=plan)]

    # ----------------------------------------------------------- unfused
    def per_element(self) -> str | None:
        return (f"calls {self.fn.name} in Python for each element (its random ops drawn "
                "per element from the element's key)")

    def _call(self, map_key: int):
        keyed = self.keyed

        def call(element, index):
            return keyed((element_key(map_key, index), element))
        return call

    def open_chunks(self, ctx, state=None):
        epoch, map_key = self.map_key(ctx, None if state is None else state_check.integer(
            state, "epoch", 0, state_check.MAX_EPOCH))
        threads, deterministic = call_threads(ctx, self.num_parallel_calls, self.deterministic,
                                              ctx.budget.total)
        spec = self.spec
        it = PerElement(ctx, self, None if state is None else state["run"], self._call(map_key),
                        lambda rows, values: chunk_from_elements(values, spec), threads,
                        deterministic, ctx.stats(self), indexed=True)
        return _EpochState(it, epoch)

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        _, map_key = self.map_key(ctx)
        call = self._call(map_key)
        elements = chunk_elements(self.input.gather(ctx, rows), self.input.spec)
        return chunk_from_elements([call(e, int(r)) for e, r in zip(elements, rows)], self.spec)


@dataclasses.dataclass
class KeyStep(CounterStep):
    """Numbers the rows reaching a keyed map and puts each row's key in front of it; the
    map's key for the epoch is the step's run value."""

    index_spec = KEY_SPEC
    run_slots = 1

    def emit_counter(self, em) -> None:
        bits = em.global_name("nd_bits", nd_random.bits)
        em.line(f"{em.index}[i] = np.int64({bits}({em.run[0]}, {em.c}))")
        em.line(f"{em.c} += 1")

    def run_values(self, ctx) -> list[int]:
        return [self.node.map_key(ctx)[1]]

    def reference(self, element, counter, map_key):
        return (element_key(map_key, counter), element), counter + 1, False


def keyed_map(node, fn, map_func, threads, deterministic, name) -> KeyedMap | None:
    """The node of ``map(map_func)`` over ``node`` when ``fn`` (its UserFunction) was
    recorded with random ops drawing per element, else None (an ordinary map)."""
    from nbdata.ops.function import UserFunction, graph_output_spec
    from nbdata.trace.function import FunctionGraph, random_seeds, record_keyed, recording_failed
    graph = getattr(fn, "_recording", None)
    if not isinstance(graph, FunctionGraph):
        return None
    seeds = random_seeds(graph)
    if seeds is None:
        return None
    try:
        recorded = record_keyed(map_func, fn.input_spec)
        spec = graph_output_spec(recorded, fn.op, fn.name)
    except Exception as e:  # noqa: BLE001 - then it runs as an ordinary map
        recording_failed(e)
        return None
    if spec != fn.output_spec:
        return None
    keyed = UserFunction.from_graph(recorded, fn.op, fn.name, fn.output_spec)
    return KeyedMap(node, fn, keyed, map_seed(seeds), threads, deterministic, name=name)


__all__ = ["KEYED_MAP_STREAM", "KeyStep", "KeyedMap", "element_key", "keyed_map", "map_seed"]
