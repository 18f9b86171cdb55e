"""Map fusion: ``map(f).map(g)`` becomes one ``map`` applying f then g."""

from __future__ import annotations

import dataclasses

from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.function import ChainedFunction
from nbdata.ops.map import Map
from nbdata.ops.node import Node


def _parallel(node: Map) -> bool:
    return node.num_parallel_calls is not None


def _fuse(node: Node) -> Node:
    if isinstance(node, Map) and isinstance(node.input, Map):
        inner = node.input
        if (inner.synchronous and _parallel(node)) or (node.synchronous and _parallel(inner)) \
                or inner.unbounded_threads != node.unbounded_threads:
            return node   # fused, one map's calls would run as the other's do
        if inner.selected() is not None:
            # a map that only picks columns (lambda d: d["tokens"]) costs no call per row
            # on its own; chained, its picks would run per row in Python with the next map
            return node
        return dataclasses.replace(node, input=inner.input,
                                   fn=ChainedFunction.map_chain(inner.fn, node.fn),
                                   synchronous=inner.synchronous or node.synchronous)
    return node


class MapFusion:
    name = "map_fusion"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _fuse)
