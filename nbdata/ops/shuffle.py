"""``shuffle``: tf.data's buffer shuffle driven by counter-based random numbers."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata import state_check
from nbdata.chunks import Chunk, PackedRows, RowList, StringColumn, read_only, row_bytes
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata.kernels.compact import gather_spans
from nbdata.kernels.shuffle import (drain_plan, draw_slots, replace_plan, replace_values,
                                    shuffle_row_numbers, swap_rows)
from nbdata.kernels.threads import shared_pool
from nbdata.ops.fusion import IndexedSource
from nbdata.ops.node import UNKNOWN, NotFusable, UnaryNode, arg_field, new_resource_key
from nbdata.ops.runtime import ChunkIter, InputChunks, PositionChunks
from nbdata.spec import TensorSpec, flatten, string

RANDOM_BLOCK = 1024
SHUFFLE_STREAM = 0x5348554646  # "SHUFF": keeps shuffle draws apart from other ops' streams


class EpochCounter:
    """Hands out the iteration number of each new iteration of a pipeline holding a random
    op (the op's run-state resource): each iteration of a dataset reshuffles."""

    def __init__(self, reshuffle: bool):
        self.reshuffle = reshuffle
        self.next = 0
        self._lock = threading.Lock()

    def next_epoch(self) -> int:
        if not self.reshuffle:
            return 0
        with self._lock:
            epoch, self.next = self.next, self.next + 1
            return epoch


@dataclasses.dataclass(frozen=True, eq=False)
class Shuffle(UnaryNode):
    """Fills a buffer of ``buffer_size`` elements, then repeatedly outputs a random
    buffer slot and refills it with the next input element. Draw ``k`` of epoch ``e``
    picks slot ``(draw(key(seed, SHUFFLE_STREAM, e), k) * len(buffer)) >> 64``
    (``nbdata/kernels/shuffle.py``: a SplitMix64 stream keyed by the epoch's key)."""

    buffer_size: Any = arg_field()
    seed: Any = arg_field()       # None: derived from the pipeline seed at run time
    reshuffle_each_iteration: bool = arg_field()
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "shuffle"
    seeded = True

    def _size(self, ctx) -> int:
        size = int(ctx.value(self.buffer_size))
        if size == UNKNOWN:   # TF's sentinel: a buffer of the whole input (counted when opened)
            return size
        if size <= 0:
            raise InvalidArgumentError(f"shuffle: buffer_size must be positive, got {size}", self.op)
        return size

    def epoch_key(self, ctx, epoch: int | None = None) -> tuple[int, int]:
        """(epoch, key) of this run of the shuffle (or of ``epoch``, when restoring)."""
        if epoch is None:
            epoch = ctx.epoch(self, self.reshuffle_each_iteration)
        return epoch, int(nd_random.key(ctx.op_seed(self), SHUFFLE_STREAM, epoch))

    def open_chunks(self, ctx, state=None):
        return ShuffleChunks(self, ctx, state)

    def random_access(self) -> str | None:
        reason = self.input.random_access()
        if reason is not None:
            return reason
        return None if self.input.cardinality() >= 0 else "a shuffle of a dataset of unknown length"

    def global_shuffle_refusal(self) -> str | None:
        # As tf.data: at() reads through a buffer shuffle (its run's order), but a global
        # shuffle of one is refused (FailedPreconditionError): shuffle it globally instead.
        return "shuffle(buffer_size)"

    def gather(self, ctx, rows) -> Chunk:
        """Positions of this run's shuffled order (under a repeat, each epoch's; ``at``
        reads the dataset's first iteration), gathered from the input: the order is the
        buffer shuffle of the input's row numbers, as iterating gives it, computed in
        full once per epoch (O(rows) time and 8 bytes a row) and kept."""
        return self.input.gather(ctx, self._order(ctx)[np.asarray(rows, np.int64)])

    def _order(self, ctx) -> np.ndarray:
        n = self.input.cardinality()
        _, key = self.epoch_key(ctx)
        held = ctx.resource((self.resource_key, "order"), dict)   # {epoch key: order}, the last
        order = held.get(key)
        if order is None:
            rows = RowNumbers(self, ctx, n, None)   # (the same draws as iterating)
            try:
                chunk = rows.next(n)
            finally:
                rows.close()
            order = np.zeros(0, np.int64) if chunk is None else chunk.columns[0]
            held.clear()
            held[key] = order
        return order


def whole_input(it, state) -> tuple:
    """For a buffer of the whole input (``buffer_size`` UNKNOWN): the input, read to its
    end to count its rows and replayed, and that count as the buffer size. Restored,
    the size is the saved one (the input resumes from its saved state)."""
    if state is not None:
        return it, state_check.integer(state, "size", 1)
    start = it.save()
    chunks = []
    while True:
        chunk = it.next(1 << 16)
        if chunk is None:
            break
        if chunk.n:
            chunks.append(chunk)
    return ReplayChunks(it, chunks, start), max(1, sum(c.n for c in chunks))


class ReplayChunks(InputChunks):
    """The chunks an input gave, again. State: the input's state before them while none
    was taken, after them once all were (the buffer takes them all in its first fill)."""

    def __init__(self, it, chunks: list, start):
        self.it, self.chunks, self.start, self.taken = it, chunks, start, 0

    def next(self, want: int):
        if not self.chunks:
            return None
        chunk = self.chunks[0]
        if chunk.n > want:
            self.chunks[0] = chunk.slice(want, chunk.n)
            chunk = chunk.slice(0, want)
        else:
            self.chunks.pop(0)
        self.taken += chunk.n
        return chunk

    def save(self):
        if self.taken == 0:
            return self.start
        if not self.chunks:
            return self.it.save()
        raise UnimplementedError("shuffle: cannot save while its whole-input buffer is filling")


def _store_kind(spec) -> str:
    """How the buffer keeps a leaf: "dense" numbers of a fixed shape, "packed" numbers of
    a known rank whose sizes vary (token sequences: :class:`PackedStore`), else
    "object" (one Python object per row)."""
    if spec.dtype is not string and spec.shape is not None and None not in spec.shape:
        return "dense"
    if spec.dtype is not string and spec.shape is not None and spec.dtype.kind in "biuf":
        return "packed"
    return "object"


class PackedStore:
    """A shuffle buffer's rows of varying size held in one growing buffer (the arena),
    each buffered row a dense handle ``(start, count, *shape)``: the handles move through
    the buffer as fixed-size rows do (the same swap kernels), and rows out are gathered
    from the arena into one packed column, with no Python object per row. The arena is
    compacted to the live rows when it grows past twice their size."""

    def __init__(self, spec):
        self.dtype, self.ndim = np.dtype(spec.dtype), len(spec.shape)
        self.arena = np.empty(0, self.dtype)
        self.used = 0

    def handles(self, column) -> np.ndarray:
        """Handles of a column's rows, their values appended to the arena."""
        if not isinstance(column, PackedRows):
            rows = [np.asarray(v, self.dtype) for v in column]
            if any(r.ndim != self.ndim for r in rows):
                raise InvalidArgumentError(f"shuffle: a row of rank other than {self.ndim}",
                                           "shuffle")
            shapes = np.array([r.shape for r in rows], np.int64).reshape(len(rows), self.ndim)
            column = PackedRows.empty(shapes, self.dtype, self.ndim)
            data, offsets, _ = column.packed
            for j, r in enumerate(rows):
                data[offsets[j]:offsets[j + 1]] = r.reshape(-1)
        data, offsets, shapes = column.packed
        lo, hi = int(offsets[0]), int(offsets[-1])
        self._reserve(hi - lo)
        self.arena[self.used:self.used + hi - lo] = data[lo:hi]
        out = np.empty((len(shapes), 2 + self.ndim), np.int64)
        out[:, 0] = offsets[:-1] - lo + self.used
        out[:, 1] = np.diff(offsets)
        out[:, 2:] = shapes
        self.used += hi - lo
        return out

    def _reserve(self, extra: int) -> None:
        if self.used + extra > len(self.arena):
            grown = np.empty(max(2 * len(self.arena), self.used + extra, 1 << 12), self.dtype)
            grown[:self.used] = self.arena[:self.used]
            self.arena = grown

    def rows(self, handles: np.ndarray) -> PackedRows:
        """The rows of ``handles``, as a fresh packed column."""
        counts = np.ascontiguousarray(handles[:, 1])
        offsets = np.zeros(len(handles) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), self.dtype)
        gather_spans(self.arena, np.ascontiguousarray(handles[:, 0]), counts, out, offsets)
        return PackedRows(out, offsets, np.ascontiguousarray(handles[:, 2:]))

    def compact(self, live: np.ndarray) -> None:
        """Keeps only the rows of the ``live`` handles (rewritten in place) when the arena
        holds more than twice their values."""
        need = int(live[:, 1].sum()) if len(live) else 0
        if self.used <= 2 * need + (1 << 16):
            return
        packed = self.rows(live)
        data, offsets, _ = packed.packed
        self.arena, self.used = data, len(data)
        live[:, 0] = offsets[:-1]

    def objects(self, handles: np.ndarray) -> np.ndarray:
        """The rows of ``handles`` as an object array (what a saved state holds)."""
        rows = self.rows(handles)
        out = np.empty(len(handles), dtype=object)
        for j in range(len(handles)):
            out[j] = rows[j]
        return out


