"""Elementwise lifting: a recorded function whose every op has a lift rule becomes scalar
expressions (``nbdata/primitives/expr.py``) that a fused kernel inlines, one temporary
per expression node, with NumPy's exact dtype rules and no per-row arrays.

The function's graph (``nbdata/trace``) is walked in order; each op's entry in the op
table (``nbdata/primitives/table.py``) turns the expressions of its inputs into the
expressions of its outputs. An op without a lift rule (indexing, a reduction, a resize)
makes the function not liftable; the planner then compiles it as a call instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nbdata.primitives import arrays  # noqa: F401 - registers NumPy's entries
from nbdata.primitives.expr import Expr, NotElementwise
from nbdata.primitives.table import lookup
from nbdata.spec import flatten, pack_as, string
from nbdata.trace.function import FunctionGraph, record_function
from nbdata.trace.graph import Tensor


def lift(graph: FunctionGraph) -> Any:
    """The function's outputs as expressions over its inputs (input leaf ``k`` is
    ``Expr("input", name=str(k))``), in the structure it returns; NotElementwise when
    an op has no lift rule or an input is not a numeric array of known row shape."""
    exprs: dict[int, Expr] = {}
    for k, (t, spec) in enumerate(zip(graph.inputs, flatten(graph.structure))):
        if spec.dtype is string:
            continue   # a function that leaves its strings alone still lifts
        if spec.dtype.kind not in "biuf":
            raise NotElementwise("non-numeric input")
        if spec.shape is None or any(d is None for d in spec.shape):
            raise NotElementwise("an input whose shape differs per row")
        exprs[id(t)] = Expr("input", spec.dtype, len(spec.shape) > 0, name=str(k),
                            shape=tuple(spec.shape))

    def substituted(x):
        if isinstance(x, Tensor):
            try:
                return exprs[id(x)]
            except KeyError:
                raise NotElementwise("uses a string input") from None
        if isinstance(x, list):
            return [substituted(v) for v in x]
        if isinstance(x, tuple):
            return type(x)(*map(substituted, x)) if hasattr(x, "_fields") else \
                tuple(substituted(v) for v in x)
        if isinstance(x, Mapping):
            return {k: substituted(v) for k, v in x.items()}
        return x

    for op in graph.operations():
        entry = lookup(op.call[0]) if op.call is not None else None
        if entry is None or entry.lift is None:
            raise NotElementwise(f"{op.type} has no elementwise form")
        _, args, kwargs = op.call
        outputs = flatten(entry.lift(*substituted(args), **substituted(kwargs)))
        if len(outputs) != len(op.outputs) or not all(isinstance(e, Expr) for e in outputs):
            raise NotElementwise(f"{op.type}'s lift rule does not give its outputs")
        exprs.update(zip((id(t) for t in op.outputs), outputs))
    leaves = []
    for leaf in graph.output_leaves:
        if not isinstance(leaf, Tensor):
            raise NotElementwise(f"returns a {type(leaf).__name__}")
        leaves.append(substituted(leaf))
    return pack_as(graph.outputs, leaves)


def lift_function(fn, structure: Any) -> Any:
    """``fn`` recorded on tensors of ``structure`` and lifted (see :func:`lift`)."""
    return lift(record_function(fn, structure))


__all__ = ["lift", "lift_function"]
