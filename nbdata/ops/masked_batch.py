"""``batch(B).map(lambda b: b[keep(b)])``: tf.data's vectorized filter, each batch of
``B`` input elements cut to the rows a row-wise mask keeps (batches of at most ``B``
rows, an empty one where a batch keeps none).

:mod:`nbdata.compiler.passes.batch_map_fusion` makes this node of such a map when
``keep`` computes each row's verdict from that row alone. It fuses as a filter of the
rows followed by a batch that cuts the kept rows where each ``B`` input rows end (its
terminal, :class:`GroupTerminal`), so the mask runs inside the fused kernel and each
batch is gathered once from the source. Where it does not fuse, it runs as written: the
map's function on whole batches.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from nbdata.ops.batch import batch_cardinality
from nbdata.ops.function import UserFunction
from nbdata.ops.fusion import Terminal, check_structure
from nbdata.ops.map import Map
from nbdata.ops.node import NotFusable, UnaryNode, arg_field


@dataclasses.dataclass(frozen=True, eq=False)
class MaskedBatch(UnaryNode):
    """``batch(batch_size, drop_remainder).map(fn)`` where ``fn`` keeps the rows of each
    batch for which ``keep`` (a function of one input element) is true."""

    batch_size: Any = arg_field()
    drop_remainder: bool = arg_field()
    fn: UserFunction = arg_field()             # the map's function, on whole batches
    keep: UserFunction = arg_field()           # its mask, on one element
    # the map as written (over its batch): what runs where the node does not fuse
    original: Map = dataclasses.field(default=None, compare=False,
                                      metadata={"identity": False})
    op = "masked_batch"
    fusion_role = "terminal"

    @property
    def spec(self):
        return self.fn.output_spec

    def cardinality(self) -> int:
        return batch_cardinality(self.input.cardinality(), self.batch_size, self.drop_remainder)

    def describe(self) -> str:
        return (f"batch(batch_size={self.batch_size!r}, drop_remainder={self.drop_remainder!r}) "
                f"-> map({self.fn.name}) [rows of each batch kept by a row-wise mask]")

    @functools.cached_property
    def written(self) -> Map:
        """The map over its batch as the user wrote them, over this node's input."""
        batch = self.original.input
        return dataclasses.replace(self.original, input=dataclasses.replace(batch, input=self.input))

    def per_element(self) -> str | None:
        return None

    def open_chunks(self, ctx, state=None):
        return ctx.open_chunks(self.written, state)

    def random_access(self) -> str | None:
        return self.written.random_access()

    def fusion_terminal(self, planner, structure) -> Terminal:
        if not isinstance(self.batch_size, int):
            raise NotFusable("a batch_size fed through a placeholder")
        check_structure(structure, f"{self.op} input")
        return GroupTerminal(self, self.batch_size, self.drop_remainder)


@dataclasses.dataclass
class GroupTerminal(Terminal):
    """A fused stage's batches cut where each ``batch_size`` input rows end (the kept
    rows of each group of input rows, however many), not every ``batch_size`` output
    rows. The stage's first step is the node's ``keep`` as a filter; the planner asks
    :meth:`steps` for it and checks :meth:`refusal` against the stage's source and
    steps before it."""

    groups = True

    def steps(self, planner, chain) -> list:
        from nbdata.ops.filter import Filter, FilterStep
        node = self.node
        plan = planner.function(node.keep, chain, "filter")
        owner = Filter(node.input, node.keep)
        return [FilterStep(owner, chain.structure, f"filter({node.keep.name}) [{plan.how}]",
                           fn=node.keep, plan=plan)]

    @staticmethod
    def refusal(source, steps: list) -> str | None:
        """Why a stage over ``source`` with ``steps`` before this terminal cannot cut
        batches by input rows (None: it can). The kept rows' places in the input are
        the rows the stage read before them: arrays read in place (in order or at a
        shuffle's row numbers), with only maps before (no step that drops rows or
        counts them)."""
        if source.stream is not None:
            return "its input is a stream of chunks, not arrays read in place"
        if any(step.kind != "row" or step.drops for step in steps):
            return "an op before the batch in the same stage drops or counts rows"
        return None


__all__ = ["GroupTerminal", "MaskedBatch"]