def _as_store(column, kind: str) -> np.ndarray:
    if kind == "dense" or (isinstance(column, np.ndarray) and column.ndim == 1):
        return np.asarray(column)
    if isinstance(column, StringColumn):
        return column.to_objects()
    out = np.empty(len(column), dtype=object)
    for j, v in enumerate(column):
        out[j] = v
    return out


def _layout(node) -> tuple:
    """(leaf specs, their store kinds, bytes of a row or None unless every leaf is dense)
    of a shuffle buffer's elements: made once per node."""
    found = node.__dict__.get("_layout")
    if found is None:
        specs = list(flatten(node.spec))
        kinds = [_store_kind(s) if isinstance(s, TensorSpec) else "object" for s in specs]
        size = row_bytes(node.spec) if all(k == "dense" for k in kinds) else None
        found = node.__dict__["_layout"] = (specs, kinds, size)
    return found


class ShuffleChunks(InputChunks):
    """tf.data's buffer shuffle on chunks: the same draws, and so the same order, as the
    element iterator, computed a chunk at a time as row plans (``kernels/shuffle.py``)
    that every column is gathered with.

    State: the epoch (which fixes the draws), the draws made, the buffer's rows (at most
    ``buffer_size``; the order of the rows left once the input ended), the input's state.
    Over a source that fetches rows by position, the buffered rows' positions instead
    of the rows (and the rows read so far), so a state stays small.
    """

    def __init__(self, node, ctx, state):
        self.ctx = ctx
        self.size = node._size(ctx)
        self.specs, self.kinds, row_size = _layout(node)
        self.packed = {k: PackedStore(s) for k, (s, kind) in enumerate(zip(self.specs, self.kinds))
                       if kind == "packed"}
        if state is not None:
            state_check.record(state, "epoch", "size", "draws", "filled", "ended", "store",
                               "order", "input")
        self.epoch, self.key = node.epoch_key(ctx, None if state is None else
                                              state_check.integer(state, "epoch", 0, state_check.MAX_EPOCH))
        self.key = np.uint64(self.key)
        inner = None if state is None else state_check.nested(state, "input")
        self.it = ctx.open_chunks(node.input, inner)
        if self.size == UNKNOWN:
            self.it, self.size = whole_input(self.it, state)
        # Over a source that fetches its rows by position (arrays, also read as they go;
        # Arrow tables and files), a saved state holds the buffered rows' positions, and
        # a restore fetches the rows again.
        self.positions: np.ndarray | None = None
        self.consumed = 0
        if not node.input.inputs and \
                node.input.random_access() is None and self.size != UNKNOWN:
            self.positions = np.zeros(self.size, np.int64)
            if state is not None and state.get("positions") is not None:
                state = self._fetch(node, ctx, state)
        saved = state if state is not None else {"filled": 0, "draws": 0, "ended": False,
                                                 "store": None, "order": None}
        if state is None:
            self.filled = self.draws = 0
            self.ended = False
        else:
            self.filled = state_check.integer(saved, "filled")   # within the size: _check_state
            self.draws = state_check.integer(saved, "draws")
            self.ended = state_check.flag(saved, "ended")
        self.store: list | None = None   # per leaf: array of capacity ``size``
        # The buffer's bytes in the pipeline's memory budget: all ``size`` rows at the
        # start when they have a fixed size (ResourceExhaustedError when they cannot fit),
        # else as it fills.
        self.memory, self.stats, self.label = ctx.memory, ctx.stats(node), node.label
        self.held = 0
        fixed = row_size is not None
        if fixed:
            need = self.size * row_size
            self.memory.need(node.op, node.label, need, f"a buffer of {self.size:,} rows")
            self._hold(need)
        self.fixed = fixed
        if state is not None:
            self._check_state(node, state)
        if saved["store"] is not None:
            cols = self._to_store(saved["store"])
            self._allocate(cols)
            for buf, col in zip(self.store, cols):
                buf[:self.filled] = col
        # The slots of the rows left once the input ended: each a filled slot.
        order = state_check.int_array(saved["order"], "order", 0, self.filled - 1, none=True)
        self.order = None if order is None else np.array(order, np.int64)

    def _fetch(self, node, ctx, state: dict) -> dict:
        """The saved state with its buffer's rows fetched from their saved positions."""
        n = node.input.cardinality()
        positions = state_check.int_array(state["positions"], "positions", 0, max(n - 1, 0))
        self.consumed = state_check.integer(state, "consumed", 0, n)
        if len(positions) > self.size:
            raise InvalidArgumentError(f"restore: the state of {node.label} does not fit this "
                                       f"pipeline: {len(positions)} rows in a buffer of {self.size}",
                                       node.op)
        self.positions[:len(positions)] = positions
        if not len(positions):
            return dict(state, store=None)
        chunk = node.input.gather(ctx, np.asarray(positions, np.int64))
        return dict(state, store=[_as_store(c, "object" if kind == "packed" else kind)
                                  for c, kind in zip(chunk.columns, self.kinds)])

    def _check_state(self, node, state: dict) -> None:
        """A saved buffer fits this shuffle: as large (its size may come from a placeholder
        fed another value), holding rows of this pipeline's element."""
        def refuse(what: str):
            return InvalidArgumentError(
                f"restore: the state of {node.label} does not fit this pipeline: {what}", node.op)

        saved_size = state_check.integer(state, "size", 1)
        if saved_size != self.size:
            raise refuse(f"buffer_size {saved_size} saved, {self.size} here")
        store, order = state["store"], state["order"]
        if not 0 <= self.filled <= self.size or (isinstance(order, np.ndarray) and not
                                                 0 <= len(order) <= self.filled):
            raise refuse(f"{self.filled} rows in a buffer of {self.size}")
        if store is None:
            if self.filled:
                raise refuse(f"{self.filled} rows in a buffer that holds none")
            return
        if not isinstance(store, list) or not all(isinstance(c, np.ndarray) and c.ndim >= 1
                                                  for c in store):
            raise state_check.StateFieldError("store", store, "expected the buffer's columns")
        if len(store) != len(self.specs):
            raise refuse(f"its buffer holds elements of {len(store)} components, this "
                         f"pipeline's have {len(self.specs)}")
        for k, (col, spec, kind) in enumerate(zip(store, self.specs, self.kinds)):
            col = np.asarray(col)
            if len(col) != self.filled or (kind == "dense" and (
                    col.dtype != spec.dtype or col.shape[1:] != tuple(spec.shape))):
                raise refuse(f"its buffer's component {k} holds {col.dtype} rows of shape "
                             f"{list(col.shape[1:])}, this pipeline's elements have {spec}")

    def _to_store(self, columns: list) -> list:
        """Columns as the buffer keeps them (a packed leaf's rows as arena handles)."""
        return [self.packed[k].handles(c) if k in self.packed else _as_store(c, kind)
                for k, (c, kind) in enumerate(zip(columns, self.kinds))]

    def _allocate(self, like: list) -> None:
        self.store = [np.empty((self.size,) + np.shape(c)[1:], np.asarray(c).dtype) for c in like]

    def _hold(self, nbytes: int) -> None:
        self.memory.hold(self.stats, nbytes)
        self.held += nbytes

    def close(self) -> None:
        self.memory.release(self.stats, self.held)
        self.held = 0
        self.it.close()

    def save(self) -> dict:
        positions = None
        if self.positions is not None:
            store, positions = None, self.positions[:self.filled].copy()
        else:
            store = None if self.store is None else [
                self.packed[k].objects(b[:self.filled]) if k in self.packed else b[:self.filled].copy()
                for k, b in enumerate(self.store)]
        return {"epoch": self.epoch, "size": self.size, "draws": self.draws,
                "filled": self.filled, "ended": self.ended, "store": store,
                "order": None if self.order is None else self.order.copy(),
                "input": self.it.save(), "positions": positions, "consumed": self.consumed}

    def _output(self, columns: list) -> Chunk:
        out = []
        for k, (c, kind) in enumerate(zip(columns, self.kinds)):
            if k in self.packed:
                out.append(self.packed[k].rows(c))
                continue
            out.append(RowList(c.tolist()) if kind == "object" and c.dtype == object and
                       any(isinstance(v, np.ndarray) for v in c[:1]) else c)
        if self.packed and self.store is not None:   # the arena keeps the live rows only
            for k, packed in self.packed.items():
                packed.compact(self.store[k][:self.filled])
        return Chunk(out, len(columns[0]) if columns else 0)

    def _fill(self) -> None:
        while self.filled < self.size and not self.ended:
            chunk = self.it.next(self.size - self.filled)
            if chunk is None:
                self.ended = True
                break
            if chunk.n == 0:
                continue
            cols = self._to_store(chunk.columns)
            if not self.fixed:   # rows of their own sizes: counted as they come
                nbytes = chunk.nbytes
                self.memory.need("shuffle", self.label, nbytes,
                                 f"its buffer, filled to {self.filled + chunk.n:,} rows,")
                self._hold(nbytes)
            if self.store is None:
                self._allocate(cols)
            for buf, col in zip(self.store, cols):
                buf[self.filled:self.filled + chunk.n] = col
            if self.positions is not None:
                self.positions[self.filled:self.filled + chunk.n] = \
                    np.arange(self.consumed, self.consumed + chunk.n)
                self.consumed += chunk.n
            self.filled += chunk.n

    def next(self, want: int):
        if self.filled < self.size and not self.ended:
            self._fill()
        if not self.ended:
            chunk = self.it.next(want)
            if chunk is not None and chunk.n:
                return self._replace(chunk)
            if chunk is None:
                self.ended = True
            else:
                return self._output([c[:0] for c in self.store])
        return self._drain(want)

    def _replace(self, chunk: Chunk) -> Chunk:
        """One output per incoming row, the buffer staying full: numeric columns swap
        rows through the buffer in one pass; object columns follow a row plan."""
        m = chunk.n
        incoming = self._to_store(chunk.columns)
        start = np.uint64(self.draws)
        self.draws += m
        if self.positions is not None:   # the same draws move the rows' positions
            replace_values(self.key, start, self.positions,
                           np.arange(self.consumed, self.consumed + m, dtype=np.int64),
                           np.empty(m, np.int64))
            self.consumed += m
        out, plan = [], None
        if len(self.store) == 1 and self.store[0].ndim == 1 and self.store[0].dtype != object:
            o = np.empty(m, self.store[0].dtype)   # one column of single values (row numbers)
            replace_values(self.key, start, self.store[0],
                           read_only(np.ascontiguousarray(incoming[0])), o)
            return self._output([o])
        for buf, col in zip(self.store, incoming):
            if buf.dtype != object:
                width = int(np.prod(buf.shape[1:]))
                if plan is None:
                    with self.ctx.kernels():
                        plan = (draw_slots(self.key, start, m, self.size),)
                slots = plan[0]
                o = np.empty((m,) + buf.shape[1:], buf.dtype)
                rows = read_only(np.ascontiguousarray(col).reshape(m, width))  # one signature
                swap_rows(buf.reshape(self.size, width), rows, slots, o.reshape(m, width))
                out.append(o)
                continue
            owner = np.arange(self.size, dtype=np.int64)
            src = replace_plan(self.key, start, m, owner)
            from_store = src < self.size
            o = np.empty(m, dtype=object)
            o[from_store] = buf[src[from_store]]
            o[~from_store] = col[src[~from_store] - self.size]
            slots_taken = np.flatnonzero(owner >= self.size)
            buf[slots_taken] = col[owner[slots_taken] - self.size]
            out.append(o)
        return self._output(out)

    def _drain(self, want: int):
        """Outputs after the input ended: draws over the shrinking buffer."""
        if self.order is None:
            self.order = np.arange(self.filled, dtype=np.int64)
        left = len(self.order) if self.order is not None else 0
        if left == 0 or self.store is None:
            return None
        m = min(want, left)
        src = drain_plan(self.key, np.uint64(self.draws), m, self.order, left)
        self.draws += m
        self.order = self.order[:left - m].copy()
        return self._output([buf[src] for buf in self.store])


