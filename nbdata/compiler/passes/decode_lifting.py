"""Decode lifting: ``map(f)`` over records, where ``f`` decodes its record with an nd.io
decoder (``parse_single_example``, ``decode_csv``, ...), becomes ``decode`` (the
decoder's kernel over whole columns of records) followed by ``map(rest)``, the rest
of ``f`` on the decoded arrays, which fuses like any NumPy function. See
``nbdata/decoding.py`` for how tracing finds the decoder."""

from __future__ import annotations

from nbdata.compiler.plan import rewrite_plan
from nbdata.compiler.twin import numba_twin
from nbdata.decoding import lifted_leaf_rest, lifted_rest
from nbdata.ops.decode import Decode
from nbdata.ops.function import UserFunction, call_unpacked
from nbdata.ops.map import Map
from nbdata.ops.node import Node
from nbdata.ops.select import Select, selection


def _twin(rest_fn, spec):
    """How to get a Numba-compilable twin of ``rest_fn`` (a closure over stand-ins that
    Numba cannot compile itself): see ``nbdata/compiler/twin.py``."""
    return lambda: numba_twin(rest_fn, spec, call_unpacked)


def _lift(node: Node) -> Node:
    if type(node) is not Map or not isinstance(node.fn, UserFunction) or node.fn.decoder is None:
        return node
    decoder = node.fn.decoder
    leaf = node.fn.decoder_leaf
    if leaf >= 0:
        # A decoder on one string component (decode_jpeg(example["image"])): decode that
        # component's column, then the rest of the function, which may decode again.
        decoded = Decode(node.input, decoder, leaf=leaf, name=node.name)
        rest_fn = lifted_leaf_rest(node.fn.fn, node.input.spec, leaf, decoded.spec,
                                   call_unpacked)
    else:
        decoded = Decode(node.input, decoder, name=node.name)
        if decoder.identity:
            return decoded
        rest_fn = lifted_rest(node.fn.fn, decoded.spec)
    columns = selection(rest_fn, decoded.spec, node.fn.output_spec, call_unpacked)
    if columns is not None:   # the rest only repacks: columns move, no Python per row
        return Select(decoded, columns, node.fn.output_spec, name=node.name)
    rest = UserFunction(rest_fn, node.fn.op, decoded.spec, output_spec=node.fn.output_spec)
    rest.twin = _twin(rest_fn, decoded.spec)
    # The rest may decode a component of what was decoded (an Example's image).
    rest._trace_leaf_decoder()
    return _lift(Map(decoded, rest, node.num_parallel_calls, node.deterministic,
                     name=node.name))


class DecodeLifting:
    name = "decode_lifting"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _lift)
