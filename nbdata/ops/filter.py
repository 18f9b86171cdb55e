"""``filter``: keep the elements for which a predicate returns True."""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.chunks import PackedRows
from nbdata.errors import InvalidArgumentError
from nbdata.ops.function import UserFunction, function_parts, join_parts
from nbdata.ops.fusion import DROP, RowStep
from nbdata.ops.node import UNKNOWN, NotFusable, PartlyFusable, UnaryNode, arg_field
from nbdata.ops.packed_calls import predicate_kernel
from nbdata.ops.runtime import PerElement


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

        kernel = predicate_kernel(predicate, self.input.spec)

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