@dataclasses.dataclass(frozen=True, eq=False)
class IndexShuffle(Shuffle):
    """A shuffle over an input whose rows can be fetched by position (arrays, a range):
    the buffer shuffles row numbers (:class:`RowNumbers`), whose rows are then gathered.
    Same order as the buffer shuffle of the rows themselves; its state holds counters and
    at most a copy of the buffer's row numbers, never rows.
    Made by the ``shuffle_indices`` rewrite pass."""

    op = "shuffle"

    def describe(self) -> str:
        return super().describe()[:-1] + ", over row numbers)"

    def _rows(self, ctx) -> int:
        return self.input.cardinality()

    def open_chunks(self, ctx, state=None):
        return IndexShuffleChunks(self, ctx, state)

    fusion_role = "source"

    def fusion_source(self, planner):
        return _indexed(self, planner, lambda ctx, state: RowNumbers(self, ctx, self._rows(ctx), state))


class RowNumbers(ChunkIter):
    """The buffer shuffle of the row numbers ``0 .. n-1``: the order of a
    :class:`ShuffleChunks` reading ``range(n)``, each pull made by one compiled call
    (``kernels/shuffle.py``: ``shuffle_row_numbers``) into a fresh array.

    State: the epoch, the buffer size, the draws made, and the buffer (with the slots
    left once the input ended) as it was at draw ``base``, a copy taken every
    :data:`REPLAY_DRAWS` draws and never written again: saving, before every pull of
    the consumer, copies nothing, and a restore replays the draws since ``base`` (under
    a millisecond). A state holds row numbers, never rows."""

    def __init__(self, node, ctx, n: int, state: dict | None):
        size = node._size(ctx)
        self.n, self.size = n, max(1, n) if size == UNKNOWN else size
        held = self.held = min(self.size, n)
        self.replacing = n - held   # draws made while the input lasts
        self.replay = max(REPLAY_DRAWS, REPLAY_PER_ROW * held)
        if state is not None and "base" not in state:
            state = _row_numbers_state(state, n, held)   # saved by ShuffleChunks
        if state is not None:
            state_check.record(state, "epoch", "size", "draws", "base", "buffer", "order")
        self.epoch, key = node.epoch_key(ctx, None if state is None else state_check.integer(
            state, "epoch", 0, state_check.MAX_EPOCH))
        self.key = np.uint64(key)
        self.memory, self.stats = ctx.memory, ctx.stats(node)
        self.held_bytes = 16 * held   # the buffer and the drained slots' order
        self.memory.need(node.op, node.label, self.held_bytes, f"a buffer of {held:,} rows")
        self.memory.hold(self.stats, self.held_bytes)
        self.buffer = np.empty(held, np.int64)   # (the first call fills it)
        self.order = np.empty(held, np.int64)
        self.draws = self.base = 0
        self.base_buffer = self.base_order = None
        if state is not None:
            self._restore(node, state)

    def _restore(self, node, state: dict) -> None:
        saved = state_check.integer(state, "size", 1)
        if saved != self.size:
            raise InvalidArgumentError(f"restore: the state of {node.label} does not fit this "
                                       f"pipeline: buffer_size {saved} saved, {self.size} here",
                                       node.op)
        draws = state_check.integer(state, "draws", 0, self.n)
        base = state_check.integer(state, "base", 0, draws)
        buffer = state_check.int_array(state["buffer"], "buffer", 0, self.n - 1, none=base == 0)
        order = state_check.int_array(state["order"], "order", 0, self.held - 1,
                                      none=base <= self.replacing)
        for name, value in (("buffer", buffer), ("order", order)):
            if value is not None and len(value) != self.held:
                raise state_check.StateFieldError(name, value,
                                                  f"expected {self.held} row numbers")
        if buffer is not None:
            self.buffer[:] = buffer
        if order is not None:
            self.order[:] = order
        self.draws = self.base = base
        self.base_buffer, self.base_order = buffer, order
        while self.draws < draws:   # the draws since the copy, made again
            self.next(min(draws - self.draws, 1 << 16))

    def next(self, want: int):
        t = self.draws
        m = min(want, self.n - t)
        if m <= 0:
            return None
        out = np.empty(m, np.int64)
        shuffle_row_numbers(self.key, t, self.n, self.size, self.buffer, self.order, out)
        self.draws = t + m
        if self.draws - self.base >= self.replay:
            self.base, self.base_buffer = self.draws, self.buffer.copy()
            self.base_order = self.order.copy() if self.draws > self.replacing else None
        return Chunk([out], m)

    def save(self) -> dict:
        return {"epoch": self.epoch, "size": self.size, "draws": self.draws, "base": self.base,
                "buffer": self.base_buffer, "order": self.base_order}

    def close(self) -> None:
        self.memory.release(self.stats, self.held_bytes)
        self.held_bytes = 0


