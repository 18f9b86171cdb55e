"""``FusedStage``: a compiled stage plan, run as one parallel kernel per chunk of source
rows; chunks the kernel rejects are re-run through the steps' reference behaviour."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numba
import numpy as np
from numba import types

from nbdata.compiler.kernel_cache import compile_kernel
from nbdata.compiler.threads import kernel_section, kernel_threads
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.kernels.compact import compact, kept_rows
from nbdata.ops.batch import raise_shape_mismatch, stack_leaves
from nbdata.ops.fusion import DROP
from nbdata.ops.node import Node
from nbdata.spec import flatten, pack_as, packer

FIRST_CHUNK_ROWS = 1024
MIN_CHUNK_ROWS = 64
MAX_CHUNK_BYTES = 8 << 20
MAX_CHUNK_ROWS = 1 << 16


@dataclasses.dataclass(frozen=True, eq=False)
class FusedStage(Node):
    """The physical node of a fused chain: its :class:`StagePlan` and compiled kernel."""

    plan: Any               # nbdata.compiler.lowering.StagePlan
    kernel: Any             # numba dispatcher of the generated source
    source_text: str
    out_specs: tuple        # row specs of the kernel's output columns (fresh per chunk)
    scratch_specs: tuple    # row specs of its scratch columns (reused across chunks)
    counters: tuple         # initial values of the counter steps' state slots
    compacts: bool          # outputs hold every row: kept rows are gathered after the call
    results: tuple          # the element's columns: indices into scratch + outputs
    op = "fused_stage"

    @property
    def inputs(self):
        return ()

    @property
    def spec(self):
        return self.plan.logical_top.spec

    def cardinality(self) -> int:
        return self.plan.logical_top.cardinality()

    def describe(self) -> str:
        return self.plan.describe()

    def title(self) -> str:
        return self.plan.title()

    def report_lines(self) -> list[str]:
        plan = self.plan
        lines = ["  source: " + plan.source.node.describe()]
        lines += [f"  op {i}: {s.label}" for i, s in enumerate(plan.steps)]
        if plan.terminal is not None:
            lines.append("  terminal: " + plan.terminal.node.describe() + " (compaction → batches)")
        lines.append("  generated source:")
        lines += ["    " + ln for ln in self.source_text.rstrip().splitlines()]
        return lines

    def signature(self, reader) -> tuple:
        """The kernel's signature for a source reader's arguments, compiled if new."""
        args = reader.args if reader.args is not None else reader.chunk(0, min(1, reader.rows or 1))
        buffers = [np.empty((1,) + s.shape, s.dtype) for s in self.scratch_specs + self.out_specs]
        sig = (types.int64, types.int64, *[numba.typeof(a) for a in args], types.uint8[::1],
               *[numba.typeof(b) for b in buffers], types.int64[::1])
        if sig not in self.kernel.overloads:
            compile_kernel(self.kernel, sig)
        return sig

    def open(self, ctx):
        return FusedStageIterator(self, ctx)


class FusedStageIterator:
    def __init__(self, stage: FusedStage, ctx):
        self.stage = stage
        self.plan = stage.plan
        self.ctx = ctx
        self.stats = ctx.stats(stage)
        self.pack = packer(stage.spec)
        self.reader = reader = self.plan.source.open(ctx)
        self.rows, self.row_values = reader.rows, reader.row_values
        stage.signature(reader)
        # One counter per counter step: elements seen so far (enumerate: the next index).
        self.state = np.array(stage.counters, np.int64)
        self.position = 0
        self.finished = False
        self.pending: collections.deque = collections.deque()
        self.carry: list | None = None
        self.error: BaseException | None = None
        term = self.plan.terminal
        self.batch_size = int(ctx.value(term.batch_size)) if term is not None else 0
        if term is not None and self.batch_size <= 0:
            raise InvalidArgumentError(f"{term.node.label}: batch_size must be positive, got "
                                       f"{self.batch_size}", term.node.op)
        if ctx.options.chunk_rows < 0:
            raise InvalidArgumentError(f"Options().chunk_rows must be >= 0, got "
                                       f"{ctx.options.chunk_rows}")
        self.max_chunk = self._chunk_rows()
        self.chunk = min(FIRST_CHUNK_ROWS, self.max_chunk)
        self.scratch = [np.empty((self.max_chunk,) + sp.shape, sp.dtype) for sp in stage.scratch_specs]
        self.status = np.empty(self.max_chunk, np.uint8)
        # Outputs of a compacting kernel are reused (kept rows are gathered into fresh
        # arrays); otherwise each call writes fresh arrays that go out as they are.
        self.row_outputs = ([np.empty((self.max_chunk,) + sp.shape, sp.dtype) for sp in stage.out_specs]
                            if stage.compacts else None)
        self.threads = kernel_threads(ctx.options)

    def _chunk_rows(self) -> int:
        """Rows per kernel call: outputs of at most MAX_CHUNK_BYTES, so that malloc reuses
        freed chunks instead of mapping (and zeroing) fresh pages each time; a multiple
        of the batch size when no step drops rows, so batches never straddle chunks."""
        row_bytes = sum(max(1, int(np.prod(s.shape))) * np.dtype(s.dtype).itemsize
                        for s in self.stage.out_specs) or 1
        rows = max(MIN_CHUNK_ROWS, min(MAX_CHUNK_ROWS, MAX_CHUNK_BYTES // row_bytes))
        if self.ctx.options.chunk_rows > 0:
            return self.ctx.options.chunk_rows
        if self.batch_size and not any(s.drops for s in self.plan.steps):
            rows = max(self.batch_size, rows // self.batch_size * self.batch_size)
        return rows

    def __iter__(self):
        return self

    def __next__(self):
        while not self.pending:
            if self.error is not None:
                err, self.error = self.error, None
                raise err
            if self.finished:
                self._flush()
                if not self.pending:
                    raise StopIteration
                break
            self._run_chunk()
        return self.pending.popleft()

    # ------------------------------------------------------------- chunks
    def _run_chunk(self):
        lo = self.position
        k = self.chunk if self.rows is None else min(self.chunk, self.rows - lo)
        if k <= 0:
            self.finished = True
            return
        self.chunk = min(self.chunk * 4, self.max_chunk)
        if self.chunk < self.max_chunk and self.batch_size:
            self.chunk = max(self.batch_size, self.chunk // self.batch_size * self.batch_size)
        saved = self.state.copy()
        stage = self.stage
        outs = ([o[:k] for o in self.row_outputs] if stage.compacts else
                [np.empty((k,) + sp.shape, sp.dtype) for sp in stage.out_specs])
        reader = self.reader
        first, args = (lo, reader.args) if reader.args is not None else (0, reader.chunk(lo, k))
        try:
            with kernel_section(self.threads):
                bad_row, done, n = stage.kernel(np.int64(first), np.int64(k), *args, self.status,
                                                *self.scratch, *outs, self.state)
                buffers = self.scratch + outs
                outs = [buffers[i] for i in stage.results]
                if bad_row < 0 and stage.compacts:
                    rows = kept_rows(self.status, k, n)
                    outs = [compact(o[:k], rows) for o in outs]
            reason = (f"row {lo + int(bad_row)}: a function raised inside the kernel or "
                      f"returned a value that does not fit its column")
        except Exception as e:  # noqa: BLE001 - the reference re-run reports it precisely
            bad_row, reason = 0, f"the kernel raised {type(e).__name__}: {e}"
        if bad_row >= 0:
            self.state[:] = saved
            self.stats.fallback(k, reason)
            self._reference_chunk(lo, k)
            return
        self.stats.kernel(k)
        self.position = lo + k
        if done:
            self.finished = True
        n = int(n)
        self._accept_columns([o[:n] if n < k else o for o in outs], n)

    def _reference_chunk(self, lo: int, k: int):
        """Run rows ``lo..lo+k`` through the steps' reference behaviour, stopping after
        the first error (raised once the rows before it are delivered)."""
        structure = self.plan.source.node.spec
        elements = []
        r = lo
        try:
            for r in range(lo, lo + k):
                if self.finished:
                    break
                element = self._reference_row(pack_as(structure, self.row_values(r)))
                if element is not DROP:
                    elements.append(element)
            r = lo + k
        except OpError as e:
            self.error = e
            r += 1
        self.position = r
        self._accept_elements(elements)
        if self.error is not None and self.plan.terminal is not None:
            self.carry = None

    def _reference_row(self, element) -> Any:
        """Apply the steps to one source element: the output, or DROP."""
        slot = 0
        for step in self.plan.steps:
            if step.kind == "row":
                element = step.reference(element)
            else:
                element, counter, finished = step.reference(element, int(self.state[slot]))
                self.state[slot] = counter
                slot += 1
                if finished:
                    self.finished = True
            if element is DROP:
                return DROP
        return element

    # ----------------------------------------------------------- assembly
    def _accept_elements(self, elements: list):
        if not elements:
            return
        if self.plan.terminal is None:
            self.pending.extend(elements)
            return
        columns = list(zip(*(flatten(e) for e in elements)))
        op = self.plan.terminal.node.label
        cols = [stack_leaves(list(c), i, op) for i, c in enumerate(columns)]
        self._accept_columns(cols, len(elements))

    def _accept_columns(self, cols: list, n: int):
        if n == 0:
            return
        term = self.plan.terminal
        if term is None:
            pack = self.pack
            self.pending.extend(pack([c[j] for c in cols]) for j in range(n))
            return
        b = self.batch_size
        start = 0
        if self.carry is not None:
            have = len(self.carry[0])
            for i, (c, new) in enumerate(zip(self.carry, cols)):
                if c.shape[1:] != new.shape[1:]:
                    raise_shape_mismatch(term.node.label, i, c.shape[1:], have, new.shape[1:])
            take = min(b - have, n)
            self.carry = [np.concatenate([c, new[:take]]) for c, new in zip(self.carry, cols)]
            start = take
            if len(self.carry[0]) < b:
                return
            self._emit(self.carry)
            self.carry = None
        full = (n - start) // b
        if full and not term.pads:
            pack = self.pack
            self.pending.extend(pack([c[s:s + b] for c in cols])
                                for s in range(start, start + full * b, b))
            start += full * b
        while n - start >= b:
            self._emit([c[start:start + b] for c in cols])
            start += b
        if start < n:
            self.carry = [c[start:n] for c in cols]

    def _emit(self, cols: list):
        self.pending.append(self.pack(self.plan.terminal.assemble(cols)))

    def _flush(self):
        if self.carry is None:
            return
        carry, self.carry = self.carry, None
        if not self.plan.terminal.drop_remainder:
            self._emit([np.ascontiguousarray(c) for c in carry])
