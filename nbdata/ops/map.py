"""``map``: apply a function to every element."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.chunks import Chunk, PackedRows, chunk_elements, chunk_from_elements
from nbdata.ops.function import UserFunction, function_parts, join_parts
from nbdata.ops.fusion import RowStep, check_structure, is_ragged
from nbdata.ops.node import AUTOTUNE, NotFusable, PartlyFusable, UnaryNode, arg_field
from nbdata.ops.packed_calls import map_kernel
from nbdata.ops.runtime import PerElement
from nbdata.ops.select import Select, SelectChunks, selection
from nbdata.spec import flatten, string

# The most threads AUTOTUNE tries for a map with ``use_unbounded_threadpool=True``: its
# calls are taken to wait (I/O), so the CPU thread budget does not bound them.
UNBOUNDED_THREADS = 64


def call_threads(ctx, calls, deterministic, limit: int) -> tuple:
    """(threads, deterministic) of a map run per element: ``num_parallel_calls``
    threads (AUTOTUNE: None, tuned, when autotuning is on, else ``limit``; None: 1), and
    the map's ``deterministic`` or the options' when it is None."""
    if calls == AUTOTUNE:
        threads = None if ctx.options.autotune.enabled else limit
    else:
        threads = 1 if calls is None else int(calls)
    return threads, ctx.options.deterministic if deterministic is None else bool(deterministic)


@dataclasses.dataclass(frozen=True, eq=False)
class Map(UnaryNode):
    fn: UserFunction = arg_field()
    num_parallel_calls: Any = None
    deterministic: Any = None
    synchronous: bool = False          # calls in Python one at a time, never fused into a parallel map
    unbounded_threads: bool = False    # Python calls' threads wait on I/O: outside the thread budget
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
        if self.selected() is not None:
            return None
        why = f"calls {self.fn.name} in Python for each element"
        failed = getattr(self.fn, "recording_error", None)
        return f"{why} (it has no compiled form: its graph could not be recorded: {failed})" \
            if failed else why

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        elements = chunk_elements(self.input.gather(ctx, rows), self.input.spec)
        return chunk_from_elements([self.fn(e) for e in elements], self.spec)

    def selected(self) -> tuple | None:
        """The input leaves the function returns, untouched (``lambda d: d["tokens"]``):
        then the map picks columns of each chunk (``nbdata/ops/select.py``), without
        calling the function per row; None for any other function. Only for inputs with
        leaves no fused kernel takes (rows of varying length, strings), which would
        otherwise make the map call its function per row."""
        if not any(is_ragged(s) or getattr(s, "dtype", None) is string
                   for s in flatten(self.input.spec)):
            return None
        try:
            graph = self.fn.recorded()
        except Exception:   # noqa: BLE001 - not recorded (or a chain): called per row
            return None
        return selection(graph, self.spec)

    def open_chunks(self, ctx, state=None):
        """The function on each row of the input's chunks (a map that did not fuse):
        ``num_parallel_calls`` threads (AUTOTUNE: tuned within the thread budget, or up
        to ``UNBOUNDED_THREADS`` with ``unbounded_threads``, whose threads do not count
        in the budget)."""
        picked = self.selected()
        if picked is not None:
            return SelectChunks(Select(self.input, picked, self.spec), ctx, state)
        limit = UNBOUNDED_THREADS if self.unbounded_threads else ctx.budget.total
        threads, deterministic = call_threads(ctx, self.num_parallel_calls, self.deterministic,
                                              limit)
        spec = self.spec
        kernel = map_kernel(self.fn, self.input.spec, spec)

        def emit(rows, values):
            if isinstance(values, PackedRows):   # computed a chunk at a time (call_chunk)
                return Chunk([values], rows.n)
            return chunk_from_elements(values, spec)

        def call_chunk(chunk, a, b):
            """Rows of varying length (Arrow list columns) through a function that keeps
            their lengths: one compiled call over the packed values, no Python object
            per row; None (row by row in Python) otherwise."""
            column = chunk.columns[0]
            if kernel is None or not isinstance(column, PackedRows):
                return None
            data, offsets, shapes = column.packed
            offsets = np.ascontiguousarray(offsets[a:b + 1])
            out = np.empty(len(data), spec.dtype)
            try:
                if not kernel(data, offsets, out):
                    return None
            except Exception:   # noqa: BLE001 - the row's error comes from Python's call
                return None
            lo, hi = int(offsets[0]), int(offsets[-1])
            return PackedRows(out[lo:hi], offsets - lo, shapes[a:b])

        return PerElement(ctx, self, state, self.fn, emit,
                          threads, deterministic, ctx.stats(self),
                          in_budget=not self.unbounded_threads, tune_limit=limit,
                          call_chunk=call_chunk)


@dataclasses.dataclass
class MapStep(RowStep):
    """A map in a fused chain: the kernel computes the function's outputs for each row."""

    def emit_row(self, row, leaves, structure):
        return row.map(self, leaves, structure)

    def reference(self, element):
        return self.fn(element)


