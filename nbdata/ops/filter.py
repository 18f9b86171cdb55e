"""``filter``: keep the elements for which a predicate returns True."""

from __future__ import annotations

import dataclasses
import types
import weakref

import numba
import numpy as np

from nbdata.chunks import PackedRows
from nbdata.errors import InvalidArgumentError
from nbdata.ops.function import UserFunction, function_parts, join_parts
from nbdata.ops.fusion import DROP, RowStep
from nbdata.ops.node import UNKNOWN, NotFusable, PartlyFusable, UnaryNode, arg_field
from nbdata.ops.runtime import PerElement
from nbdata.spec import TensorSpec, string


@dataclasses.dataclass(frozen=True, eq=False)
class Filter(UnaryNode):
    predicate: UserFunction = arg_field()
    op = "filter"
    fusion_role = "step"

    def fusion_steps(self, planner, chain) -> list:
        """One step per predicate of a (fused) conjunction, each testing the rows the
        ones before it kept; a predicate that cannot compile splits the node there."""
        parts = function_parts(self.predicate)
        steps: list = []
        for k, part in enumerate(parts):
            try:
                plan = planner.function(part, chain, "filter")
            except NotFusable as e:
                if steps:
                    raise PartlyFusable(
                        str(e), steps,
                        dataclasses.replace(self, predicate=join_parts(parts[:k], "and")),
                        dataclasses.replace(self, predicate=join_parts(parts[k:], "and"))) from None
                raise
            steps.append(FilterStep(self, chain.structure, f"filter({part.name}) [{plan.how}]",
                                    fn=part, plan=plan))
        return steps

    def cardinality(self) -> int:
        return UNKNOWN

    def per_element(self) -> str | None:
        return f"calls {self.predicate.name} in Python for each element"

    def open_chunks(self, ctx, state=None):
        """The predicate on each row of the input's chunks (a filter that did not fuse);
        the kept rows are gathered from the input chunk."""
        predicate = self.predicate

        def emit(rows, verdicts):
            kept = np.flatnonzero(np.array(verdicts, dtype=bool))
            return rows.take(kept) if len(kept) < rows.n else rows

        kernel = _packed_verdicts(predicate, self.input.spec)

        def call_chunk(chunk, a, b):
            """Verdicts of packed rows (Arrow list columns) in one compiled call; None
            (row by row in Python) for other columns, or when a row raises: Python then
            raises its error at that row."""
            column = chunk.columns[0]
            if kernel is None or not isinstance(column, PackedRows):
                return None
            data, offsets, _ = column.packed
            out = np.empty(b - a, np.bool_)
            try:
                kernel(data, np.ascontiguousarray(offsets[a:b + 1]), out)
            except Exception:   # noqa: BLE001 - the row's error comes from Python's call
                return None
            return out

        return PerElement(ctx, self, state, lambda e: keep(predicate, e), emit, 1, True,
                          ctx.stats(self), call_chunk=call_chunk)


_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _packed_verdicts(predicate, spec):
    """A compiled kernel of a predicate over 1-D rows of varying length held packed
    (values, offsets), or None: the element is not one such leaf, or the predicate does
    not compile to a function returning a bool (it then runs in Python). Compiled with
    Python's error model and bounds checks, once per function."""
    fn = getattr(predicate, "fn", None)
    if type(predicate) is not UserFunction or not isinstance(fn, types.FunctionType) or \
            not isinstance(spec, TensorSpec) or spec.dtype is string or spec.shape != (None,) \
            or np.dtype(spec.dtype).kind not in "biuf":
        return None
    try:
        return _COMPILED[fn]
    except KeyError:
        pass
    kernel = None
    try:
        one = numba.njit(fn, error_model="python", boundscheck=True)

        @numba.njit(nogil=True)
        def verdicts(values, offsets, out):
            for i in range(len(offsets) - 1):
                out[i] = one(values[offsets[i]:offsets[i + 1]])
        probe = np.zeros(3, spec.dtype)
        verdicts(probe, np.array([0, 1, 3], np.int64), np.empty(2, np.bool_))
        if all(sig.return_type == numba.types.boolean for sig in one.nopython_signatures):
            kernel = verdicts
    except Exception:   # noqa: BLE001 - it runs in Python then
        kernel = None
    _COMPILED[fn] = kernel
    return kernel


def keep(predicate: UserFunction, element, op: str = "filter") -> bool:
    """Evaluate a predicate; anything but a scalar bool is an error naming the op."""
    verdict = predicate.call_raw(element)
    if not isinstance(verdict, np.bool_):
        raise InvalidArgumentError(
            f"{op}: predicate {predicate.name} must return a scalar bool, got "
            f"{type(verdict).__name__} {verdict!r:.60}", op)
    return bool(verdict)


@dataclasses.dataclass
class FilterStep(RowStep):
    """A filter in a fused chain: rows whose predicate is false are dropped."""

    drops = True
    materializes = False

    def emit_row(self, row, leaves, structure):
        row.filter(self, leaves, structure)
        return leaves

    def reference(self, element):
        return element if keep(self.fn, element) else DROP


