"""``FusedStage``: a compiled stage plan, run as one parallel kernel per chunk of input
rows; chunks the kernel rejects are re-run through the steps' reference behaviour.

The input is a chunk source read in place (from_tensor_slices, range, ...) or the
chunk stream of any other stage (a fused stage may start after a shuffle, a cache, an
interleave). The output is a chunk stream: rows, or batches when the plan ends in a
batching terminal.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import time
from typing import Any

import numba
import numpy as np
from numba import types

from nbdata import profiler, progress
from nbdata.chunks import Chunk, RowList, chunk_from_elements, col_row, read_only
from nbdata.compiler.kernel_cache import compile_kernel, load_kernel
from nbdata.kernels.threads import KernelThreadTuner, kernel_section
from nbdata.kernels.tiers import arg_types, promote
from nbdata.errors import InvalidArgumentError, OpError
from nbdata.kernels.compact import RowGather, compact
from nbdata.kernels.batching import batch_columns
from nbdata.ops.batch import batch_size_of
from nbdata.ops.fusion import DROP, RaggedLeaf, counter_slots, pack_ragged
from nbdata.compiler.lowering import StageNode
from nbdata.ops.runtime import ChunkIter, IndexQueue, RowQueue
from nbdata.spec import pack_as


# A kernel call's outputs at most (bytes). 4 MiB against 8 MiB: the width-256 and
# width-3,072 normalize cells of perf's sweep ran 1.1-1.25x the hand kernel against
# 0.95-1.16x (their kernel calls 1.5-1.8 against 2.4-2.6 ms an epoch: less of the
# source pushed out of a 32 MB L3), for one more pull per 8 MB of batches.
MAX_OUTPUT_BYTES = 4 << 20
# Bytes of source rows a gathering stage gathers per pull (an L2 cache's worth: the
# batches are still there when the consumer reads them)
MAX_GATHER_BYTES = 2 << 20

# The counter state of a stage without counter steps (empty, so never written: shared;
# writable, as the kernels are compiled for a writable state)
_NO_COUNTERS = np.empty(0, np.int64)

_U8_VECTOR = types.uint8[::1]     # the kernel's status column
_I64_VECTOR = types.int64[::1]    # its kept rows and counter state


@dataclasses.dataclass(frozen=True, eq=False)
class FusedStage(StageNode):
    """A compiled fused stage: its :class:`StagePlan` and kernel.

    ``lazy_rows`` > 0 (a stream of unknown length) defers compiling the kernel until
    that many rows went through the reference path: short streams never pay for it.

    Two tiers: ``serial`` is the same source with ``range`` for ``prange``, compiled in
    about a quarter of the parallel kernel's time (Numba's parallel lowering dominates a
    stage's compile). A stage runs it first, unless the parallel kernel is already in
    memory or in the disk cache (or ``parallel_after`` is 0); once the serial kernel has
    run ``parallel_after`` seconds, the parallel kernel compiles on a background thread
    and takes over from the next call. Both compute the same rows in the same order, so
    which one ran a chunk changes nothing but speed. ``parallel_after`` infinite:
    serial only.
    """

    kernel: Any             # numba dispatcher of the generated source
    source_text: str
    out_specs: tuple        # row specs of the kernel's output columns
    scratch_specs: tuple    # row specs of its scratch columns (reused across chunks)
    counters: tuple         # initial values of the counter steps' state slots
    compacts: bool          # some step drops rows: kept rows are gathered after the call
    results: tuple          # the element's columns: indices into scratch + outputs
    lazy_rows: int = 0
    # Seconds spent making the kernel: writing its source, and Numba compiling (or
    # loading from the disk cache) each signature it was called with.
    timing: dict = dataclasses.field(default_factory=lambda: {"source": 0.0, "numba": 0.0})
    serial: Any = None              # numba dispatcher of the serial twin (None: parallel only)
    parallel_after: float = 0.0
    # ``parallel``: the parallel kernel runs; ``serial_seconds`` spent in the serial one;
    # ``sig``: the signature to promote; ``promoting``: the thread compiling it;
    # ``looked``: signatures whose parallel kernel the disk cache did not have;
    # ``arg types`` and ``buffer types``: signature() memos (made at its first call).
    tier: dict = dataclasses.field(default_factory=lambda: {
        "parallel": False, "serial_seconds": 0.0, "sig": None, "promoting": None,
        "looked": set()})
    # (source argument, row spec) of results gathered straight from the source: kept
    # rows of a source column the kernel does not change (``results`` counts them after
    # the scratch and output columns)
    passthrough: tuple = ()
    # the parallel kernel's thread count, tuned from its measured speed (default options)
    tuner: KernelThreadTuner = dataclasses.field(default_factory=KernelThreadTuner)

    @functools.cached_property
    def row_sizes(self) -> tuple[int, int, int]:
        """Bytes of a row: of the columns gathered straight from the source, of the
        kernel's outputs, and of both (each at least 1)."""
        def size(specs) -> int:
            return sum(max(1, math.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in specs)
        passed = [s for _, s in self.passthrough]
        return (size(passed) or 1, size(self.out_specs) or 1,
                size(list(self.out_specs) + passed) or 1)

    @functools.cached_property
    def out_layout(self) -> tuple:
        """(shape, dtype) of a row of each output column."""
        return tuple((tuple(sp.shape), np.dtype(sp.dtype)) for sp in self.out_specs)

    @functools.cached_property
    def results_are_outputs(self) -> bool:
        """Whether the element's columns are the kernel's output columns, in order."""
        return not self.scratch_specs and tuple(self.results) == tuple(range(len(self.out_specs)))

    @property
    def compile_seconds(self) -> float:
        return self.timing["source"] + self.timing["numba"]

    def report_lines(self) -> list[str]:
        plan = self.plan
        lines = ["  source: " + plan.source.describe()]
        lines += [f"  op {i}: {s.label}" for i, s in enumerate(plan.steps)]
        if plan.terminal is not None:
            lines.append("  terminal: " + plan.terminal.node.describe() + " (compaction → batches)")
        if self.lazy_rows:
            lines.append(f"  compiled once {self.lazy_rows:,} rows have gone through (a stream "
                         "of unknown length: shorter ones stay on the reference path)")
        lines.append(f"  compile: {self.compile_seconds:.3f} s (source {self.timing['source']:.3f} s, "
                     f"Numba {self.timing['numba']:.3f} s)")
        lines.append("  generated source:")
        lines += ["    " + ln for ln in self.source_text.rstrip().splitlines()]
        return lines

    def signature(self, args: list) -> tuple:
        """The kernel's signature for these source arguments, compiled if new."""
        tier = self.tier
        buffer_types = tier.get("buffer types")
        if buffer_types is None:
            buffer_types = tier["buffer types"] = tuple(
                numba.typeof(np.empty((1,) + s.shape, s.dtype))
                for s in self.scratch_specs + self.out_specs)
        # (a stream's stage calls this per chunk: argument types memoized by fingerprint)
        types_of_args = arg_types(args, tier.setdefault("arg types", {}))
        ready = tier.get("ready")   # the last call's (argument types, kernel, signature)
        if ready is not None and ready[0] is types_of_args and ready[1] is self.running():
            tier["sig"] = ready[2]   # compiled already: no tuple of types to hash
            return ready[2]
        sig = (types.int64, types.int64, *types_of_args,
               _U8_VECTOR, _I64_VECTOR, *buffer_types, _I64_VECTOR)
        tier["sig"] = sig
        started = time.perf_counter()
        after = self.parallel_after
        looked = tier["looked"]
        if not tier["parallel"] and (self.serial is None or after == 0 or (
                after != math.inf and sig not in looked and load_kernel(self.kernel, sig))):
            tier["parallel"] = True
        kernel = self.kernel if tier["parallel"] else self.serial
        if kernel is self.serial:
            looked.add(sig)   # a stream calls this per chunk: look in the disk cache once
        if sig not in kernel.overloads:
            text = self.plan.describe()
            with progress.working("compiling the kernel of "
                                  + (text if len(text) <= 240 else text[:237] + "...")):
                compile_kernel(kernel, sig)
        self.timing["numba"] += time.perf_counter() - started
        tier["ready"] = (types_of_args, kernel, sig)
        return sig

    def running(self):
        """The kernel the next call runs: the parallel one once it is compiled."""
        return self.kernel if self.tier["parallel"] or self.serial is None else self.serial

    def ran_serial(self, seconds: float) -> None:
        """Count time spent in the serial kernel; past ``parallel_after`` seconds, start
        compiling the parallel kernel in the background (it takes over when ready)."""
        tier = self.tier
        tier["serial_seconds"] += seconds
        if (self.parallel_after == math.inf or tier["promoting"] is not None
                or tier["serial_seconds"] < self.parallel_after or tier["sig"] is None):
            return
        sig = tier["sig"]

        def compile_parallel():
            started = time.perf_counter()
            compile_kernel(self.kernel, sig)
            self.timing["numba"] += time.perf_counter() - started

        promote(tier, compile_parallel)

    def open_chunks(self, ctx, state: dict | None = None):
        return FusedChunks(self, ctx, state)


def stream_args(chunk: Chunk, leaves: list) -> list:
    """Kernel arguments for a chunk of an input stream: C-contiguous columns of the
    planned dtypes, plus the (rows, size) view of each array column, all read-only."""
    args = []
    for c, leaf in zip(chunk.columns, leaves):
        if leaf.arg_count == 0:   # an OpaqueLeaf: the kernel does not read it
            continue
        if isinstance(leaf, RaggedLeaf):
            args += [read_only(a) for a in pack_ragged(c, leaf.spec)]
            continue
        if not isinstance(c, np.ndarray) or c.dtype != leaf.spec.dtype:
            c = np.asarray(list(c) if isinstance(c, RowList) else c, dtype=leaf.spec.dtype)
        c = read_only(np.ascontiguousarray(c))
        args.append(c)
        if leaf.spec.shape:
            args.append(c.reshape(len(c), math.prod(leaf.spec.shape)))
    return args


class FusedChunks(ChunkIter):
    """Runs a fused stage chunk by chunk.

    State: the input's position (rows read from an in-place source) or the input
    stream's state, the counter steps' counters, a batch terminal's partial batch
    (rows not yet batched) and an error still to be raised.
    """

    def __init__(self, stage: FusedStage, ctx, state: dict | None):
        self.stage = stage
        self.plan = stage.plan
        self.ctx = ctx
        self.stats = ctx.stats(stage)
        source = self.plan.source
        self.structure = source.spec
        self.stream = source.stream is not None
        self.indexed = source.indexed
        self.indices = (source.open_indices(ctx, None if state is None else state["indices"])
                        if self.indexed else None)
        if self.stream:
            self.input = ctx.open_chunks(source.stream, None if state is None else state["input"])
            self.reader = None
            self.rows = None
            self.row_values = None
        else:
            self.reader = source.open(ctx)
            self.rows = self.reader.rows
            self.row_values = self.reader.row_values
        if state is not None:
            self._check_state(state)
        self.position = 0 if state is None else int(state["pos"])
        self.state = (self._first_counters(ctx) if state is None else
                      np.array(state["counters"], np.int64))
        self.finished = False if state is None else bool(state["finished"])
        self.indices_ended = False   # the row numbers ended while topping up a chunk
        self.queue = RowQueue([] if state is None else state["pending"])
        # A stage whose element is kept rows of source columns held in memory (a filter
        # over arrays, shuffled or not) carries the kept rows' source positions, not the
        # rows: each batch is gathered from the source once, when it is whole (rows
        # gathered per kernel call were joined again wherever a batch straddled two
        # calls), and a saved state holds positions. ``at``: positions not handed out,
        # after the rows of ``queue`` (one of the two is empty but for a restore).
        # (the same for every iteration over the same reader: computed once, _layout)
        self.gathers, self.gathered = self._layout("gathers", (self.reader,), self._gathering)
        self.at = IndexQueue([] if state is None else self._pending_at(state))
        self.gatherers: list | None = None   # a RowGather per gathered source column
        # A terminal whose batches end where each batch_size input rows end (a masked
        # batch): the place in the input's order (rows read before it) of each row not
        # handed out, aligned with the rows of ``queue`` then ``at``; the groups handed
        # out; the group an error ended (its rows dropped, raised once the groups before
        # it are out).
        self.groups = self.plan.terminal is not None and self.plan.terminal.groups
        self.group_of = IndexQueue([] if state is None or not self.groups else
                                   self._pending_groups(state))
        self.groups_out = 0 if state is None or not self.groups else int(state["groups_out"])
        self.error_group: int | None = None
        # A stream's chunk or a shuffle's row numbers being run, and what is left of
        # them after a row that raised (run before the input is read again)
        self.current = None
        self.leftover = None if state is None else self._leftover(state)
        self.error: BaseException | None = None
        # A stream of unknown length runs its first ``lazy_rows`` rows on the reference
        # path, counted over all iterations: once that many went through, every later
        # row (in this iteration and the next ones) runs in the kernel.
        self.compiled = (stage.lazy_rows == 0 or stage.timing.get("seen", 0) >= stage.lazy_rows
                         or (state is not None and state.get("compiled", False)))
        self.seen = 0
        term = self.plan.terminal
        self.batch_size = batch_size_of(term.node, ctx) if term is not None else 0
        if ctx.options.chunk_rows < 0:
            raise InvalidArgumentError(f"Options().chunk_rows must be >= 0, got "
                                       f"{ctx.options.chunk_rows}")
        self.max_chunk, self.gather_rows, self.plain = self._layout(
            "sizes", (self.reader, self.batch_size, ctx.options.chunk_rows), self._sizes)
        self.scratch: list | None = None
        # Rows the kernel's calls read and kept, where steps drop rows (stage.compacts)
        self.rows_read = self.rows_kept = 0
        if self.compiled and not self.stream:
            # (the arrays of the last iteration's reader: their types are known)
            seen = stage.tier.get("source args")
            args = self.reader.args
            if (args is None or seen is None or len(seen) != len(args)
                    or not all(map(operator.is_, args, seen))):
                stage.signature(self._first_args())
                stage.tier["source args"] = args

    def _first_counters(self, ctx) -> np.ndarray:
        """The counter steps' state at the start of a run: their initial values and run
        values (a keyed map's key this epoch); one shared empty array without them."""
        stage = self.stage
        if not stage.counters:
            return _NO_COUNTERS
        state = np.array(stage.counters, np.int64)
        for step, slot in counter_slots(self.plan.steps):
            if step.run_slots:
                state[slot + 1:slot + 1 + step.run_slots] = step.run_values(ctx)
        return state

    def reopen(self, ctx, next_epochs) -> bool:
        """Start again from the first row, as ``FusedChunks(stage, ctx, None)`` would,
        keeping what an iteration of a source read in place leaves as it was (its
        reader, layout, buffers and gatherers): a pipeline's next iteration after one
        that ended (``ChunkedRun.reopen``). Where the pipeline draws at random, ``ctx``
        (this run's context) takes the iteration numbers ``next_epochs()`` gives, and
        row numbers (a shuffle's) and counters' run values (a keyed map's key) are drawn
        anew. False, changing nothing, for a stage over a stream or over a source that
        opens a reader per run (``SourceReader.static``)."""
        if self.stream or not self.reader.static:
            return False
        if ctx.op_index:
            ctx.epochs = next_epochs()
        stage = self.stage
        if self.indexed:   # (the last run's closed as it ended)
            self.indices = self.plan.source.open_indices(ctx, None)
        self.position = 0
        if stage.counters:
            self.state = self._first_counters(ctx)
        self.finished = self.indices_ended = False
        for queue in (self.queue, self.at, self.group_of):   # (empty after an end)
            if queue.n:
                queue.clear()
        self.groups_out = 0
        self.error_group = self.current = self.leftover = self.error = None
        self.compiled = stage.lazy_rows == 0 or stage.timing.get("seen", 0) >= stage.lazy_rows
        self.seen = self.rows_read = self.rows_kept = 0
        return True

    def _layout(self, name: str, key: tuple, compute):
        """``compute()``, the same for every iteration with the same ``key`` (the source's
        reader, the batch size, options): kept on the stage for the next iteration."""
        tier = self.stage.tier
        found = tier.get(name)
        if found is None or found[0][0] is not key[0] or found[0][1:] != key[1:]:
            found = tier[name] = (key, compute())
        return found[1]

    def _gathering(self) -> tuple:
        """(gathers, gathered): whether the stage's element is kept rows of source columns
        held in memory, carried as positions, and those columns (see __init__)."""
        stage, reader = self.stage, self.reader
        base = len(stage.scratch_specs) + len(stage.out_specs)
        gathers = (not self.stream and reader.args is not None and bool(stage.results)
                   and all(i >= base for i in stage.results)
                   # positions index the source columns: a row for every source row
                   and isinstance(reader.rows, int) and reader.rows >= 0 and all(
                       len(reader.args[stage.passthrough[i - base][0]]) >= reader.rows
                       for i in stage.results))
        return gathers, [stage.passthrough[i - base] for i in stage.results] if gathers else []

    def _sizes(self) -> tuple:
        """(max_chunk, gather_rows, plain) of this iteration.

        Rows per kernel call: outputs (rows gathered straight from the source included)
        of at most MAX_OUTPUT_BYTES, so that malloc reuses freed chunks instead of
        mapping (and zeroing) fresh pages each time and a chunk's batches are still in
        the cache when the consumer reads them; a multiple of the batch size when no
        step drops rows, so that batches never straddle calls. A stage that carries
        positions gathers its rows per pull, at most MAX_GATHER_BYTES of them
        (``gather_rows``); its kernel calls write only the kept rows' positions.

        A plain stage (a source read in place, at its positions or at row numbers (a
        shuffle's), steps that keep every row and no counters, a batch without padding):
        its whole batches come from the kernel's outputs without the row queue
        (_plain_next)."""
        stage, term, b = self.stage, self.plan.terminal, self.batch_size
        chunk_rows = self.ctx.options.chunk_rows
        gathered_bytes, out_bytes, all_bytes = stage.row_sizes
        row_bytes = out_bytes if self.gathers else all_bytes
        max_chunk = chunk_rows or max(64, min(1 << 17, MAX_OUTPUT_BYTES // row_bytes))
        if b and not chunk_rows and (not stage.compacts or self.groups):
            # (the nearest multiple: 12 KB rows in 128-row batches are 384 rows a call,
            # 4.5 MB, not 256 rows in a third more calls)
            max_chunk = max(b, (max_chunk + b // 2) // b * b)
        plain = (not self.stream and self.reader.args is not None
                 and isinstance(self.rows, int) and not stage.compacts
                 and not stage.counters and not self.groups and term is not None
                 and not term.pads and b > 0)
        return max_chunk, max(1, MAX_GATHER_BYTES // gathered_bytes), plain

    def _check_state(self, state: dict) -> None:
        """A restored state's fields fit this stage (``nbdata/state_check.py``): the
        position within the source's rows, a counter per counter step within its
        bounds (a take's or skip's count; an enumerate's start and up), the rows of a
        partial batch of this stage's rows."""
        from nbdata import state_check
        state_check.record(state, "pos", "counters", "finished", "pending")
        most = state_check.MAX_POSITION if self.rows is None else self.rows
        state_check.integer(state, "pos", 0, most)
        state_check.flag(state, "finished")
        state_check.flag(state, "compiled", default=False)
        initial = list(self.stage.counters)
        # Run values (a keyed map's key) are any int64; the counters are positions.
        counters = state_check.int_array(state["counters"], "counters", -(1 << 63), (1 << 63) - 1)
        if len(counters) != len(initial):
            raise state_check.StateFieldError("counters", counters, f"expected {len(initial)}")
        slots = counter_slots(self.plan.steps)
        low = min((step.initial for step, _ in slots), default=0)
        if any(not low <= int(counters[k]) <= state_check.MAX_POSITION for _, k in slots):
            raise state_check.StateFieldError("counters", counters, f"holds entries outside "
                                              f"[{low}, {state_check.MAX_POSITION}]")
        for step, k in slots:
            # a take's or skip's count; an enumerate's index: its start plus the
            # rows its input can have
            node = getattr(step, "node", None)
            hi = (step.count if step.drops else state_check.MAX_POSITION if node is None
                  else min(state_check.MAX_POSITION,
                           step.initial + state_check.most_rows(node.input)))
            state_check.check_int(int(counters[k]), f"counters[{k}]", step.initial, hi)
        # The rows of a partial batch: columns of the kernel's results.
        specs = (list(self.stage.scratch_specs) + list(self.stage.out_specs)
                 + [spec for _, spec in self.stage.passthrough])
        state_check.row_pieces(state["pending"], tuple(specs[i] for i in self.stage.results),
                               "pending")

    def _pending_at(self, state: dict) -> list:
        """A restored state's carried source positions (absent: none), each within the
        source's rows."""
        from nbdata import state_check
        at = state.get("pending_at", [])
        if at and not self.gathers:
            raise state_check.StateFieldError("pending_at", at, "this stage carries rows, "
                                              "not source positions")
        most = max(0, self.reader.rows - 1) if at else 0   # (gathers: rows is known)
        return state_check.int_pieces(at, "pending_at", 0, most)

    def _leftover(self, state: dict):
        """A restored state's rows still to run after a row that raised: a stream's
        rows (of its input's spec) or a shuffle's row numbers; None when absent."""
        from nbdata import state_check
        left = state.get("leftover")
        if left is None:
            return None
        if self.stream:
            return state_check.rows(left, self.plan.source.stream.spec, "leftover")
        if self.indexed:
            return state_check.int_array(left, "leftover", 0, max(0, (self.rows or 1) - 1))
        raise state_check.StateFieldError("leftover", left, "this stage reads its rows in "
                                          "place")

    def _pending_groups(self, state: dict) -> list:
        """A restored masked batch's input positions of the rows not handed out: one
        per pending row, increasing, within the source's rows."""
        from nbdata import state_check
        state_check.integer(state, "groups_out", 0, state_check.MAX_POSITION)
        at = state.get("pending_groups")
        out = state_check.int_pieces(at, "pending_groups", 0, max(0, (self.rows or 1) - 1))
        rows = self.queue.n + self.at.n
        flat = np.concatenate(out) if out else np.empty(0, np.int64)
        if len(flat) != rows or np.any(np.diff(flat) <= 0):
            raise state_check.StateFieldError("pending_groups", at, f"expected {rows} increasing "
                                              "positions, one per pending row")
        return out

    def _first_args(self) -> list:
        reader = self.reader
        args = reader.args if reader.args is not None else reader.chunk(0, min(1, reader.rows or 1))
        return args + [np.zeros(1, np.int64)] if self.indexed else args

    def _buffers(self):
        if self.scratch is None:
            stage, k = self.stage, self.max_chunk
            self.scratch = [np.empty((k,) + sp.shape, sp.dtype) for sp in stage.scratch_specs]
            self.status = np.empty(k, np.uint8)
            self.kept = np.empty(k, np.int64)
            # Outputs of a compacting kernel are reused (kept rows are gathered into fresh
            # arrays); otherwise each call writes fresh arrays that go out as they are.
            self.row_outputs = ([np.empty((k,) + sp.shape, sp.dtype) for sp in stage.out_specs]
                                if stage.compacts else None)

    # ------------------------------------------------------------ protocol
    def save(self) -> dict:
        counters, queue = self.state, self.queue
        state = {"pos": self.position, "finished": self.finished, "compiled": self.compiled,
                 # (no counters: the one empty array, never written)
                 "counters": counters.copy() if len(counters) else counters,
                 "pending": list(queue.pieces) if queue.n else []}
        if self.at.n:
            state["pending_at"] = list(self.at.pieces)
        if self.leftover is not None:
            state["leftover"] = self.leftover
        if self.groups:
            state["groups_out"] = self.groups_out
            state["pending_groups"] = list(self.group_of.pieces)
        if self.stream:
            state["input"] = self.input.save()
        if self.indexed:
            state["indices"] = self.indices.save()
        return state

    def close(self) -> None:
        if self.stream:
            self.input.close()
        if self.indices is not None:   # (a shuffle's buffer goes back to the memory budget)
            self.indices.close()

    def next(self, want: int) -> Chunk | None:
        if (self.plain and self.compiled and not self.finished and self.error is None
                and self.leftover is None and not self.queue.n and not self.at.n):
            out = self._plain_next(want)
            if out is not None:
                return out
            if self.finished and not self.queue.n:   # the end: nothing to flush
                return None
        while True:
            out = self._from_carry(want)
            if out is not None:
                return out
            if self.error is not None:
                err, self.error = self.error, None
                if self.error_group is not None:
                    self.groups_out, self.error_group = self.error_group + 1, None
                raise err
            if self.finished:
                return self._flush()
            self._run(want)

    def _plain_next(self, want: int) -> Chunk | None:
        """Whole batches of a plain stage (``self.plain``) from one call of its parallel
        kernel, straight from the kernel's outputs; None (nothing done) where the general
        path must run: the last partial batch, the serial tier, a row that raised. The
        same rows, batches and state as the general path, without its row queue."""
        b = self.batch_size
        stage = self.stage
        kernel = stage.running()
        if kernel is not stage.kernel:
            return None
        lo = self.position
        if self.indexed:   # the next row numbers, a whole number of batches but at the end
            k = min(self.max_chunk, want * b) // b * b
            rows = None if k <= 0 or self.indices_ended else self.indices.next(k)
            if rows is None:
                self.finished = k > 0   # (the row numbers ended)
                return None
            idx = np.ascontiguousarray(rows.columns[0], dtype=np.int64)
            k = len(idx)
            if k % b or not k:
                self.leftover = idx   # (the general path runs them)
                return None
            args = self.reader.args + [idx]
            kernel_lo = 0
        else:
            k = min(self.max_chunk, want * b, self.rows - lo) // b * b
            if k <= 0:
                self.finished = lo >= self.rows   # (the rows ended)
                return None
            idx, args, kernel_lo = None, self.reader.args, lo
        if self.scratch is None:
            self._buffers()
        outs = self._fresh_outputs(k)
        threads, tuned = self._threads(kernel)
        began = time.perf_counter()
        try:
            with kernel_section(threads):
                bad_row, done, n = self._call(kernel, kernel_lo, k, args, outs)
        except Exception:  # noqa: BLE001 - the general path runs the rows again, reports
            bad_row = 0
        if bad_row >= 0:   # (the general path runs them again and falls back)
            self.leftover = idx
            return None
        if tuned or profiler._current is not None:
            self._called(threads, tuned, k, n, began)
        self.stats.kernel(k)
        self.position = lo + k
        if done:
            self.finished = True
        count = k // b
        # (the batches: views of the fresh outputs, as batch_columns(copy=False) gives)
        if stage.results_are_outputs:
            columns = outs
        else:
            buffers = self.scratch + outs
            columns = [buffers[i] for i in stage.results]
        return Chunk([c.reshape((count, b) + c.shape[1:]) for c in columns], count)

    def _call(self, kernel, kernel_lo: int, k: int, args: list, outs: list) -> tuple:
        """``(bad_row, done, kept)`` of one call of the stage's kernel (or its serial
        twin) over ``k`` rows from ``kernel_lo`` of the source arguments ``args``."""
        return kernel(np.int64(kernel_lo), np.int64(k), *args, self.status, self.kept,
                      *self.scratch, *outs, self.state)

    def _fresh_outputs(self, k: int) -> list:
        """Fresh output columns of ``k`` rows for a call of a kernel that keeps every row
        (they go out as they are, so never reused)."""
        empty = self.ctx.host_empty
        return [empty((k,) + shape, dtype) for shape, dtype in self.stage.out_layout]

    def _threads(self, kernel) -> tuple[int, bool]:
        """(threads, tuned) of a call of ``kernel``: the budget's count, or the tuner's
        within it for the parallel kernel under default thread options."""
        budget = self.ctx.budget
        threads = budget.kernel_threads()
        tuned = budget.tunes and kernel is self.stage.kernel
        if tuned:
            threads = self.stage.tuner.threads(threads)
        return threads, tuned

    def _called(self, threads: int, tuned: bool, k: int, kept, began: float) -> None:
        """After a kernel call of ``k`` rows that began at ``began`` (``kept``: the rows it
        kept, None when it failed): its profiler slice, and the tuner's measurement."""
        ended = time.perf_counter()
        if profiler._current is not None:
            profiler.slice_(f"kernel: {self.stats.title}", "kernel", began, ended,
                            {"rows": int(k), "kept": None if kept is None else int(kept)})
        if tuned and kept is not None:
            self.stage.tuner.record(threads, k, ended - began)
            self.stage.tuner.publish(self.stats)

    # -------------------------------------------------------------- chunks
    def _run(self, want: int) -> None:
        """Process the next input rows, leaving output rows in ``carry``."""
        b = self.batch_size
        need = want * b - self.queue.n - self.at.n if b else want
        if self.groups:   # the input rows of ``want`` more groups
            need = max(1, (self.groups_out + want) * b - self.position)
        elif self.stage.compacts and self.rows_kept:
            # Steps drop rows: read as many more as the share kept so far says (a filter
            # keeping 2 rows in 3 otherwise needed five ever smaller calls per batch)
            need = max(b, -(-need * self.rows_read * 9 // (self.rows_kept * 8)))
        k = max(1, min(self.max_chunk, need))
        left, self.leftover = self.leftover, None
        if self.stream:
            if left is not None:   # the rows after a row that raised, still to run
                chunk = left
            else:
                try:
                    chunk = self.input.next(k)
                except OpError as e:
                    self._fail(e)
                    return
                if chunk is None:
                    self.finished = True
                    return
            lo, k = 0, chunk.n
            self.current = chunk
            row_values = (lambda cols: lambda r: [col_row(c, r) for c in cols])(chunk.columns)
        elif self.indexed:
            if left is not None:
                idx = left
            else:
                rows = None if self.indices_ended else self.indices.next(k)
                if rows is None:
                    self.finished = True
                    return
                idx = np.ascontiguousarray(rows.columns[0], dtype=np.int64)
            if b and len(idx) < k and (self.queue.n + k) % b == 0 and not self.stage.compacts:
                idx = self._whole_batches(idx, k)
            lo, k, chunk = 0, len(idx), None
            self.current = idx
            values = self.reader.row_values
            row_values = (lambda idx: lambda r: values(int(idx[r])))(idx)
        else:
            lo = self.position
            k = k if self.rows is None else min(k, self.rows - lo)
            if k <= 0:
                self.finished = True
                return
            chunk, row_values = None, self.row_values
        if not self.compiled:
            self.seen += k
            self.stage.timing["seen"] = self.stage.timing.get("seen", 0) + k
            self._reference(lo, k, row_values)
            self.current = None   # (not held past its run: the next chunk's memory)
            if self.stage.timing["seen"] >= self.stage.lazy_rows:
                self.compiled = True
                self.stats.chosen["compiled after rows"] = self.seen
            return
        kernel_lo, reader = lo, self.reader
        if chunk is not None:
            args = stream_args(chunk, self.plan.source.leaves)
        elif self.indexed:
            args = reader.args + [idx]
        elif reader.args is not None:
            args = reader.args
        else:
            kernel_lo, args = 0, reader.chunk(lo, k)
        self._buffers()
        if self.stream or reader.args is None:
            self.stage.signature(args)
        self._kernel(kernel_lo, k, args, lo, row_values)
        self.current = None

    def _whole_batches(self, idx: np.ndarray, k: int) -> np.ndarray:
        """Row numbers topped up to ``k`` (while the shuffle has more): the kernel's rows
        then end on a batch boundary, so no rows wait in the queue between calls and a
        saved state holds row numbers, not rows the kernel made."""
        parts, got = [idx], len(idx)
        while got < k:
            more = self.indices.next(k - got)
            if more is None or more.n == 0:
                self.indices_ended = more is None
                break
            parts.append(np.ascontiguousarray(more.columns[0], dtype=np.int64))
            got += len(parts[-1])
        return np.concatenate(parts) if len(parts) > 1 else idx

    def _kernel(self, kernel_lo: int, k: int, args: list, lo: int, row_values) -> None:
        stage = self.stage
        saved = self.state.copy() if len(self.state) else None   # (restored on a fallback)
        outs = [o[:k] for o in self.row_outputs] if stage.compacts else self._fresh_outputs(k)
        start = self.position
        kernel = stage.running()
        threads, tuned = self._threads(kernel)
        began = time.perf_counter()
        try:
            with kernel_section(threads):
                bad_row, done, n = self._call(kernel, kernel_lo, k, args, outs)
                if kernel is not stage.kernel:
                    stage.ran_serial(time.perf_counter() - began)
                at = None
                if not stage.compacts:   # (no passthrough: a kernel that keeps every row)
                    buffers = self.scratch + outs
                    outs = [buffers[i] for i in stage.results]
                elif bad_row < 0:
                    rows = self.kept[:n]
                    if self.gathers:   # carried as positions, gathered per pull
                        at = self._source_positions(rows, args, kernel_lo)
                    else:
                        outs = self._compacted(outs, rows, args, kernel_lo, k)
            reason = None
        except Exception as e:  # noqa: BLE001 - the reference re-run reports it precisely
            bad_row, reason = 0, f"the kernel raised {type(e).__name__}: {e}"
        self._called(threads, tuned, k, n if bad_row < 0 else None, began)
        if bad_row >= 0:
            if reason is None:
                reason = (f"row {start + int(bad_row)}: a function raised inside the kernel "
                          f"or returned a value that does not fit its column")
            if saved is not None:
                self.state[:] = saved
            self.stats.fallback(k, reason)
            self._reference(lo, k, row_values)
            return
        self.stats.kernel(k)
        if stage.compacts:
            self.rows_read += k
            self.rows_kept += int(n)
        self.position += k
        if done:
            self.finished = True
        n = int(n)
        if self.groups:   # places in the input's order (``position`` counts rows read)
            self.group_of.add(self.kept[:n] + start)
        if at is not None:
            self._accept_at(at)
        else:
            self._accept(Chunk([o[:n] if n < k else o for o in outs], n))

    def _source_positions(self, rows: np.ndarray, args: list, kernel_lo: int) -> np.ndarray:
        """The positions in the source arguments of the call's kept rows ``rows``."""
        return args[-1][rows] if self.indexed else rows + kernel_lo

    def _compacted(self, outs: list, rows: np.ndarray, args: list, kernel_lo: int,
                   k: int) -> list:
        """The element's columns of the kept rows: computed columns compacted, source
        columns gathered at the kept rows' source positions."""
        stage = self.stage
        buffers = self.scratch + outs
        base = len(buffers)
        at = self._source_positions(rows, args, kernel_lo) if stage.passthrough else None
        return [compact(buffers[i][:k], rows) if i < base else
                np.asarray(compact(args[stage.passthrough[i - base][0]], at),
                           stage.passthrough[i - base][1].dtype)
                for i in stage.results]

    def _gather(self, at: np.ndarray) -> list:
        """The element's columns at source positions ``at`` (a gathering stage)."""
        if self.gatherers is None:
            args = self.reader.args
            self.gatherers = [(RowGather(args[a]), spec.dtype) for a, spec in self.gathered]
        return [np.asarray(gather(at), dtype) for gather, dtype in self.gatherers]

    def _reference(self, lo: int, k: int, row_values) -> None:
        """Run rows ``lo..lo+k`` through the steps' reference behaviour, stopping after
        the first error (raised once the rows before it are delivered)."""
        elements = []
        kept = []   # their input positions (a masked batch's groups)
        done = 0
        began = time.perf_counter()
        try:
            for r in range(lo, lo + k):
                if self.finished:
                    break
                done += 1
                element = self._reference_row(pack_as(self.structure, row_values(r)))
                if element is not DROP:
                    elements.append(element)
                    kept.append(self.position + r - lo)
        except OpError as e:
            error = e
        else:
            error = None
        self.position += done if error is not None else k
        if error is not None and done < k and (self.stream or self.indexed):
            # The rows after the one that raised run next (an in-place source's rows
            # are read again from ``position``): a stream's rest of the chunk, a
            # shuffle's rest of the row numbers, both already taken from the input.
            current = self.current
            self.leftover = current.slice(done, current.n) if self.stream else current[done:]
        profiler.slice_(f"python (reference path): {self.stats.title}", "python", began,
                        time.perf_counter(), {"rows": done})
        specs_of = self.plan.steps[-1].out_spec if self.plan.steps else self.structure
        if elements:
            if self.groups:
                self.group_of.add(np.asarray(kept, np.int64))
            self._accept(chunk_from_elements(elements, specs_of))
        if error is not None:
            self._fail(error)

    def _fail(self, error: OpError) -> None:
        """An input error: raised after what is complete (a batch terminal drops the rows
        of the batch the failed element belonged to, as tf.data does)."""
        self._materialize()
        if self.groups:
            # The batch of the row that raised is lost, as where the function runs on
            # whole batches: its rows are dropped and reading goes on after it.
            b = self.batch_size
            g = max(0, self.position - 1) // b
            pending = self.group_of.take(self.group_of.n) if self.group_of.n else \
                np.empty(0, np.int64)
            before = int(np.searchsorted(pending, g * b))
            rows = self.queue.take(before) if before else None
            self.queue.clear()
            self.group_of.clear()
            if rows is not None:
                self.queue.add(rows)
                self.group_of.add(pending[:before])
            target = (g + 1) * b if self.rows is None else min(self.rows, (g + 1) * b)
            if self.indexed:   # the group's other row numbers are dropped with it
                skip = target - self.position
                left, self.leftover = self.leftover, None
                if left is not None:
                    if len(left) > skip:
                        self.leftover = left[skip:]
                    skip -= min(skip, len(left))
                while skip > 0:
                    more = self.indices.next(skip)
                    if more is None or more.n == 0:
                        break
                    skip -= more.n
            self.position = max(self.position, target)
            self.error, self.error_group = error, g
            return
        if self.plan.terminal is not None and self.queue.n:
            whole = self.queue.n // self.batch_size * self.batch_size
            kept = self.queue.take(whole) if whole else None
            self.queue.clear()
            if kept is not None:
                self.queue.add(kept)
        self.error = error

    def _reference_row(self, element) -> Any:
        """Apply the steps to one source element: the output, or DROP."""
        slot = 0
        for step in self.plan.steps:
            if step.kind == "row":
                element = step.reference(element)
            else:
                run = [int(v) for v in self.state[slot + 1:slot + 1 + step.run_slots]]
                element, counter, finished = step.reference(element, int(self.state[slot]), *run)
                self.state[slot] = counter
                slot += 1 + step.run_slots
                if finished:
                    self.finished = True
            if element is DROP:
                return DROP
        return element

    # ----------------------------------------------------------- assembly
    def _accept(self, chunk: Chunk) -> None:
        self._materialize()
        self.queue.add(chunk)

    def _accept_at(self, at: np.ndarray) -> None:
        if self.queue.n:   # rows wait (a restore, the reference path): keep the order
            self.queue.add(Chunk(self._gather(at), len(at)))
        else:
            self.at.add(at)

    def _materialize(self) -> None:
        """Positions still carried become rows at the end of the row queue."""
        if self.at.n:
            at = self.at.take(self.at.n)
            self.queue.add(Chunk(self._gather(at), len(at)))

    def _from_carry(self, want: int) -> Chunk | None:
        if self.groups:
            return self._from_groups(want)
        if self.at.n and not self.queue.n:
            return self._from_positions(want)
        self._materialize()
        queue = self.queue
        if queue.n == 0:
            return None
        b = self.batch_size
        if not b:
            return queue.take(min(want, queue.n))
        count = queue.whole_groups(b, want)
        if count == 0:
            return None
        rows = queue.take(count * b)
        return Chunk(self._batches(rows.columns, count), count)

    def _from_positions(self, want: int) -> Chunk | None:
        """Whole batches (rows without a batch terminal) gathered from the source at
        the carried positions: those of the first kernel call's piece as a view of its
        positions, else as many as wanted across pieces (joined positions, 8 bytes a
        row, then one gather)."""
        at, b = self.at, self.batch_size
        if not b:
            n = min(want, at.n, self.gather_rows)
            return Chunk(self._gather(at.take(n)), n)
        if at.n < b or want < 1:
            return None
        inside = at.first() // b
        count = min(want, inside if inside else at.n // b, max(1, self.gather_rows // b))
        cols = self._gather(at.take(count * b))
        return Chunk(self._batches(cols, count), count)

    def _from_groups(self, want: int) -> Chunk | None:
        """The next complete groups' batches (a masked batch): each holds the kept rows
        of ``batch_size`` input rows, empty where none was kept; the last, partial group
        once the input ended, unless ``drop_remainder``."""
        b = self.batch_size
        last = self.position // b
        if self.finished and not self.plan.terminal.drop_remainder:
            last = -(-self.position // b)
        if self.error_group is not None:
            last = min(last, self.error_group)
        g0 = self.groups_out
        # (the groups of at most gather_rows kept rows, at least one: the rows gathered
        # per pull stay in the cache, as a gathering stage's batches do, _from_positions)
        count = min(want, last - g0, self._groups_within(self.gather_rows, g0))
        if count <= 0:
            return None
        end = (g0 + count) * b
        m = 0
        for piece in self.group_of.pieces:   # the pending rows of these groups
            inside = int(np.searchsorted(piece, end))
            m += inside
            if inside < len(piece):
                break
        if m == 0:
            at = np.empty(0, np.int64)
            columns = [np.empty((0,) + sp.shape, sp.dtype) for sp in self._result_specs()]
        else:
            at = self.group_of.take(m)
            if self.at.n and not self.queue.n:
                columns = self._gather(self.at.take(m))
            else:
                self._materialize()
                columns = self.queue.take(m).columns
        self.groups_out += count
        if count == 1:   # (wide rows: a group a pull) the group is every row taken
            return Chunk([RowList([c]) for c in columns], 1)
        starts = np.searchsorted(at, (g0 + np.arange(count + 1)) * b)
        starts[-1] = m
        bounds = list(zip(starts[:-1].tolist(), starts[1:].tolist()))
        return Chunk([RowList(c[lo:hi] for lo, hi in bounds) for c in columns], count)

    def _groups_within(self, rows: int, g0: int) -> int:
        """How many groups from group ``g0`` on hold at most ``rows`` pending kept rows
        in all (at least 1; a large number when every pending row fits)."""
        if self.group_of.n <= rows:
            return 1 << 62
        for piece in self.group_of.pieces:   # the position of pending row ``rows``
            if rows < len(piece):
                return max(1, int(piece[rows]) // self.batch_size - g0)
            rows -= len(piece)
        return 1 << 62

    def _result_specs(self) -> list:
        stage = self.stage
        specs = (list(stage.scratch_specs) + list(stage.out_specs)
                 + [spec for _, spec in stage.passthrough])
        return [specs[i] for i in stage.results]

    def _batches(self, columns: list, count: int) -> list:
        term = self.plan.terminal
        if not term.pads:
            return batch_columns(columns, count, self.batch_size, copy=False)
        b = self.batch_size
        batches = [term.assemble([c[j * b:(j + 1) * b] for c in columns]) for j in range(count)]
        return [RowList(batch[i] for batch in batches) for i in range(len(columns))]

    def _flush(self) -> Chunk | None:
        if self.groups:   # every group went out in _from_groups (or was dropped)
            self.queue.clear()
            self.at.clear()
            self.group_of.clear()
            return None
        self._materialize()
        queue = self.queue
        if queue.n == 0 or not self.batch_size or self.plan.terminal.drop_remainder:
            queue.clear()
            return None
        cols = [np.ascontiguousarray(c) for c in queue.take(queue.n).columns]
        if self.plan.terminal.pads:
            return Chunk([RowList([c]) for c in self.plan.terminal.assemble(cols)], 1)
        return Chunk([c[None] for c in cols], 1)
