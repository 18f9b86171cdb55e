"""Decode lifting: ``map(f)`` over records, where ``f`` decodes a record with an nd.io
decoder (``parse_single_example``, ``decode_csv``, ``decode_jpeg`` of one string
component...), becomes ``decode`` (the decoder's kernel over whole columns of records)
followed by the rest of ``f`` on the decoded arrays (for a map whose random ops draw
per element, ``nbdata/ops/keyed_map.py``, the rest of its keyed function).

The decoder call is found in ``f``'s recorded graph (``nbdata/trace``): an op whose
primitive has a column decoder (``nbdata/primitives/table.py``) and whose record is one
of ``f``'s string inputs, used by nothing else. The rest is the same graph cut at the
decoder's outputs: it runs by evaluating the graph (and compiles as its Numba twin, or
lifts into expressions, like any function), or, when it only repacks what the decoder
gave, becomes a ``select`` that moves columns. The rest may decode again (an image
feature of a parsed Example), and is lifted in turn.
"""

from __future__ import annotations

import dataclasses

from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.decode import Decode
from nbdata.ops.function import UserFunction
from nbdata.ops.keyed_map import KEY_SPEC, KeyedMap
from nbdata.ops.map import Map
from nbdata.ops.node import Node
from nbdata.ops.select import Select, selection
from nbdata.primitives.table import lookup
from nbdata.spec import TensorSpec, flatten, same_structure, string
from nbdata.trace.function import FunctionGraph, recording_failed
from nbdata.trace.graph import Tensor


def _decoder_call(graph: FunctionGraph):
    """``(op, leaf)``: the first op of the graph that decodes input leaf ``leaf`` (a
    string scalar, or a vector of records when the whole element is one), used by no
    other op; None when there is none."""
    specs = flatten(graph.structure)
    whole = len(specs) == 1 and not isinstance(graph.structure, (tuple, dict))
    uses: dict[int, int] = {}
    ops = graph.operations()
    for op in ops:
        for t in op.inputs:
            uses[id(t)] = uses.get(id(t), 0) + 1
    for op in ops:
        entry = lookup(op.call[0]) if op.call is not None else None
        args = op.call[1] if op.call is not None else ()
        if entry is None or entry.decoder is None or not args or not isinstance(args[0], Tensor):
            continue
        record = args[0]
        for k, t in enumerate(graph.inputs):
            spec = specs[k]
            ok = (isinstance(spec, TensorSpec) and spec.dtype is string
                  and (spec.shape == () or whole and spec.shape is not None and len(spec.shape) == 1))
            if t is record and ok and uses.get(id(t)) == 1 and \
                    not any(leaf is t for leaf in graph.output_leaves):
                return op, -1 if whole else k
    return None


def _cut(node: Node, graph: FunctionGraph, keyed: bool):
    """``(decode node, rest of the graph)`` for a map's graph that decodes a record, else
    None. A keyed map's graph (``nbdata/ops/keyed_map.py``) takes the element's key
    before the element: the key stays an input of the rest."""
    found = _decoder_call(graph)
    if found is None:
        return None
    op, leaf = found
    keys = graph.inputs[:1] if keyed else []
    if keyed:   # leaf counts the key; the element may be the record itself
        whole = len(flatten(node.input.spec)) == 1 and not isinstance(node.input.spec, (tuple, dict))
        leaf = -1 if whole else leaf - 1
    fn, args, kwargs = op.call
    decoder = lookup(fn).decoder(*args, **kwargs)
    decoded = Decode(node.input, decoder, leaf=leaf, name=node.name)
    outputs = list(op.outputs)
    element = graph.inputs[len(keys):]
    inputs = keys + (outputs if leaf < 0 else element[:leaf] + outputs + element[leaf + 1:])
    rest = graph.with_inputs(inputs, (KEY_SPEC, decoded.spec) if keyed else decoded.spec)
    rest.operations()   # the rest needs nothing but the decoded values
    if flatten(rest.structure) != [t.spec for t in inputs]:
        return None
    return decoded, rest


def _lift_keyed(node: KeyedMap) -> Node:
    """A keyed map's decoder taken out as for a map; the rest stays a keyed map (its
    random ops draw per element of the decoded rows, which are as many)."""
    try:
        cut = _cut(node, node.keyed.recorded(), True)
    except Exception as e:  # noqa: BLE001 - the map then runs as it is
        recording_failed(e)
        return node
    if cut is None:
        return node
    decoded, rest = cut
    keyed = UserFunction.from_graph(rest, node.keyed.op, f"{node.keyed.name}.after_decode",
                                    node.spec)
    return _lift_keyed(dataclasses.replace(node, input=decoded, keyed=keyed))


def _lift(node: Node) -> Node:
    if type(node) is KeyedMap and isinstance(node.keyed, UserFunction):
        return _lift_keyed(node)
    if type(node) is not Map or not isinstance(node.fn, UserFunction):
        return node
    try:
        cut = _cut(node, node.fn.recorded(), False)
        if cut is None:
            return node
        decoded, rest = cut
        inputs = rest.inputs
    except Exception as e:  # noqa: BLE001 - the map then runs as it is
        recording_failed(e)
        return node
    if len(rest.output_leaves) == len(inputs) and same_structure(rest.outputs, decoded.spec) \
            and all(a is b for a, b in zip(rest.output_leaves, inputs)):
        return decoded   # the function returns what the decoder gives, as it gives it
    columns = selection(rest, node.fn.output_spec)
    if columns is not None:   # the rest only repacks: columns move, no Python per row
        return Select(decoded, columns, node.fn.output_spec, name=node.name)
    rest_fn = UserFunction.from_graph(rest, node.fn.op, f"{node.fn.name}.after_decode",
                                      node.fn.output_spec)
    return _lift(dataclasses.replace(node, input=decoded, fn=rest_fn))


class DecodeLifting:
    name = "decode_lifting"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _lift)
