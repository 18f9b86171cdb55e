"""Noop elimination: drop nodes that pass their input through (``take(-1)``, ``skip(0)``,
``repeat(1)``; each node says so through ``is_noop``)."""

from __future__ import annotations

from nbdata.compiler.plan import rewrite_plan
from nbdata.ops.node import Node


class NoopElimination:
    name = "noop_elimination"

    def run(self, plan: Node) -> tuple[Node, bool]:
        return rewrite_plan(plan, lambda node: node.inputs[0] if node.is_noop() else node)
