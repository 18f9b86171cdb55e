"""Decode lifting: ``map(f)`` over records, where ``f`` decodes its record with an nd.io
decoder (``parse_single_example``, ``decode_csv``, ...), becomes ``decode`` (the
decoder's kernel over whole columns of records) followed by ``map(rest)``, the rest
of ``f`` on the decoded arrays, which fuses like any NumPy function. See
``nbdata/decoding.py`` for how tracing finds the decoder."""

from __future__ import annotations

from nbdata.compiler.plan import rewrite_plan
from nbdata.decoding import lifted_rest
from nbdata.ops.decode import Decode
from nbdata.ops.function import UserFunction
from nbdata.ops.map import Map
from nbdata.ops.node import Node


def _lift(node: Node) -> Node:
    if type(node) is not Map or not isinstance(node.fn, UserFunction) or node.fn.decoder is None:
        return node
    decoder = node.fn.decoder
    decoded = Decode(node.input, decoder, name=node.name)
    if decoder.identity:
        return decoded
    rest = UserFunction(lifted_rest(node.fn.fn, decoder.output_spec), node.fn.op,
                        decoder.output_spec, output_spec=node.fn.output_spec)
    return Map(decoded, rest, node.num_parallel_calls, node.deterministic, name=node.name)


class DecodeLifting:
    name = "decode_lifting"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _lift)
