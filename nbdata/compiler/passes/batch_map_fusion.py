"""Batch→map fusion: ``batch(B).map(f)``, where ``f`` computes each row of its output
from the same row of its input alone, becomes ``map(f).batch(B)``: ``f`` then runs on
each row inside the batch's fused kernel, as a map written before the batch does.

``f`` is recorded twice: on the batched element spec (what the map was written for)
and on the row spec (what it would see before the batch). It moves below the batch
when

- on the batched spec, every op is one of NumPy's position-wise ops (the ufuncs that
  lift, ``astype``, ``np.where``, ``np.copy``, ``** 2``), each tensor operand has the
  rank of the op's output (so row ``i`` of the output reads row ``i`` of each operand)
  and each constant operand a smaller rank (it broadcasts over a row, never across
  rows);
- the row recording makes the same calls with the same constants, each output's shape
  being the batched one without its leading dim, and it lifts into scalar expressions
  (``nbdata/compiler/lifting.py``: it fuses inlined, with NumPy's exact dtype rules);
- ``map(f).batch(B)`` has the spec ``batch(B).map(f)`` had.

Then ``f`` of a batch is the stack of ``f`` of its rows, value for value and dtype for
dtype, for every batch the batch gives (the last partial one too).

tf.data's vectorized filter, ``f = lambda b: b[m(b)]`` (each component of the element
indexed by one boolean mask), becomes :class:`nbdata.ops.masked_batch.MaskedBatch`
when the mask is computed row by row: position-wise ops as above, and indexing that
keeps the batch axis whole (``b[:, 0]``, ``b[:, 2:5]``). Its row form ``keep`` is the
same ops with the batch axis taken away (``b[:, 0]`` → ``row[0]``), written as a Python
function and recorded on the row spec, which must record the same ops with the same
dtypes, one rank lower, and return a scalar bool. The batch of ``f`` is then the rows
of the input batch whose ``keep`` is true, in order.

A function that mixes rows (a reduction over the batch, ``x[::-1]``, ``x.T``), draws
random values, reshapes, indexes otherwise, or does not lift stays after the batch and
runs on whole batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata.compiler.lifting import lift
from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.batch import Batch
from nbdata.ops.function import UserFunction
from nbdata.ops.map import Map
from nbdata.ops.masked_batch import MaskedBatch
from nbdata.ops.node import Node
from nbdata.primitives import expr
from nbdata.spec import TensorSpec, flatten, same_structure
from nbdata.trace.function import FunctionGraph, recording_failed
from nbdata.trace.graph import Tensor, astype, getitem

POSITIONWISE = frozenset([*expr.BINARY, *expr.UNARY, np.power, np.copy, np.invert, np.where, astype])


class _Refused(Exception):
    refusal = True


def _rank(x: Any) -> int:
    if isinstance(x, Tensor):
        return -1 if x.spec.shape is None else len(x.spec.shape)
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex, list, tuple)):
        return int(np.ndim(x))
    return 0   # a dtype, a string option


def _same_constant(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_constant(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_same_constant(a[k], b[k]) for k in a)
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return False


def _check_rowwise(op, aligned: set, indexing: bool = False) -> None:
    """``op`` computes row ``i`` of its outputs from row ``i`` of its operands in
    ``aligned`` alone: a position-wise op (each tensor operand of the output's rank,
    each constant of a smaller one) or, with ``indexing``, indexing that keeps the batch
    axis whole; _Refused otherwise. Its outputs join ``aligned``."""
    fn = op.call[0] if op.call is not None and op.kind == "pure" else None
    if not (fn in POSITIONWISE or (indexing and fn is getitem)):
        raise _Refused(f"{op.type} is not position-wise")
    _, args, kwargs = op.call
    if kwargs:
        raise _Refused(f"{op.type} with keyword arguments")
    ranks = [_rank(t) for t in op.outputs]
    if len(set(ranks)) != 1 or ranks[0] < 1:
        raise _Refused(f"{op.type}'s output has no batch axis")
    if fn is getitem:
        x, key = args
        if not isinstance(x, Tensor) or id(x) not in aligned or isinstance(key, Tensor):
            raise _Refused("indexing by a value the function computes")
        _row_key(key)
    else:
        for a in args:
            if isinstance(a, Tensor):
                if id(a) not in aligned or _rank(a) != ranks[0]:
                    raise _Refused(f"{op.type} broadcasts an operand across rows")
            elif _rank(a) >= ranks[0]:
                raise _Refused(f"{op.type} has a constant spanning rows")
    aligned.update(id(t) for t in op.outputs)


def _check_batched(graph: FunctionGraph) -> None:
    """Every op position-wise along the leading (batch) axis; _Refused otherwise."""
    aligned = {id(t) for t in graph.inputs}
    for spec in flatten(graph.structure):
        if not isinstance(spec, TensorSpec) or spec.shape is None or not spec.shape:
            raise _Refused("an input that is not a batch of arrays")
    for op in graph.operations():
        _check_rowwise(op, aligned)
    for leaf in graph.output_leaves:
        if not isinstance(leaf, Tensor) or id(leaf) not in aligned:
            raise _Refused("an output that is not computed row by row")


def _check_rows(batched: FunctionGraph, rows: FunctionGraph) -> None:
    """The row recording makes the batched recording's calls, one rank lower."""
    ops_b, ops_r = batched.operations(), rows.operations()
    if len(ops_b) != len(ops_r):
        raise _Refused("the function records other ops on one row")
    where_b = {id(t): ("input", k) for k, t in enumerate(batched.inputs)}
    where_r = {id(t): ("input", k) for k, t in enumerate(rows.inputs)}
    for n, (ob, orow) in enumerate(zip(ops_b, ops_r)):
        if ob.call[0] is not orow.call[0] or len(ob.outputs) != len(orow.outputs):
            raise _Refused("the function records other ops on one row")
        args_b, args_r = list(ob.call[1]), list(orow.call[1])
        if len(args_b) != len(args_r):
            raise _Refused("the function records other arguments on one row")
        for a, b in zip(args_b, args_r):
            if isinstance(a, Tensor) != isinstance(b, Tensor):
                raise _Refused("the function records other arguments on one row")
            if isinstance(a, Tensor):
                if where_b.get(id(a)) != where_r.get(id(b)) or where_b.get(id(a)) is None:
                    raise _Refused("the function records other arguments on one row")
            elif not _same_constant(a, b):
                raise _Refused("the function records other constants on one row")
        for k, (tb, tr) in enumerate(zip(ob.outputs, orow.outputs)):
            if tb.spec.dtype != tr.spec.dtype or tr.spec.shape is None or \
                    tuple(tb.spec.shape[1:]) != tuple(tr.spec.shape):
                raise _Refused("the function's values on one row differ in shape or dtype")
            where_b[id(tb)] = where_r[id(tr)] = ("op", n, k)
    outs_b, outs_r = batched.output_leaves, rows.output_leaves
    if len(outs_b) != len(outs_r) or any(
            where_b.get(id(a)) != where_r.get(id(b)) for a, b in zip(outs_b, outs_r)):
        raise _Refused("the function returns other values on one row")


