"""Output specs from sample inputs: how a function (a user's ``map`` function, a recorded
call without a rule of its own) is known to return what it returns before any data
flows, and how its results are checked against that later.

A function is called on synthetic inputs built from its input spec (zeros, ones and
twos; unknown dims sized 8, 9 and 3): the output structure and dtypes come from what it
returns under NumPy's rules, and a dim is static only when every sample agrees on it.
String inputs are :class:`SampleRecord`s, real ``bytes`` that nbdata's decoders answer
with sample values of what they decode to (``nbdata/primitives/table.py``), so a
function that parses its record traces to the exact decoded spec.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError, OpError
from nbdata.spec import (DatasetSpec, SparseTensorSpec, TensorSpec, cast_leaf, dummy_leaf, flatten,
                         is_custom_nest, is_namedtuple, merge_shapes, nest_components,
                         nest_rebuild, pack_as, same_structure, spec_of_value,
                         structure_repr, to_leaf)


def function_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def call_unpacked(fn: Callable, element: Any) -> Any:
    """Call ``fn`` the tf.data way: tuple elements unpacked, anything else as one argument.
    A namedtuple is unpacked too (nbdata's rule), unless ``fn`` can only take it as one
    argument (tf.data's rule: ``lambda example: example.image``)."""
    if isinstance(element, tuple):
        if type(element) is not tuple and _takes_whole(fn, len(element)):
            return fn(element)
        return fn(*element)
    return fn(element)


_WHOLE: dict = {}   # (fn, fields) -> whether fn takes a namedtuple as one argument


def _takes_whole(fn: Callable, fields: int) -> bool:
    try:
        return _WHOLE[fn, fields]
    except (KeyError, TypeError):   # not seen yet, or fn is not hashable
        pass
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        whole = False
    else:
        try:
            sig.bind(*([None] * fields))
            whole = False
        except TypeError:
            try:
                sig.bind(None)
                whole = True
            except TypeError:
                whole = False
    try:
        if len(_WHOLE) < 4096:
            _WHOLE[fn, fields] = whole
    except TypeError:
        pass
    return whole


# ------------------------------------------------------------ sample records

class SampleRecord(bytes):
    """A sample record (a real ``bytes`` value) given to a function traced with sample
    data: a decoder given one returns sample values of its output spec (variant
    ``variant``), so that a function that also uses its record otherwise (``len(r)``)
    still traces exactly."""

    variant = 0

    @classmethod
    def make(cls, value: bytes, variant: int) -> "SampleRecord":
        out = cls(value)
        out.variant = variant
        return out


def sample_strings(leaf: Any, variant: int) -> Any:
    """``leaf`` with its bytes values made :class:`SampleRecord`s."""
    if isinstance(leaf, bytes):
        return SampleRecord.make(leaf, variant)
    if isinstance(leaf, np.ndarray) and leaf.dtype == object:
        out = np.empty(leaf.size, dtype=object)
        out[:] = [SampleRecord.make(v, variant) if isinstance(v, bytes) else v
                  for v in leaf.reshape(-1)]
        return out.reshape(leaf.shape)
    return leaf


def sample_variant(value: Any) -> int | None:
    """The variant of a sample record (or of an array of them), else None."""
    if isinstance(value, SampleRecord):
        return value.variant
    if (isinstance(value, np.ndarray) and value.dtype == object and value.size
            and isinstance(value.flat[0], SampleRecord)):
        return value.flat[0].variant
    return None


def sample_value(spec: Any, variant: int) -> Any:
    """A sample value of a (nested) spec, strings as sample records."""
    return pack_as(spec, [sample_strings(dummy_leaf(s, variant), variant) for s in flatten(spec)])


# ------------------------------------------------------------- outputs

class FunctionOutputError(TypeError):
    """A user function returned something no element can be made of (a list, None):
    a mistake in the function itself, reported even while tracing."""


def canonical_output(value: Any, op: str, fname: str, top: bool = True) -> Any:
    """Canonicalise what a user function returned. As in tf.data, a list returned at
    the top (``decode_csv``'s columns, say) is a tuple of components, and a list
    inside a structure is one tensor; None is an error at the top, and inside a
    structure a component without values."""
    if isinstance(value, list):
        if top:
            return canonical_output(tuple(value), op, fname, top=False)
        return to_leaf(value, f"{op}: value returned by {fname}")
    if value is None:
        if not top:   # a component without values inside a structure (TF's NoneTensor)
            return None
        raise FunctionOutputError(f"{op}: function {fname} returned None; it must return a value")
    if isinstance(value, Mapping):
        return {k: canonical_output(v, op, fname, False) for k, v in value.items()}
    if is_custom_nest(value):   # TF's __tf_flatten__ protocol, attrs classes
        return nest_rebuild(value, tuple(canonical_output(v, op, fname, False)
                                         for v in nest_components(value)))
    if is_namedtuple(value):
        return type(value)(*[canonical_output(v, op, fname, False) for v in value])
    if isinstance(value, tuple):
        return tuple(canonical_output(v, op, fname, False) for v in value)
    try:
        return to_leaf(value, f"{op}: value returned by {fname}")
    except TypeError as e:   # TF's wording first, then which function and why
        if type(e) is not TypeError:
            raise          # FunctionOutputError, or a symbolic value's TraceError (the
            #                caller then falls back to real elements): kept as they are
        raise TypeError(f"{op}: Unsupported return value from function passed to "
                        f"Dataset.{op}(): {e}") from None


def structure_error(op: str, fname: str, got: str, traced: str, sequences: bool,
                    position: int | None = None) -> InvalidArgumentError:
    """The error of a function that returned another structure than when it was traced
    (``position``: the element of its input it was called on, when known). A run of
    plain components of another length is how a Python list of varying length shows:
    the message says how to return such a sequence."""
    where = "" if position is None else f" for element {position} of its input"
    text = (f"{op}: function {fname} returned structure {got}{where}, but it returned "
            f"{traced} when traced; a function must always return the same structure")
    if sequences:
        text += (". A Python list (or tuple) it returns is a structure of separate "
                 "components, one per item: return a variable-length sequence as one array "
                 "(np.array(...); with output_signature=nd.TensorSpec((None,), dtype) when "
                 "the traced calls all gave one length), and batch such elements with "
                 "padded_batch (or ragged_batch)")
    error = InvalidArgumentError(text, op)
    error.structure_mismatch = (op, fname, got, traced, sequences)
    return error


def at_element(error: BaseException, position: int) -> BaseException:
    """``error`` naming the input element it was raised for, when it is a structure
    mismatch that does not name one yet (else ``error`` itself)."""
    found = getattr(error, "structure_mismatch", None)
    if found is None or getattr(error, "position", None) is not None:
        return error
    named = structure_error(*found, position=position)
    named.position = position
    return named


def conform(value: Any, spec: Any, op: str, fname: str) -> Any:
    """Check a canonical value against ``spec`` (structure, dtype, shape)."""
    if not same_structure(value, spec):
        sequences = (isinstance(value, tuple) and isinstance(spec, tuple)
                     and len(value) != len(spec)
                     and not any(isinstance(v, (tuple, Mapping)) for v in value + spec))
        raise structure_error(op, fname, structure_repr(value), structure_repr(spec), sequences)
    leaves = flatten(value)
    specs = flatten(spec)
    out = [cast_leaf(v, s, f"{op}: value returned by {fname}") for v, s in zip(leaves, specs)]
    return pack_as(spec, out) if not all(a is b for a, b in zip(out, leaves)) else value


# ------------------------------------------------------------- tracing

class TracedFunction:
    """A function bound to an op, with its output spec traced from sample inputs (or
    given as ``output_spec``). Only for nbdata's own NumPy-level functions recorded as
    graph ops (``nbdata.trace.graph``): user functions are
    :class:`nbdata.ops.function.UserFunction`, which overrides the tracing and never
    calls them on sample inputs. ``make_dataset`` builds the sample datasets of
    dataset components (window elements)."""

    def __init__(self, fn: Callable, op: str, input_spec: Any,
                 make_dataset: Callable | None = None, output_spec: Any = None):
        if not callable(fn):
            raise TypeError(f"{op}: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.op = op
        self.name = function_name(fn)
        self.input_spec = input_spec
        self._make_dataset = make_dataset
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

    def sample_input(self, variant: int) -> Any:
        leaves = [sample_strings(dummy_leaf(s, variant, self._make_dataset), variant)
                  for s in flatten(self.input_spec)]
        return pack_as(self.input_spec, leaves)

    def _trace(self) -> Any:
        results, errors = [], []
        for variant in range(3):
            try:
                args = self.sample_input(variant)
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
        return spec_of_results(results)


def spec_of_results(results: list) -> Any:
    """The spec of sample results: dims static where all samples agree."""
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


__all__ = ["FunctionOutputError", "SampleRecord", "TracedFunction", "call_unpacked",
           "canonical_output", "conform", "function_name", "sample_strings", "sample_value",
           "sample_variant", "spec_of_results"]
