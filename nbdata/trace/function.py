"""A function recorded once on symbolic inputs of an element spec: the graph the
compiler's passes and backends read (elementwise lifting, Numba twins, decode lifting,
column selection, GPU chains).

Recording runs the function on one :class:`~nbdata.trace.graph.Tensor` per leaf of its
input spec, inside a graph of its own. Whatever the function does that NumPy or an
nbdata primitive does is recorded; anything else (Python control flow on a value,
converting one to a Python number) raises, and the consumer then runs the function as
it is. A consumer that falls back reports why with :func:`recording_failed`, which in
strict mode (``NBDATA_STRICT=1``, set by the test suite) raises errors that come from
nbdata's own code instead, so that an internal bug fails a test rather than silently
costing a fast path.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

from nbdata.spec import DatasetSpec, TensorSpec, flatten, pack_as
from nbdata.trace.abstract import call_unpacked
from nbdata.trace.graph import Graph, Tensor, TraceError, output_leaves, upstream

STRICT = os.environ.get("NBDATA_STRICT", "") == "1"
_PACKAGE = str(Path(__file__).resolve().parent.parent)


def recording_failed(error: BaseException) -> str:
    """Why recording (or lowering a recording) failed, for a caller that falls back to
    running the function as it is. In strict mode, an error raised inside nbdata's own
    code that is not a refusal (``error.refusal``: a value used in a way that cannot be
    recorded, an op NumPy refuses for the recorded specs, a function that does not lift
    or fuse) is raised again."""
    if STRICT and not getattr(error, "refusal", False) and _raised_in_package(error):
        raise error
    return f"{type(error).__name__}: {error}"


def _raised_in_package(error: BaseException) -> bool:
    tb = error.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and str(Path(last).resolve()).startswith(_PACKAGE)


class FunctionGraph:
    """A recorded function: ``inputs`` (one tensor per leaf of ``structure``, flatten
    order) and ``outputs`` (the structure it returned: tensors, or constants at leaves
    not computed from the inputs). The same graph cut at other tensors is another
    function (:meth:`with_inputs`): what decode lifting makes of the rest of a map
    function after its decoder."""

    def __init__(self, graph: Graph, inputs: list, structure: Any, outputs: Any):
        self.graph = graph
        self.inputs = list(inputs)
        self.structure = structure
        self.outputs = outputs

    @property
    def output_leaves(self) -> list:
        return flatten(self.outputs)

    def with_inputs(self, inputs: list, structure: Any) -> "FunctionGraph":
        """The function computing the same outputs from other tensors of the graph."""
        return FunctionGraph(self.graph, inputs, structure, self.outputs)

    def operations(self) -> list:
        """The ops computing the outputs from the inputs, dependencies first. TraceError
        when an output needs a value that is neither an input nor computed from inputs
        (a placeholder, or the input a cut removed)."""
        order, outside = upstream([t for t in self.output_leaves if isinstance(t, Tensor)],
                                  {id(t) for t in self.inputs},
                                  halt=lambda op: op.kind in ("input", "placeholder"))
        if outside:
            raise TraceError(f"the function uses {outside[0].name}, a value it did not "
                             "compute from its input")
        return order

    def evaluate(self, element: Any) -> Any:
        """The function's value on one element: its ops run on concrete values."""
        values = dict(zip((id(t) for t in self.inputs), flatten(element)))
        for op in self.operations():
            inputs = [values[id(t)] for t in op.inputs]
            # a stateful op's function takes the session's run state first (none here:
            # a stateful tf.py_func in a dataset function is called per element)
            out = op.fn(None, inputs) if op.kind == "stateful" else op.fn(*inputs)
            # A list returned at the top is a tuple of outputs (decode_csv's columns,
            # also when there is one column), as when the op was recorded.
            leaves = output_leaves(out)
            values.update(zip((id(t) for t in op.outputs),
                              leaves if len(leaves) == len(op.outputs) else [out]))
        leaves = [values[id(v)] if isinstance(v, Tensor) else v for v in self.output_leaves]
        return pack_as(self.outputs, leaves)

    def python_function(self, name: str) -> Callable:
        """A Python function evaluating the graph, called the tf.data way (a tuple
        element unpacked)."""
        unpacked = isinstance(self.structure, tuple)

        def call(*parts):
            return self.evaluate(tuple(parts) if unpacked else parts[0])
        call.__qualname__ = call.__name__ = name
        call.function_graph = self
        return call