def _same_spec(a: Any, b: Any) -> bool:
    if not same_structure(a, b):
        return False
    return all(isinstance(x, TensorSpec) and isinstance(y, TensorSpec) and x.dtype == y.dtype
               and x.shape == y.shape for x, y in zip(flatten(a), flatten(b)))


def _row_key(key: Any) -> Any:
    """The row form of a key that keeps the batch axis whole (``[:, 0]`` → ``[0]``;
    ``[:]`` → the row itself, Ellipsis), else _Refused."""
    whole = slice(None)
    if isinstance(key, slice) and key == whole:
        return Ellipsis
    if not (isinstance(key, tuple) and key and isinstance(key[0], slice) and key[0] == whole):
        raise _Refused("indexing that does not keep the batch axis whole")
    rest = key[1:]
    for k in rest:
        if not (isinstance(k, slice) and all(v is None or type(v) is int
                                             for v in (k.start, k.stop, k.step))) \
                and type(k) is not int:
            raise _Refused("indexing by other than integers and slices")
    if not rest:
        return Ellipsis
    return rest[0] if len(rest) == 1 else rest


def _masked(graph: FunctionGraph) -> tuple[list, Tensor]:
    """For ``lambda *components: tuple(c[mask] for c in components)`` with ``mask``
    computed row by row: the ops computing the mask (dependencies first) and the mask;
    _Refused otherwise."""
    inputs = graph.inputs
    if not inputs or any(_rank(t) < 1 for t in inputs):
        raise _Refused("an input that is not a batch of arrays")
    if not same_structure(graph.structure, graph.outputs):
        raise _Refused("outputs other than the input's components")
    ops = graph.operations()
    made = {id(t): op for op in ops for t in op.outputs}
    mask = None
    for k, leaf in enumerate(graph.output_leaves):
        op = made.get(id(leaf)) if isinstance(leaf, Tensor) else None
        if op is None or op.call is None or op.call[0] is not getitem or op.call[2]:
            raise _Refused("an output that is not a component indexed by a mask")
        x, key = op.call[1]
        if x is not inputs[k] or not isinstance(key, Tensor) or key.spec.dtype != np.bool_ \
                or _rank(key) != 1 or (mask is not None and key is not mask):
            raise _Refused("an output that is not its component indexed by the one mask")
        mask = key
    outputs = {id(t) for t in graph.output_leaves}
    order = [op for op in ops if not any(id(t) in outputs for t in op.outputs)]
    aligned = {id(t) for t in inputs}
    for op in order:
        _check_rowwise(op, aligned, indexing=True)
    if id(mask) not in aligned:
        raise _Refused("a mask that is not computed row by row")
    return order, mask