# Draws a restore of RowNumbers replays at most: REPLAY_DRAWS, or REPLAY_PER_ROW per
# buffered row where that is more (a copy of the buffer every that many draws).
REPLAY_DRAWS = 1 << 16
REPLAY_PER_ROW = 8


def _row_numbers_state(state: dict, n: int, held: int) -> dict:
    """A state of the row numbers' shuffle as :class:`ShuffleChunks` saved it (the buffer's
    row numbers, and the slots left once the input ended), as :class:`RowNumbers` saves
    it: the buffer as of the last draw."""
    state_check.record(state, "epoch", "size", "draws", "filled", "store", "order")
    store = state["store"]
    if store is None or state["draws"] == 0:   # nothing drawn yet: the first rows, in order
        return {"epoch": state["epoch"], "size": state["size"], "draws": 0, "base": 0,
                "buffer": None, "order": None}
    if not isinstance(store, list) or len(store) != 1:
        raise state_check.StateFieldError("store", store, "expected the buffer's row numbers")
    order = state["order"]
    if isinstance(order, np.ndarray) and order.ndim == 1 and len(order) < held:
        order = np.concatenate([order, np.zeros(held - len(order), order.dtype)])
    return {"epoch": state["epoch"], "size": state["size"], "draws": state["draws"],
            "base": state["draws"], "buffer": store[0], "order": order}


