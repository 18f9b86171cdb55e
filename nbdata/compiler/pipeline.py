"""``Pipeline``: a dataset's optimized physical plan, ready to iterate any number of times."""

from __future__ import annotations

from typing import Any, Callable

from nbdata.compiler.backend_cpu import CpuTyper, compile_stages
from nbdata.compiler.executor import ExecContext, RunState
from nbdata.compiler.lowering import plan
from nbdata.compiler.passes import run_passes
from nbdata.compiler.plan import plan_lines
from nbdata.compiler.threads import serialises_kernels
from nbdata.iterator import Iterator
from nbdata.ops.node import Node
from nbdata.options import Options
from nbdata.placeholder import Placeholder


class PlanText(str):
    """A plan listing that shows as plain text at the interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


class Pipeline:
    """The compiled form of a dataset (``ds.compile()``).

    Iterating it opens a fresh :class:`nd.Iterator` each time; ``explain()`` gives
    the physical plan and ``stats()`` what its fused stages did so far.

    >>> import nbdata as nd
    >>> pipe = nd.Dataset.range(6).map(lambda x: x * 2).batch(4).compile()
    >>> [b.tolist() for b in pipe]
    [[0, 2, 4, 6], [8, 10]]
    """

    def __init__(self, logical: Node, options: Options, state: RunState | None = None,
                 make_dataset: Callable | None = None):
        self.options = options
        self.logical = logical
        self.state = state if state is not None else RunState()
        self._make_dataset = make_dataset
        self._stats: dict = {}
        self.optimized, self.applied_passes = run_passes(logical, options)
        planned, self.notes = plan(self.optimized, options, CpuTyper())
        self.physical = compile_stages(planned, options)
        self.element_spec = logical.spec

    def _context(self, feed: dict, options: Options | None = None) -> ExecContext:
        return ExecContext(options or self.options, feed, self.state, self._stats,
                           self._make_dataset)

    def open(self, feed_dict: dict | None = None) -> Any:
        """The executor's raw iterator (``__next__`` raising StopIteration), with
        placeholders bound from ``feed_dict``.

        >>> import numpy as np, nbdata as nd
        >>> n = nd.placeholder(np.int64, shape=[])
        >>> pipe = nd.Dataset.range(n).compile()
        >>> [int(x) for x in pipe.open({n: 3})]
        [0, 1, 2]
        """
        feed = {}
        for ph, value in (feed_dict or {}).items():
            if not isinstance(ph, Placeholder):
                raise TypeError(f"feed_dict keys must be nd.placeholder objects, got {ph!r}")
            feed[ph] = ph.bind(value)
        return self._context(feed).open(self.physical)

    def open_in(self, outer: ExecContext) -> Any:
        """Open this pipeline inside another one's run (a dataset made by ``flat_map`` or
        ``interleave``): the outer feed binds placeholders, this pipeline's own options,
        passes and run state apply."""
        return self._context(outer.feed).open(self.physical)

    def __iter__(self) -> Iterator:
        it = Iterator(self.element_spec)
        it._start(self, None)
        return it

    def fused_stages(self) -> list:
        """The compiled fused stages of the physical plan, sink first."""
        found = []
        stack = [self.physical]
        while stack:
            node = stack.pop()
            if node.op == "fused_stage":
                found.append(node)
            stack.extend(reversed(node.inputs))
        return found

    def stats(self) -> "PipelineStats":
        """What each fused stage did over every iteration so far: rows run in the
        kernel and rows re-run on the reference path (with the first reasons).

        >>> import nbdata as nd
        >>> o = nd.Options(); o.fusion_min_rows = 0
        >>> pipe = nd.Dataset.range(10).map(lambda x: x + 1).with_options(o).compile()
        >>> _ = list(pipe)
        >>> s = pipe.stats().stages[0]
        >>> s.kernel_rows, s.fallback_rows
        (10, 0)
        """
        context = self._context({})
        return PipelineStats([context.stats(stage) for stage in self.fused_stages()])

    def explain(self) -> PlanText:
        """The physical plan: stages from sink to source, fused stages with their
        ops, ops left to Python with the reason, each fused stage's generated source,
        and what the stages did so far (kernel rows, rows re-run on the reference path).

        >>> import nbdata as nd
        >>> print(nd.Dataset.range(3).map(lambda x: x + 1).compile().explain())
        == physical plan (sink first) ==
        map(fn=<lambda>)
          range(start=0, stop=3, step=1, dtype=dtype('int64'))
        == ops left to Python ==
          range(start=0, stop=3, step=1, dtype=dtype('int64')): 3 rows, fewer than Options().fusion_min_rows (4096) -> not compiled; runs on the reference path
        """
        lines = ["== physical plan (sink first) =="]
        lines += plan_lines(self.physical)
        if self.applied_passes:
            lines.append("== rewrite passes applied ==")
            lines += [f"  {name}" for name in self.applied_passes]
        if self.notes:
            lines.append("== ops left to Python ==")
            lines += [f"  {note.line()}" for note in self.notes]
        stages = self.fused_stages()
        for stage in stages:
            lines.append(f"== {stage.title()} ==")
            lines += stage.report_lines()
        if stages:
            if serialises_kernels():
                lines.append("== threads ==")
                lines.append("  Numba's workqueue threading layer cannot run two parallel kernels "
                             "at once: nbdata runs one kernel at a time (install tbb, or set "
                             "NUMBA_THREADING_LAYER=omp, to overlap them)")
            lines.append("== stage statistics (all iterations so far) ==")
            lines += ["  " + s.line() for s in self.stats().stages]
        return PlanText("\n".join(lines))


class PipelineStats:
    """Per fused stage counters (:class:`nbdata.compiler.executor.StageStats`), sink first."""

    def __init__(self, stages: list):
        self.stages = stages

    @property
    def kernel_rows(self) -> int:
        return sum(s.kernel_rows for s in self.stages)

    @property
    def fallback_rows(self) -> int:
        return sum(s.fallback_rows for s in self.stages)

    def __repr__(self) -> str:
        return "\n".join(s.line() for s in self.stages) or "no fused stages"
