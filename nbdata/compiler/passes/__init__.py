"""Rewrite passes: each a pure plan → plan function, switchable in ``Options().optimization``."""

from __future__ import annotations

import dataclasses
import time

from nbdata.compiler.passes.batch_map_fusion import BatchMapFusion
from nbdata.compiler.passes.decode_lifting import DecodeLifting
from nbdata.compiler.passes.decode_vectorization import DecodeVectorization
from nbdata.compiler.passes.filter_fusion import FilterFusion
from nbdata.compiler.passes.gpu_map_fusion import GpuMapFusion
from nbdata.compiler.passes.map_fusion import MapFusion
from nbdata.compiler.passes.noop_elimination import NoopElimination
from nbdata.compiler.passes.shuffle_indices import ShuffleIndices
from nbdata.ops.node import Node
from nbdata.options import Options

PASSES = (NoopElimination(), DecodeLifting(), DecodeVectorization(), BatchMapFusion(), MapFusion(),
          GpuMapFusion(), FilterFusion(), ShuffleIndices())


class PassError(RuntimeError):
    """A rewrite pass failed; names the pass."""


@dataclasses.dataclass(frozen=True)
class PassRun:
    """What one pass did to a plan: whether it changed it, and how long it took."""

    name: str
    changed: bool
    seconds: float

    def line(self) -> str:
        return f"{self.name}: {'changed the plan' if self.changed else 'no change'} " \
               f"({self.seconds * 1000:.1f} ms)"


def run_passes(plan: Node, options: Options) -> tuple[Node, list[PassRun]]:
    """Run every enabled pass once, in order; returns the plan and what each pass did.

    Passes are skipped when ``options.fusion`` is False (the plain reference path).
    """
    runs: list[PassRun] = []
    if not options.fusion:
        return plan, runs
    for p in PASSES:
        if not getattr(options.optimization, p.name):
            continue
        started = time.perf_counter()
        try:
            plan, changed = p.run(plan)
        except Exception as e:
            raise PassError(f"step: {p.name}: {type(e).__name__}: {e}") from e
        runs.append(PassRun(p.name, bool(changed), time.perf_counter() - started))
    return plan, runs