class IndexShuffleChunks(ChunkIter):
    """Shuffled row numbers (:class:`RowNumbers`), gathered."""

    def __init__(self, node: IndexShuffle, ctx, state):
        self.node, self.ctx = node, ctx
        self.order = RowNumbers(node, ctx, node._rows(ctx), state)

    def next(self, want: int):
        rows = self.order.next(want)
        if rows is None:
            return None
        return self.node.input.gather(self.ctx, rows.columns[0])

    def save(self) -> dict:
        return self.order.save()

    def close(self) -> None:
        self.order.close()


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalShuffle(UnaryNode):
    """A full-epoch random permutation of a random-access input, in O(1) memory: output
    ``i`` is input row ``permutation(key, i)``, computed on its own (a keyed Feistel
    bijection of ``range(n)``)."""

    seed: Any = arg_field()
    reshuffle_each_iteration: bool = arg_field()
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "global_shuffle"
    seeded = True

    def epoch_key(self, ctx, epoch: int | None = None) -> tuple[int, int]:
        if epoch is None:
            epoch = ctx.epoch(self, self.reshuffle_each_iteration)
        return epoch, int(nd_random.key(ctx.op_seed(self), GLOBAL_STREAM, epoch))

    def open_chunks(self, ctx, state=None):
        return GlobalShuffleChunks(self, ctx, state)

    fusion_role = "source"

    def fusion_source(self, planner):
        return _indexed(self, planner, lambda ctx, state: GlobalShuffleChunks(self, ctx, state, False))


