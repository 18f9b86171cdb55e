"""Lowering (planning): the optimized logical plan becomes a physical plan of stages.

A fused stage is a maximal run of element-wise steps over a source that hands out
rows in chunks, with an optional batching terminal. The planner asks each node's
own hooks (``fusion_source``, ``fusion_steps``, ``fusion_terminal``, see
:class:`nbdata.ops.node.Node`) and records, as plain data, which ops fuse and why
the others do not. It compiles nothing: a backend turns each :class:`StagePlan`
into a kernel. The one service it borrows from the backend is typing a user
function that cannot be lifted (does Numba compile it, and what does it return).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.compiler.lifting import lift
from nbdata.primitives.expr import Expr, NotElementwise, output_specs
from nbdata.ops.fusion import (PartlyFusable, StreamSource, check_structure, has_opaque, has_ragged,
                               spec_type)
from nbdata.ops.node import INFINITE, UNKNOWN, Node, NotFusable
from nbdata.options import Options
from nbdata.trace.function import recording_failed
from nbdata.trace.graph import TraceError
from nbdata.spec import flatten, same_structure


@dataclasses.dataclass
class FallbackNote:
    """Why (part of) a chain is not fused, for ``explain()``."""

    op: str
    reason: str
    consequence: str

    def line(self) -> str:
        return f"{self.op}: {self.reason} -> {self.consequence}"


@dataclasses.dataclass
class FunctionPlan:
    """How a fused stage runs one user function: ``lifted`` expressions (inlined as
    scalar code) or a Numba ``dispatcher`` returning ``result_type``."""

    lifted: Any = None
    dispatcher: Any = None
    result_type: Any = None

    @property
    def how(self) -> str:
        return "elementwise, inlined" if self.lifted is not None else "Numba-compiled call"


@dataclasses.dataclass(frozen=True)
class Chain:
    """The element as the planner follows it up a chain: its structure and the Numba
    type of each leaf (what a compiled user function receives)."""

    structure: Any
    types: tuple


@dataclasses.dataclass(frozen=True, eq=False)
class StagePlan:
    """One fused stage, as plain data: a chunk source, the element-wise steps applied
    to each row, an optional batching terminal, and the logical node whose output
    the stage produces."""

    source: Any               # nbdata.ops.fusion.ChunkSource (or StreamSource)
    steps: tuple              # nbdata.ops.fusion.Step, source → sink
    terminal: Any             # nbdata.ops.fusion.Terminal or None
    logical_top: Node
    lazy_rows: int = 0        # compile once this many rows went through (streams of unknown length)

    def describe(self) -> str:
        parts = [self.source.describe()] + [s.label for s in self.steps]
        if self.terminal is not None:
            parts.append(self.terminal.node.describe())
        return "fused_stage[" + " -> ".join(parts) + "]"

    def title(self) -> str:
        return "fused stage: " + " -> ".join(
            [self.source.node.op] + [s.node.op for s in self.steps]
            + ([self.terminal.node.op] if self.terminal is not None else []))


@dataclasses.dataclass(frozen=True, eq=False)
class StageNode(Node):
    """A fused stage in a physical plan: its plan, and the stream it reads (if any) as
    its input."""

    plan: StagePlan
    op = "fused_stage"

    @property
    def inputs(self):
        stream = self.plan.source.stream
        return () if stream is None else (stream,)

    def with_inputs(self, *inputs):
        return self if not inputs else dataclasses.replace(
            self, plan=dataclasses.replace(self.plan, source=self.plan.source.over(inputs[0])))

    @property
    def spec(self):
        return self.plan.logical_top.spec

    def cardinality(self) -> int:
        return self.plan.logical_top.cardinality()

    def describe(self) -> str:
        return self.plan.describe()

    def title(self) -> str:
        return self.plan.title()


@dataclasses.dataclass(frozen=True, eq=False)
class PlannedStage(StageNode):
    """A fused stage that no backend has compiled yet."""


class Planner:
    """Walks the plan asking nodes' hooks; the service hooks call is :meth:`function`.

    ``typer`` (from the backend) has ``type_function(fn, chain, kind)`` returning a
    (dispatcher, result type) pair or raising NotFusable.
    """

    def __init__(self, options: Options, typer):
        self.options = options
        self.typer = typer
        self.notes: list[FallbackNote] = []

    # ------------------------------------------------------- hook services
    def function(self, fn, chain: Chain, kind: str) -> FunctionPlan:
        """Lift ``fn`` (a UserFunction) to elementwise expressions, else type it."""
        lifted = self._lifted(fn, kind)
        if lifted is not None:
            return FunctionPlan(lifted=lifted)
        try:
            if any(t is None for t in chain.types):
                raise NotFusable(f"{fn.name} uses (or returns) a string component of its "
                                 "input; strings run in Python")
            dispatcher, result = self.typer.type_function(fn, chain, kind)
        except NotFusable as e:
            failed = getattr(fn, "recording_error", None)
            if failed is None:
                raise
            raise NotFusable(f"{fn.name} has no compiled form: its graph could not be recorded "
                             f"({failed}), and {e}") from None
        return FunctionPlan(dispatcher=dispatcher, result_type=result)

    @staticmethod
    def _lifted(fn, kind: str):
        """``fn``'s recorded graph as expressions when it lifts, else None."""
        try:
            lifted = lift(fn.recorded())
        except (NotElementwise, TraceError):
            return None
        except Exception as e:  # noqa: BLE001 - the function then compiles as a call
            recording_failed(e)
            return None
        if kind == "filter":
            ok = isinstance(lifted, Expr) and lifted.dtype == np.bool_ and not lifted.is_array
        else:
            ok = same_structure(lifted, fn.output_spec) and \
                output_specs(lifted) == flatten(fn.output_spec)
        return lifted if ok else None

    @staticmethod
    def advance(chain: Chain, step) -> Chain:
        """The chain after ``step``: values a step computes (or a counter pass stores in
        buffers) are C-contiguous arrays of their spec; a filter passes rows through."""
        if step.kind == "row" and not step.materializes:
            return chain
        specs = flatten(step.out_spec)
        return Chain(step.out_spec, tuple(spec_type(s) for s in specs))

    # ------------------------------------------------------------ planning
    def lower(self, node: Node) -> Node:
        stage = self._try_stage(node)
        if stage is not None:
            return stage
        if not node.inputs:
            return node
        return node.lowered_inputs(self.lower)

    def _note(self, node: Node, reason: str, consequence: str) -> None:
        note = FallbackNote(node.describe(), reason, consequence)
        if all(n.line() != note.line() for n in self.notes):
            self.notes.append(note)

    def _try_stage(self, top: Node) -> Node | None:
        terminal_node = top if top.fusion_role == "terminal" else None
        cur = top.inputs[0] if terminal_node is not None else top
        chain_nodes = []
        while cur.fusion_role == "step":
            chain_nodes.append(cur)
            cur = cur.inputs[0]
        chain_nodes.reverse()
        if not chain_nodes and terminal_node is None:
            return None
        lazy_rows = 0
        try:
            try:
                source = cur.fusion_source(self)
            except NotFusable:
                source = StreamSource(cur)  # the stage runs over the chunks cur produces
                if source.rows == UNKNOWN:
                    lazy_rows = self.options.fusion_min_rows
            check_structure(cur.spec, cur.op, opaque_strings=has_opaque(source.leaves),
                            ragged=has_ragged(source.leaves))
            chain = Chain(cur.spec, tuple(leaf.row_type for leaf in source.leaves))
        except NotFusable as e:
            self._note(cur, str(e), f"not fused: {top.describe()} and the element-wise ops "
                       "below it run op by op")
            return None
        rows = source.rows
        if rows is not None and rows not in (INFINITE, UNKNOWN) and rows < self.options.fusion_min_rows:
            self._note(cur, f"{rows} rows, fewer than Options().fusion_min_rows "
                       f"({self.options.fusion_min_rows})", "not compiled: the ops above it run op by op")
            return None
        # Strings and rows of their own shapes reach a kernel only through a first map
        # (which drops the strings, or makes the rows one shape).
        awkward = ("string components (strings run in Python; the first op of the chain is "
                   "not a map that drops them)" if has_opaque(source.leaves) else
                   "components whose shape differs per row (the first op of the chain is not "
                   "a map that makes them one shape)" if has_ragged(source.leaves) else None)
        if awkward and (not chain_nodes or chain_nodes[0].op != "map"):
            self._note(cur, f"{cur.op} output has {awkward}",
                       f"not fused: {top.describe()} and the element-wise ops below it run "
                       "op by op")
            return None
        steps: list = []
        fused_nodes = 0
        stop: tuple[Node, str] | None = None
        head = rest = None        # a partly fused node: its two halves
        for node in chain_nodes:
            try:
                node_steps = node.fusion_steps(self, chain)
            except PartlyFusable as e:
                stop = (node, str(e))
                steps += e.steps
                for step in e.steps:
                    chain = self.advance(chain, step)
                head, rest = e.head, e.rest
                break
            except NotFusable as e:
                stop = (node, str(e))
                break
            for step in node_steps:
                chain = self.advance(chain, step)
            steps += node_steps
            fused_nodes += 1
        if (has_opaque(source.leaves) or has_ragged(source.leaves)) and not steps:
            # The first op, a map that would drop the strings (or make rows uniform),
            # cannot fuse itself.
            self._note(cur, f"{stop[0].op} after it cannot fuse: {stop[1]}",
                       f"not fused: {top.describe()} and the element-wise ops below it run "
                       "op by op")
            return None
        terminal = None
        if fused_nodes == len(chain_nodes) and terminal_node is not None:
            try:
                terminal = terminal_node.fusion_terminal(self, chain.structure)
                if terminal.groups:   # its mask is a step of the stage, after the others
                    why = terminal.refusal(source, steps)
                    if why is not None:
                        raise NotFusable(why)
                    steps += terminal.steps(self, chain)
            except NotFusable as e:
                stop, terminal = (terminal_node, str(e)), None
        if not any(s.kind == "row" for s in steps) and terminal is None:
            if stop is not None:
                self._note(stop[0], stop[1], "not fused: runs op by op")
            return None
        if (source.stream is not None and not steps and terminal is not None
                and not terminal.pads and getattr(cur, "batch_views", False)):
            # Its chunks hold whole rows in fresh arrays: batches are views of them.
            return None
        logical_top = terminal_node if terminal is not None else (
            chain_nodes[fused_nodes - 1] if fused_nodes else cur)
        if head is not None:  # the stage ends inside a partly fused node
            logical_top = head.with_inputs(logical_top)
        stage: Node = PlannedStage(StagePlan(source, tuple(steps), terminal, logical_top, lazy_rows))
        if source.stream is not None:
            stage = stage.with_inputs(self.lower(cur))
        if stop is not None:
            self._note(stop[0], stop[1], "it and the ops after it run op by op, fed by the "
                       "fused stage")
        if logical_top is top:
            return stage
        remainder = chain_nodes[fused_nodes:] + (
            [terminal_node] if terminal_node is not None and terminal is None else [])
        if rest is not None:
            remainder[0] = rest
        for node in remainder:
            stage = node.with_inputs(stage)
        return stage


def plan(logical: Node, options: Options, typer) -> tuple[Node, list[FallbackNote]]:
    """The physical plan with :class:`PlannedStage` nodes, and the notes on ops left to
    Python. ``Options().fusion = False`` keeps the logical plan as it is."""
    if not options.fusion:
        return logical, []
    planner = Planner(options, typer)
    return planner.lower(logical), planner.notes
