"""Decode vectorization: ``decode(per record).batch(B)`` becomes ``batch(B).decode(batched)``
(``map(parse_single_example).batch(B)`` → ``batch(B).map(parse_example)``), with the
same values, shapes and errors: a bad record fails the batch being filled and the
next batch starts after it, as when records were decoded one by one. The batched decode right after the batch reads the
records below it and decodes many batches' records in one kernel call (see
``nbdata/ops/decode.py``)."""

from __future__ import annotations

import dataclasses

from nbdata.compiler.plan import rewrite_plan
from nbdata.primitives.decoder import BatchedDecoder
from nbdata.ops.batch import Batch
from nbdata.ops.decode import Decode
from nbdata.ops.node import Node


def _vectorize(node: Node) -> Node:
    if (type(node) is not Batch or type(node.input) is not Decode or node.input.decoder.batched
            or node.input.leaf >= 0):
        return node
    decode = node.input
    dim = node.batch_size if node.drop_remainder and isinstance(node.batch_size, int) else None
    batch = dataclasses.replace(node, input=decode.input)
    return Decode(batch, BatchedDecoder(decode.decoder, dim), record_errors=True, name=decode.name)


class DecodeVectorization:
    name = "decode_vectorization"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _vectorize)
