"""User functions: calling conventions, output checking and spec tracing."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.decoding import SampleRecord, probe_function, probe_leaf_function
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.sparse import SparseTensorSpec
from nbdata.spec import (DatasetSpec, TensorSpec, cast_leaf, dummy_leaf, flatten, is_dataset,
                         is_namedtuple, merge_shapes, pack_as, same_structure, spec_of_value,
                         string, structure_repr, to_leaf)


def function_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def call_unpacked(fn: Callable, element: Any) -> Any:
    """Call ``fn`` the tf.data way: tuple elements unpacked, anything else as one argument."""
    if isinstance(element, tuple):
        return fn(*element)
    return fn(element)


def _sample_records(value: Any, spec: Any, variant: int) -> Any:
    """String sample values as :class:`SampleRecord` (decoders answer them with samples)."""
    if not isinstance(spec, TensorSpec) or spec.dtype is not string:
        return value
    if isinstance(value, bytes):
        return SampleRecord.make(value, variant)
    out = np.empty(value.shape, object)
    out.reshape(-1)[:] = [SampleRecord.make(v, variant) for v in value.reshape(-1)]
    return out


class FunctionOutputError(TypeError):
    """A user function returned something no element can be made of (a list, None):
    a mistake in the function itself, reported even while tracing."""


def canonical_output(value: Any, op: str, fname: str, top: bool = True) -> Any:
    """Canonicalise what a user function returned. As in tf.data, a list returned at
    the top (``decode_csv``'s columns, say) is a tuple of components, and a list
    inside a structure is one tensor; None is an error."""
    if isinstance(value, list):
        if top:
            return canonical_output(tuple(value), op, fname, top=False)
        return to_leaf(value, f"{op}: value returned by {fname}")
    if value is None:
        raise FunctionOutputError(f"{op}: function {fname} returned None; it must return a value")
    if isinstance(value, Mapping):
        return {k: canonical_output(v, op, fname, False) for k, v in value.items()}
    if is_namedtuple(value):
        return type(value)(*[canonical_output(v, op, fname, False) for v in value])
    if isinstance(value, tuple):
        return tuple(canonical_output(v, op, fname, False) for v in value)
    return to_leaf(value, f"{op}: value returned by {fname}")


class UserFunction:
    """A user function bound to an op, with its traced output spec.

    Tracing calls the function on synthetic inputs built from the input spec
    (zeros, ones and twos; unknown dims sized 8, 9 and 3): the output structure and
    dtypes come from what the function returns under NumPy's rules, and a dim is
    static only when every probe agrees on it. Side effects of the function thus
    also run (a few times) when the pipeline is built, as with tf.data tracing.
    """

    def __init__(self, fn: Callable, op: str, input_spec: Any,
                 make_dataset: Callable | None = None, output_spec: Any = None):
        if not callable(fn):
            raise TypeError(f"{op}: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.op = op
        self.name = function_name(fn)
        self.input_spec = input_spec
        self._make_dataset = make_dataset
        # The nd.io decoder the function decodes its record with (set by tracing), and
        # the string leaf it decodes (-1: the element itself is the record).
        self.decoder = None
        self.decoder_leaf = -1
        # For functions Numba cannot compile as written (a decode-lifted rest): a
        # zero-argument callable giving (a compilable twin, its source).
        self.twin = None
        self.output_spec = output_spec if output_spec is not None else self._trace()

    def __repr__(self) -> str:
        return self.name

    def call_raw(self, element: Any) -> Any:
        """Call without checking the result against the traced spec."""
        try:
            out = call_unpacked(self.fn, element)
        except OpError:
            raise
        except Exception as e:
            raise InvalidArgumentError(
                f"{self.op}: function {self.name} raised {type(e).__name__}: {e}", self.op) from e
        return canonical_output(out, self.op, self.name)

    def __call__(self, element: Any) -> Any:
        """Call on one element and conform the result to the traced output spec."""
        return conform(self.call_raw(element), self.output_spec, self.op, self.name)

    def _probe_inputs(self, variant: int) -> Any:
        leaves = [_sample_records(dummy_leaf(s, variant, self._make_dataset), s, variant)
                  for s in flatten(self.input_spec)]
        return pack_as(self.input_spec, leaves)

    def _probe_spec(self) -> TensorSpec | None:
        """The input spec when it is one string leaf of rank 0 or 1 (a record, or a
        batch of records, that a decoder may be given)."""
        spec = self.input_spec
        if (isinstance(spec, TensorSpec) and spec.dtype is string and spec.shape is not None
                and len(spec.shape) <= 1):
            return spec
        return None

    def _trace_decoder(self) -> list | None:
        """Trace with a record probe (see ``nbdata/decoding.py``): the outputs when the
        function decodes its record with one nd.io decoder, else None."""
        spec = self._probe_spec()
        if spec is None:
            return self._trace_leaf_decoder()
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outputs, decoder = probe_function(self.fn, spec)
                results = [canonical_output(out, self.op, self.name) for out in outputs]
        except FunctionOutputError:
            raise
        except Exception:  # noqa: BLE001 - not a decoder function: trace with sample data
            return None
        if decoder is None:
            return None
        self.decoder = decoder
        return results

    def _trace_leaf_decoder(self) -> list | None:
        """The outputs when the function decodes one scalar string leaf of its element
        with one nd.io decoder (``decode_jpeg(example["image"])``), else None; sets
        ``decoder`` and ``decoder_leaf`` (the leaf's index in ``flatten`` order)."""
        spec = self.input_spec
        if not any(isinstance(s, TensorSpec) and s.dtype is string and s.shape == ()
                   for s in flatten(spec)) or isinstance(spec, TensorSpec):
            return None
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            leaf, outputs, decoder = probe_leaf_function(self.fn, spec, self._probe_inputs,
                                                         call_unpacked)
            if decoder is None:
                return None
            try:
                results = [canonical_output(out, self.op, self.name) for out in outputs]
            except Exception:  # noqa: BLE001 - let the ordinary trace report it
                return None
        self.decoder = decoder
        self.decoder_leaf = leaf
        return results

    def _trace(self) -> Any:
        results = self._trace_decoder()
        if results is not None:
            return self._spec_of(results)
        results, errors = [], []
        for variant in range(3):
            try:
                args = self._probe_inputs(variant)
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = canonical_output(call_unpacked(self.fn, args), self.op, self.name)
                results.append(out)
            except FunctionOutputError:
                raise
            except Exception as e:  # noqa: BLE001 - a probe may fail on synthetic data
                errors.append(e)
        if not results:
            err = errors[0]
            raise InvalidArgumentError(
                f"{self.op}: could not trace function {self.name}: calling it on sample inputs "
                f"of spec {self.input_spec} raised {type(err).__name__}: {err}. nbdata infers "
                f"element specs when the pipeline is built; pass output_signature=... to give "
                f"the spec explicitly", self.op) from err
        return self._spec_of(results)

    def _spec_of(self, results: list) -> Any:
        """The output spec of the probe results: dims static where all probes agree."""
        first = results[0]
        consistent = [r for r in results if same_structure(r, first)]
        specs = [[spec_of_value(v) for v in flatten(r)] for r in consistent]
        leaves = []
        for i, s in enumerate(specs[0]):
            if isinstance(s, DatasetSpec):
                leaves.append(s)
                continue
            shape = s.shape if len(specs) > 1 else tuple(None for _ in s.shape)
            for other in specs[1:]:
                shape = merge_shapes(shape, other[i].shape)
            leaves.append(SparseTensorSpec(shape, s.dtype) if isinstance(s, SparseTensorSpec)
                          else TensorSpec(shape, s.dtype))
        return pack_as(first, leaves)


def conform(value: Any, spec: Any, op: str, fname: str) -> Any:
    """Check a canonical value against ``spec`` (structure, dtype, shape)."""
    if not same_structure(value, spec):
        raise InvalidArgumentError(
            f"{op}: function {fname} returned structure {structure_repr(value)}, but it "
            f"returned {structure_repr(spec)} when traced; a function must always return "
            f"the same structure", op)
    leaves = flatten(value)
    specs = flatten(spec)
    out = [cast_leaf(v, s, f"{op}: value returned by {fname}") for v, s in zip(leaves, specs)]
    return pack_as(spec, out) if not all(a is b for a, b in zip(out, leaves)) else value


def check_predicate_spec(spec: Any, op: str, fname: str) -> None:
    """A predicate must return one scalar bool."""
    if not isinstance(spec, TensorSpec) or spec.dtype != np.bool_ or spec.shape not in ((), None):
        raise InvalidArgumentError(
            f"{op}: predicate {fname} must return a scalar bool, but it returns {spec}", op)


def check_dataset_spec(spec: Any, op: str, fname: str) -> DatasetSpec:
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"{op}: function {fname} must return a Dataset, but it returns {spec}")
    return spec


__all__ = ["UserFunction", "call_unpacked", "conform", "function_name", "is_dataset"]


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