GLOBAL_STREAM = 0x474C4F42  # "GLOB"


def _run_parts(fn, ranges: list) -> None:
    """``fn(lo, hi)`` for each range on nbdata's shared pool (a permutation's parts)."""
    pool = shared_pool()
    for f in [pool.submit(fn, lo, hi) for lo, hi in ranges]:
        f.result()


class GlobalShuffleChunks(PositionChunks):
    """Consecutive positions of the permutation, gathered (or, for a fused stage reading
    the input in place, the row numbers only). State: epoch and position."""

    def __init__(self, node: GlobalShuffle, ctx, state, gather: bool = True):
        self.node, self.ctx, self.gather = node, ctx, gather
        self.epoch, self.key = node.epoch_key(ctx, None if state is None else
                                              state_check.integer(state, "epoch", 0, state_check.MAX_EPOCH))
        super().__init__(node.cardinality(), 0 if state is None else state_check.integer(state, "pos"))

    def rows(self, lo: int, hi: int) -> Chunk:
        rows = nd_random.permutation(self.key, lo, hi - lo, self.n, _run_parts)
        return self.node.input.gather(self.ctx, rows) if self.gather else Chunk([rows], hi - lo)

    def save(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}


def _indexed(node, planner, open_indices) -> IndexedSource:
    """The fused-stage source of a shuffle over row numbers: its input read in place at
    the shuffled rows (NotFusable when the input is not a source read in place)."""
    source = node.input.fusion_source(planner)
    if not source.in_place or source.indexed:
        raise NotFusable(f"{node.input.op} is not read in place")
    return IndexedSource(node, source, open_indices)
