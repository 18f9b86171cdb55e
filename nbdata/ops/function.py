"""User functions bound to ops: their traced output spec, their recorded graph, and
chains of them (map and filter fusion)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError, OpError
from nbdata.spec import DatasetSpec, TensorSpec, flatten, is_custom_nest, is_dataset, pack_as, spec_of_value
from nbdata.trace.abstract import TracedFunction, canonical_output, spec_of_results
from nbdata.trace.function import FunctionGraph, record_function, recording_failed
from nbdata.trace.graph import Tensor, TraceError, enter_eager_calls, leave_eager_calls


def graph_output_spec(graph: FunctionGraph, op: str, fname: str) -> Any:
    """The output spec of a recorded function: its tensors' specs, and for constants
    it returned the spec of their canonical value."""
    out = graph.outputs
    if not isinstance(out, (tuple, dict)) and not isinstance(out, Tensor) and not is_custom_nest(out):
        out = canonical_output(out, op, fname)
    leaves = [t.spec if isinstance(t, Tensor) else spec_of_value(canonical_output(t, op, fname, top=False))
              for t in flatten(out)]
    return pack_as(out, leaves)


SPEC_ELEMENTS = 3   # real elements a function that cannot be recorded is first called on


class UserFunction(TracedFunction):
    """A user function bound to an op, with its output spec and :meth:`recorded`, its
    graph, recorded once.

    The function is only ever called on symbolic values or on real elements, never on
    made-up ones (side effects of a function then happen only for data that exists):

    - its output spec comes from recording it on symbolic inputs of its input spec
      (:func:`nbdata.trace.function.record_function`), where it can be recorded;
    - otherwise (Python control flow on a value, a conversion to a Python number, a
      Numba function, a function returning datasets) from calling it on the **first
      real elements** of its input (up to ``SPEC_ELEMENTS``), computed when the spec
      is first needed (by the next op, or by iterating): dtypes, structure and ranks
      from them, a dim static where they all agree and unknown otherwise (one element:
      every dim unknown). The function thus runs once more on each of those elements
      when the pipeline is built; an empty input has none, and then the op raises
      InvalidArgumentError asking for a signature (unless its elements are datasets:
      then the function is called once on empty datasets of their specs). ``output_signature`` (map) skips
      all this;
    - a predicate that cannot be recorded is taken to return a scalar bool, checked
      on each call.

    A function made from a graph (:meth:`from_graph`: the rest of a map function after
    the decoder that decode lifting took out) has no Python body of its own: it runs by
    evaluating its graph and compiles as the graph's Numba twin (``graph_only``)."""

    graph_only = False

    def __init__(self, fn: Callable, op: str, input_spec: Any,
                 make_dataset: Callable | None = None, output_spec: Any = None,
                 record: bool = False, first_element: Callable | None = None,
                 predicate: bool = False, symbolic: bool = True,
                 check: Callable | None = None, returns_datasets: bool = False):
        self._recording: Any = None
        # A function returning datasets is recorded best-effort (dataset constructors
        # refuse symbolic arguments in their own ways); its first elements are the rule.
        self._returns_datasets = returns_datasets
        self._spec = None
        self._check = check   # (spec, op, name): raises when the spec does not suit the op
        self._first_element = first_element   # (k) -> up to k first elements of the input
        self._predicate = predicate
        self._symbolic = symbolic and record   # recorded to know the spec
        super().__init__(fn, op, input_spec, make_dataset, output_spec)
        if record and self._recording is None:   # when the pipeline is built (tf.data traces then)
            self._record()

    @property
    def output_spec(self) -> Any:
        if self._spec is None:
            self.output_spec = self._spec_from_first_element()
        return self._spec

    @output_spec.setter
    def output_spec(self, spec: Any) -> None:
        if spec is not None and self._check is not None:
            self._check(spec, self.op, self.name)
        self._spec = spec

    def _trace(self) -> Any:
        """The output spec from the recorded graph; None (taken from the first element
        when asked) when the function cannot be recorded."""
        if self._symbolic:
            self._record()
            if not isinstance(self._recording, str):
                if not any(is_dataset(v) for v in flatten(self._recording.outputs)):
                    return graph_output_spec(self._recording, self.op, self.name)
                try:   # datasets made on symbolic inputs: their specs may need real values
                    return graph_output_spec(self._recording, self.op, self.name)
                except Exception as e:  # noqa: BLE001 - then the first element gives the spec
                    self._recording = recording_failed(e).splitlines()[0][:200]
        if self._predicate:
            return TensorSpec((), np.bool_)
        return None

    def _spec_from_first_element(self) -> Any:
        why = f" ({self._recording})" if isinstance(self._recording, str) else ""
        if self._first_element is None:
            raise InvalidArgumentError(
                f"{self.op}: could not trace function {self.name}{why}, and it has no input "
                "elements to take its output spec from; pass output_signature=...", self.op)
        try:
            elements = self._first_element(SPEC_ELEMENTS)
        except OpError as e:
            raise type(e)(
                f"{self.op}: the output spec of function {self.name}, which cannot be traced "
                f"symbolically{why}, comes from its first input elements, but reading the "
                f"first failed: {e.message}", self.op) from e
        if not elements and self._make_dataset is not None and self.input_spec is not None \
                and all(isinstance(s, DatasetSpec) and not s.shape for s in flatten(self.input_spec)):
            # Elements that are datasets (windows): the function only builds datasets
            # from them, so its spec is what it builds from empty ones of their specs.
            from nbdata.ops.window import ListSource
            empty = pack_as(self.input_spec, [self._make_dataset(ListSource((), s.element_spec))
                                              for s in flatten(self.input_spec)])
            return spec_of_results([self.call_raw(empty)])
        if not elements:
            raise InvalidArgumentError(
                f"{self.op}: the output spec of function {self.name}, which cannot be traced "
                f"symbolically{why}, comes from its first input elements, but the input has "
                "none; pass output_signature=...", self.op)
        # A function failing on some of them (an element ignore_errors drops later) still
        # gets its spec from the others; failing on all, its first error is raised.
        results, errors = [], []
        for element in elements:
            try:
                results.append(self.call_raw(element))
            except OpError as e:
                errors.append(e)
        if not results:
            errors[0].raised_by_elements = True   # iter() defers it to next(): Dataset.__iter__
            raise errors[0]
        return spec_of_results(results)

    def call_raw(self, element: Any) -> Any:
        # On a real element the function computes values, also while a session runs the
        # pipeline (a tf.random_uniform in it draws, it records no graph op).
        depth = enter_eager_calls()
        try:
            return super().call_raw(element)
        finally:
            leave_eager_calls(depth)

    def __call__(self, element: Any) -> Any:
        if self._predicate and not self._symbolic_spec():
            out = self.call_raw(element)
            if not isinstance(out, np.bool_):
                check_predicate_spec(spec_of_value(out) if not isinstance(out, tuple) else out,
                                     self.op, self.name)
            return out
        return super().__call__(element)

    def _symbolic_spec(self) -> bool:
        return self._recording is not None and not isinstance(self._recording, str)

    @property
    def recording_error(self) -> str | None:
        """Why the function could not be recorded, once :meth:`recorded` has tried."""
        return self._recording if isinstance(self._recording, str) else None

    def _record(self) -> None:
        if self._recording is not None:
            return
        try:
            self._recording = record_function(self.fn, self.input_spec)
        except Exception as e:  # noqa: BLE001 - the compiler falls back, saying why
            if not self._returns_datasets:
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
        # The spec is known by then (the plan was built); the first-element thunk (a
        # method of the Dataset, which holds locks) stays here.
        self.output_spec  # noqa: B018 - computes it if not yet known
        state = dict(self.__dict__)
        state["_first_element"] = None
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
    if not isinstance(spec, DatasetSpec) or spec.shape:
        raise TypeError(f"{op}: The `map_func` argument must return a `Dataset` object: "
                        f"function {fname} must return a Dataset, but it returns {spec}")
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
