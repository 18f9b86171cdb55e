"""GPU map fusion: consecutive maps after ``prefetch_to_device`` become one map whose
chains hold every nd.gpu op, run as one generated kernel per output leaf."""

from __future__ import annotations

from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.gpu_map import GpuMap, fuse
from nbdata.ops.node import Node


def _fuse(node: Node) -> Node:
    if isinstance(node, GpuMap) and isinstance(node.input, GpuMap):
        return fuse(node, node.input)
    return node


class GpuMapFusion:
    name = "gpu_map_fusion"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, _fuse)
