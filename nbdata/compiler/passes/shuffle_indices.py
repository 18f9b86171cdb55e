"""Shuffle over row numbers: a ``shuffle`` whose input rows can be fetched by position
(arrays, a range, zips of those) shuffles the row numbers and gathers the rows. The
order is the same; the buffer holds int64 row numbers instead of rows, and an
iterator's saved state holds positions, not data."""

from __future__ import annotations

from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.node import Node
from nbdata.ops.shuffle import IndexShuffle, Shuffle


def _rewrite(node: Node) -> Node:
    if type(node) is Shuffle and node.input.cheap_gather():
        return IndexShuffle(node.input, node.buffer_size, node.seed, node.reshuffle_each_iteration,
                            resource_key=node.resource_key, name=node.name)
    return node


class ShuffleIndices:
    name = "shuffle_indices"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _rewrite)
