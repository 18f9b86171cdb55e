"""User functions bound to ops: their traced output spec, their recorded graph, and
chains of them (map and filter fusion)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError
from nbdata.spec import DatasetSpec, TensorSpec, is_dataset
from nbdata.trace.abstract import TracedFunction
from nbdata.trace.function import FunctionGraph, record_function, recording_failed
from nbdata.trace.graph import TraceError


class UserFunction(TracedFunction):
    """A user function bound to an op: its output spec traced from sample inputs
    (:class:`nbdata.trace.abstract.TracedFunction`) and :meth:`recorded`, its graph,
    recorded once when the compiler first asks.

    A function made from a graph (:meth:`from_graph`: the rest of a map function after
    the decoder that decode lifting took out) has no Python body of its own: it runs by
    evaluating its graph and compiles as the graph's Numba twin (``graph_only``)."""

    graph_only = False

    def __init__(self, fn: Callable, op: str, input_spec: Any,
                 make_dataset: Callable | None = None, output_spec: Any = None,
                 record: bool = False):
        super().__init__(fn, op, input_spec, make_dataset, output_spec)
        self._recording: Any = None
        if record:   # when the pipeline is built, as the sample calls are (tf.data traces then)
            self._record()

    @property
    def recording_error(self) -> str | None:
        """Why the function could not be recorded, once :meth:`recorded` has tried."""
        return self._recording if isinstance(self._recording, str) else None

    def _record(self) -> None:
        try:
            self._recording = record_function(self.fn, self.input_spec)
        except Exception as e:  # noqa: BLE001 - the compiler falls back, saying why
            recording_failed(e)
            # Why, not the error: its traceback would keep the caller's locals alive.
            first = str(e).splitlines()[0][:160] if str(e) else ""
            self._recording = f"{type(e).__name__}: {first}"

    def recorded(self) -> FunctionGraph:
        """The function recorded on tensors of its input spec (TraceError saying why it
        could not be, every time it is asked)."""
        if self._recording is None:
            self._record()
        if isinstance(self._recording, str):
            raise TraceError(f"{self.name} could not be recorded: {self._recording}")
        return self._recording

    def __getstate__(self) -> dict:
        # Pickled with the plan (to distribute's workers): a recording is made again
        # there, except for a function that is only a graph.
        state = dict(self.__dict__)
        if not self.graph_only:
            state["_recording"] = None
        return state

    @classmethod
    def from_graph(cls, graph: FunctionGraph, op: str, name: str, output_spec: Any) -> "UserFunction":
        fn = cls(graph.python_function(name), op, graph.structure, output_spec=output_spec)
        fn._recording = graph
        fn.graph_only = True
        return fn


def check_predicate_spec(spec: Any, op: str, fname: str) -> None:
    """A predicate must return one scalar bool."""
    if not isinstance(spec, TensorSpec) or spec.dtype != np.bool_ or spec.shape not in ((), None):
        raise InvalidArgumentError(
            f"{op}: predicate {fname} must return a scalar bool, but it returns {spec}", op)


def check_dataset_spec(spec: Any, op: str, fname: str) -> DatasetSpec:
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"{op}: function {fname} must return a Dataset, but it returns {spec}")
    return spec


class ChainedFunction:
    """Several user functions acting as one: a map chain (f then g) or a conjunction
    of predicates (p and q, short-circuit). Made by the map/filter fusion passes."""

    def __init__(self, parts: list, kind: str):
        self.parts = parts
        self.kind = kind
        self.op = parts[-1].op
        self.input_spec = parts[0].input_spec
        self.output_spec = parts[-1].output_spec
        joiner = " then " if kind == "map" else " and "
        self.name = joiner.join(p.name for p in parts)

    @classmethod
    def map_chain(cls, first, second) -> "ChainedFunction":
        return cls(_parts(first) + _parts(second), "map")

    @classmethod
    def conjunction(cls, first, second) -> "ChainedFunction":
        return cls(_parts(first) + _parts(second), "and")

    def __repr__(self) -> str:
        return self.name

    def call_raw(self, element: Any) -> Any:
        if self.kind == "map":
            for p in self.parts:
                element = p(element)
            return element
        for p in self.parts:
            verdict = p.call_raw(element)
            if not isinstance(verdict, np.bool_) or not verdict:
                return verdict
        return np.True_

    def __call__(self, element: Any) -> Any:
        return self.call_raw(element)


def function_parts(fn) -> list:
    """The user functions a (possibly chained) function is made of, in call order."""
    return list(fn.parts) if isinstance(fn, ChainedFunction) else [fn]


def join_parts(parts: list, kind: str):
    """One function from consecutive parts of a chain (the inverse of function_parts)."""
    return parts[0] if len(parts) == 1 else ChainedFunction(parts, kind)


_parts = function_parts


__all__ = ["ChainedFunction", "UserFunction", "check_dataset_spec", "check_predicate_spec",
           "function_parts", "is_dataset", "join_parts"]
