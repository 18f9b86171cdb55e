"""Rewrite passes: each a pure plan → plan function, switchable in ``Options().optimization``."""

from __future__ import annotations

from nbdata.compiler.passes.decode_lifting import DecodeLifting
from nbdata.compiler.passes.decode_vectorization import DecodeVectorization
from nbdata.compiler.passes.filter_fusion import FilterFusion
from nbdata.compiler.passes.gpu_map_fusion import GpuMapFusion
from nbdata.compiler.passes.map_fusion import MapFusion
from nbdata.compiler.passes.noop_elimination import NoopElimination
from nbdata.compiler.passes.shuffle_indices import ShuffleIndices
from nbdata.ops.node import Node
from nbdata.options import Options

PASSES = (NoopElimination(), DecodeLifting(), DecodeVectorization(), MapFusion(), GpuMapFusion(),
          FilterFusion(), ShuffleIndices())


class PassError(RuntimeError):
    """A rewrite pass failed; names the pass."""


def run_passes(plan: Node, options: Options) -> tuple[Node, list[str]]:
    """Run every enabled pass once, in order; returns the plan and the passes that changed it.

    Passes are skipped when ``options.fusion`` is False (the plain reference path).
    """
    applied = []
    if not options.fusion:
        return plan, applied
    for p in PASSES:
        if not getattr(options.optimization, p.name):
            continue
        try:
            plan, changed = p.run(plan)
        except Exception as e:
            raise PassError(f"step: {p.name}: {type(e).__name__}: {e}") from e
        if changed:
            applied.append(p.name)
    return plan, applied