def _keep_function(graph: FunctionGraph, order: list, mask: Tensor):
    """The mask's row form as Python source: the same calls on one element's
    components, indexing keys without their batch axis."""
    names = {id(t): f"a{k}" for k, t in enumerate(graph.inputs)}
    scope: dict = {}
    lines = []
    for n, op in enumerate(order):
        fn, args, _ = op.call
        parts = []
        for j, a in enumerate(args):
            if isinstance(a, Tensor):
                parts.append(names[id(a)])
            else:
                scope[f"c{n}_{j}"] = _row_key(a) if fn is getitem and j == 1 else a
                parts.append(f"c{n}_{j}")
        out = f"t{n}"
        for t in op.outputs:
            names[id(t)] = out
        # as a user would write the row function: indexing and astype as such (Numba
        # compiles them), NumPy's functions by name
        if fn is getitem:
            call = parts[0] if scope[parts[1]] is Ellipsis else f"{parts[0]}[{parts[1]}]"
        elif fn is astype:
            if len(parts) != 2:
                raise _Refused("astype with more arguments than a dtype")
            call = f"{parts[0]}.astype({parts[1]})"
        else:
            scope[f"f{n}"] = fn
            call = f"f{n}({', '.join(parts)})"
        lines.append(f"    {out} = {call}")
    params = ", ".join(f"a{k}" for k in range(len(graph.inputs)))
    if not isinstance(graph.structure, tuple):
        head = "def keep(a0):"
    else:
        head = f"def keep({params}):"
    source = "\n".join([head, *lines, f"    return {names[id(mask)]}"]) + "\n"
    exec(compile(source, "<nbdata masked batch>", "exec"), scope)   # noqa: S102 - our own text
    return scope["keep"]


def _check_keep(order: list, rows: FunctionGraph) -> None:
    """The row recording of ``keep`` makes the mask's calls with the same dtypes, one
    rank lower, and returns one scalar bool."""
    ops_r = rows.operations()
    if len(ops_r) != len(order):
        raise _Refused("the mask records other ops on one row")
    for ob, orow in zip(order, ops_r):
        if ob.call[0] is not orow.call[0] or len(ob.outputs) != len(orow.outputs):
            raise _Refused("the mask records other ops on one row")
        for tb, tr in zip(ob.outputs, orow.outputs):
            if tb.spec.dtype != tr.spec.dtype or tr.spec.shape is None or tb.spec.shape is None \
                    or tuple(tb.spec.shape[1:]) != tuple(tr.spec.shape):
                raise _Refused("the mask's values on one row differ in shape or dtype")
    out = rows.output_leaves
    if len(out) != 1 or not isinstance(out[0], Tensor) or out[0].spec.dtype != np.bool_ \
            or out[0].spec.shape is None or tuple(out[0].spec.shape) != ():
        raise _Refused("the mask on one row is not one scalar bool")


def _masked_batch(node: Map, batched: FunctionGraph) -> Node:
    """``batch(B).map(lambda b: b[mask(b)])`` as a MaskedBatch, or ``node``."""
    batch = node.input
    element = batch.input.spec
    if not (isinstance(element, TensorSpec) or (type(element) is tuple and all(
            isinstance(s, TensorSpec) for s in element))):
        return node
    try:
        order, mask = _masked(batched)
        row_fn = _keep_function(batched, order, mask)
        row_fn.__name__ = row_fn.__qualname__ = f"mask of {node.fn.name}"
        keep = UserFunction(row_fn, "filter", element, record=True, predicate=True)
        _check_keep(order, keep.recorded())
    except Exception as e:  # noqa: BLE001 - the map then runs on whole batches
        recording_failed(e)
        return node
    return MaskedBatch(batch.input, batch.batch_size, batch.drop_remainder, node.fn, keep,
                       original=node, name=node.name)


def _fuse(node: Node) -> Node:
    if type(node) is not Map or type(node.input) is not Batch or type(node.fn) is not UserFunction \
            or node.fn.graph_only or node.input.whole_batch_errors:
        return node
    batch = node.input
    fn = node.fn
    try:
        batched = fn.recorded()
        try:
            _check_batched(batched)
        except _Refused:
            return _masked_batch(node, batched)
        row_fn = UserFunction(fn.fn, fn.op, batch.input.spec, record=True)
        rows = row_fn.recorded()
        _check_rows(batched, rows)
        lift(rows)
        new_map = dataclasses.replace(node, input=batch.input, fn=row_fn)
        fused = dataclasses.replace(batch, input=new_map)
        if not _same_spec(fused.spec, node.spec):
            return node
    except Exception as e:  # noqa: BLE001 - the map then runs on whole batches
        recording_failed(e)
        return node
    return fused


class BatchMapFusion:
    name = "batch_map_fusion"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _fuse)