def record_function(fn: Callable, structure: Any, call: Callable = call_unpacked) -> FunctionGraph:
    """``fn`` recorded on tensors of ``structure`` (called by ``call(fn, element)``, the
    tf.data convention by default). Raises what ``fn`` raises on tensors."""
    leaves = flatten(structure)
    if any(isinstance(s, DatasetSpec) for s in leaves):
        raise TraceError("a function of dataset components is not recorded")
    graph = Graph()
    inputs = [graph.input(spec, f"input{k}") for k, spec in enumerate(leaves)]
    with graph.as_default():
        out = call(fn, pack_as(structure, inputs))
    if isinstance(out, list):   # a list returned at the top is a tuple of components
        out = tuple(out)
    leaves = flatten(out)
    if any(isinstance(leaf, list) for leaf in leaves):
        # A list inside a structure is one tensor (tf.data's rule): its items stacked.
        with graph.as_default():
            out = pack_as(out, [_stacked(leaf) if isinstance(leaf, list) else leaf
                                for leaf in leaves])
    return FunctionGraph(graph, inputs, structure, out)


# ----------------------------------------------------------- per-element draws

DRAWS_PER_ELEMENT = "draws_per_element"
"""The attribute marking a recorded callable as a random op drawing anew at every call
(TF1's ``tf.random_uniform`` in a map function recorded on its own); its ``seed``
attribute is the op's seed (None: none given)."""

_keys = threading.local()


class ElementKey:
    """What the random ops of a map function draw from while it is recorded as a function
    of ``(key, element)`` (:func:`record_keyed`): ``key``, the tensor of the element's
    int64 key, and a slot per op, counted in the order the ops are built. An op draws
    with the pair ``(key, slot)`` as nbdata's stateless random ops take a seed."""

    def __init__(self, key):
        self.key = key
        self.slots = 0

    def seed(self) -> tuple:
        """The next op's ``(key, slot)``."""
        slot = self.slots
        self.slots += 1
        return self.key, slot


def element_key(graph) -> ElementKey | None:
    """The element key the function being recorded in ``graph`` draws from, if it is
    being recorded with one."""
    found = getattr(_keys, "current", None)
    return found if found is not None and found.key.graph is graph else None


def random_seeds(graph: FunctionGraph) -> list | None:
    """The seeds of the random ops a recorded function draws from at every call (see
    :data:`DRAWS_PER_ELEMENT`), in the order it computes them; None when it has none."""
    try:
        ops = graph.operations()
    except TraceError:
        return None
    seeds = [getattr(op.call[0], "seed", None) for op in ops
             if op.call is not None and getattr(op.call[0], DRAWS_PER_ELEMENT, False)]
    return seeds or None


def record_keyed(fn: Callable, structure: Any) -> FunctionGraph:
    """``fn`` recorded as a function of ``(key, element)``, ``key`` an int64 scalar and
    ``element`` of ``structure`` (``fn`` called the tf.data way on it): its random ops
    draw from the key (:class:`ElementKey`), so that its values are a function of the
    element's key."""
    def keyed(key, element):
        previous = getattr(_keys, "current", None)
        _keys.current = ElementKey(key)
        try:
            return call_unpacked(fn, element)
        finally:
            _keys.current = previous
    keyed.__qualname__ = keyed.__name__ = getattr(fn, "__name__", "keyed")
    return record_function(keyed, (TensorSpec((), "int64"), structure))


def _stacked(items: list) -> Any:
    """A list returned inside a structure as one value: constant, or a recorded stack."""
    import numpy as np
    if not any(isinstance(v, (Tensor, list)) for v in items):
        return items   # a constant (made canonical with the other constants)
    items = [_stacked(v) if isinstance(v, list) else v for v in items]
    if not items:
        raise TraceError("the function returns an empty list of tensors")
    return np.stack(items)


__all__ = ["DRAWS_PER_ELEMENT", "ElementKey", "FunctionGraph", "STRICT", "element_key",
           "random_seeds", "record_function", "record_keyed", "recording_failed"]
