"""``map``: apply a function to every element."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.chunks import chunk_elements, chunk_from_elements
from nbdata.ops.function import UserFunction, function_parts, join_parts
from nbdata.ops.fusion import RowStep, check_structure
from nbdata.ops.node import AUTOTUNE, NotFusable, PartlyFusable, UnaryNode, arg_field
from nbdata.ops.runtime import PerElement


@dataclasses.dataclass(frozen=True, eq=False)
class Map(UnaryNode):
    fn: UserFunction = arg_field()
    num_parallel_calls: Any = None
    deterministic: Any = None
    op = "map"
    fusion_role = "step"

    @property
    def spec(self):
        return self.fn.output_spec

    def fusion_steps(self, planner, chain) -> list:
        """One step per function of a (fused) map chain; when a later function cannot be
        compiled, the earlier ones still fuse and the node is split there."""
        parts = function_parts(self.fn)
        steps: list = []
        for k, part in enumerate(parts):
            try:
                check_structure(part.output_spec, f"map({part.name}) output")
                plan = planner.function(part, chain, "map")
            except NotFusable as e:
                if steps:
                    raise PartlyFusable(str(e), steps, dataclasses.replace(self, fn=join_parts(parts[:k], "map")),
                                        dataclasses.replace(self, fn=join_parts(parts[k:], "map"))) from None
                raise
            step = MapStep(self, part.output_spec, f"map({part.name}) [{plan.how}]", fn=part, plan=plan)
            chain = planner.advance(chain, step)
            steps.append(step)
        return steps

    def per_element(self) -> str | None:
        why = f"calls {self.fn.name} in Python for each element"
        failed = getattr(self.fn, "recording_error", None)
        return f"{why} (it has no compiled form: its graph could not be recorded: {failed})" \
            if failed else why

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        elements = chunk_elements(self.input.gather(ctx, rows), self.input.spec)
        return chunk_from_elements([self.fn(e) for e in elements], self.spec)

    def open_chunks(self, ctx, state=None):
        """The function on each row of the input's chunks (a map that did not fuse):
        ``num_parallel_calls`` threads (AUTOTUNE: tuned within the thread budget)."""
        calls = self.num_parallel_calls
        if calls == AUTOTUNE:
            threads = None if ctx.options.autotune.enabled else ctx.budget.total
        else:
            threads = 1 if calls is None else int(calls)
        deterministic = ctx.options.deterministic if self.deterministic is None else bool(self.deterministic)
        spec = self.spec
        return PerElement(ctx, self, state, self.fn,
                          lambda rows, values: chunk_from_elements(values, spec),
                          threads, deterministic, ctx.stats(self))


@dataclasses.dataclass
class MapStep(RowStep):
    """A map in a fused chain: the kernel computes the function's outputs for each row."""

    def emit_row(self, row, leaves, structure):
        return row.map(self, leaves, structure)

    def reference(self, element):
        return self.fn(element)


