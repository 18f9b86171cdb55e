"""``interleave``: cycle over datasets made from input elements, ``block_length`` at a time."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.chunks import concat_chunks
from nbdata.errors import OpError
from nbdata.ops.function import UserFunction
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import BackgroundChunks, ChunkIter, RowReader, skip_rows


class _Failed:
    """A dataset opened ahead whose input element failed: raises that error in its
    turn (tf.data reports an input element's error in the element's place, and reading
    goes on with the next input element)."""

    def __init__(self, error: BaseException):
        self.error = error

    def close(self) -> None:
        pass


@dataclasses.dataclass(frozen=True, eq=False)
class Interleave(UnaryNode):
    fn: UserFunction = arg_field()
    cycle_length: Any = arg_field()
    block_length: int = arg_field()
    num_parallel_calls: Any = None
    deterministic: Any = None
    op = "interleave"

    @property
    def spec(self):
        return self.fn.output_spec.element_spec

    def cardinality(self) -> int:
        # tf.data's parallel interleave is infinite over an infinite input; otherwise
        # (and always without num_parallel_calls) the length is unknown
        if self.num_parallel_calls is not None and self.input.cardinality() == INFINITE:
            return INFINITE
        return UNKNOWN

    def cycle(self, ctx) -> int:
        """``cycle_length``; None or AUTOTUNE follow tf.data's rule over the number of
        cores (the thread budget): all of them without ``num_parallel_calls``, a third
        (rounded up) with AUTOTUNE calls, else ``num_parallel_calls`` up to that number."""
        cycle = self.cycle_length
        if cycle is None or cycle == AUTOTUNE:
            cores = ctx.budget.total
            calls = self.num_parallel_calls
            if calls is None:
                cycle = cores
            elif calls == AUTOTUNE:
                cycle = (cores + 2) // 3
            else:
                cycle = min(int(calls), cores)
        return int(cycle)

    def open_chunks(self, ctx, state=None):
        return InterleaveChunks(self, ctx, state)

    def per_element(self) -> str | None:
        return "makes a dataset from each input element (their rows flow as chunks)"


class InterleaveChunks(ChunkIter):
    """tf.data's interleave order on chunks: slot by slot, ``block_length`` rows from
    each open dataset; an exhausted slot is refilled from the input when the cycle
    comes back to it. With ``num_parallel_calls`` each slot's dataset is read ahead on
    its own background thread (the order stays tf.data's); ``deterministic=False``
    lets a slot whose rows are not ready yet give its turn to the next one.

    Each slot's rows are pulled a chunk at a time and kept until their turn; while every
    slot of the cycle holds rows, whole rounds of the cycle (``block_length`` rows from
    each slot in turn) are cut out with one gather, not a block at a time.

    State: the input's state, and for each open slot the input's state before its
    element and its dataset's iterator state (restoring reads the elements again); for a
    slot holding rows pulled but not handed out, the iterator's state before them and
    how many of them went out.
    """

    def __init__(self, node: Interleave, ctx, state):
        self.node, self.ctx = node, ctx
        self.block = int(node.block_length)
        calls = node.num_parallel_calls
        self.parallel = calls is not None and (calls == AUTOTUNE or int(calls) > 1)
        self.deterministic = ctx.options.deterministic if node.deterministic is None else bool(node.deterministic)
        if self.parallel:
            ctx.stats(node).chosen["parallel slots"] = node.cycle(ctx)
        self.limit = ctx.max_rows(node.input.spec)
        self.rows_ahead = max(self.block, ctx.max_rows(node.spec))
        cycle = node.cycle(ctx)
        if state is not None:
            slots = self._check_state(state, cycle)
        self.reader = RowReader(ctx, node.input, None if state is None else state["input"], self.limit)
        self.slots: list = [None] * cycle          # (state before element, chunk iterator)
        # Rows pulled from a slot's dataset, not handed out yet: [the iterator's state
        # before them (or None: not known, see save), chunk, rows used, rows skipped
        # before the chunk since that state]; ``ended``: the slot's dataset is exhausted.
        self.pending: list = [None] * cycle
        self.ended: list = [False] * cycle
        # With parallel reads, the datasets of the next input elements are opened (and
        # start reading) before their turn: (state before element, chunk iterator).
        self.future: collections.deque = collections.deque()
        # An error met after rows were gathered for this call: raised by the next call.
        self.error: BaseException | None = None
        self.cycle_index = 0 if state is None else state["cycle_index"]
        self.block_index = 0 if state is None else state["block_index"]
        self.end_of_input = False if state is None else state["end_of_input"]
        if state is not None:
            for i, slot in enumerate(slots):
                if slot is not None:
                    element_state, inner = slot
                    reader = RowReader(ctx, node.input, element_state, self.limit)
                    ok, element = reader.next_element()
                    reader.close()
                    if ok:
                        self._restore_slot(i, element_state, element, inner)

    def _check_state(self, state: dict, cycle: int) -> list:
        """The fields of a saved state checked (the cycle position within the cycle and
        the block, a slot per cycle element); returns the slots."""
        state_check.record(state, "input", "cycle_index", "block_index", "end_of_input", "slots")
        state_check.nested(state, "input")
        state["cycle_index"] = state_check.integer(state, "cycle_index", 0, cycle - 1)
        state["block_index"] = state_check.integer(state, "block_index", 0, self.block - 1)
        state["end_of_input"] = state_check.flag(state, "end_of_input")
        slots = state["slots"]
        if not isinstance(slots, list) or len(slots) != cycle:
            raise state_check.StateFieldError("slots", slots, f"expected {cycle} slots (the "
                                              "cycle length)")
        for i, slot in enumerate(slots):
            if slot is None:
                continue
            field = f"slots[{i}]"
            if not isinstance(slot, (tuple, list)) or len(slot) != 2:
                raise state_check.StateFieldError(field, slot, "expected (the state before "
                                                  "its element, its dataset's state)")
            state_check.record(slot[0], field=field)
            inner = state_check.record(slot[1], field=field)
            if "pending_before" in inner:
                state_check.nested(inner, "pending_before")
                state_check.integer(inner, "skip", 0, state_check.MAX_CHUNK_SKIP)
        return slots

    def _restore_slot(self, i: int, element_state, element, inner) -> None:
        if isinstance(inner, dict) and "pending_before" in inner:
            it = self._open(element, inner["pending_before"])
            skip = int(inner["skip"])
            rest, dropped = skip_rows(it, skip)
            self.slots[i] = (element_state, it)
            if rest is not None:
                self.pending[i] = [inner["pending_before"], rest, 0, skip]
            elif dropped < skip:
                self.ended[i] = True
            return
        self.slots[i] = (element_state, self._open(element, inner))

    def _open(self, element, state=None):
        ds = self.node.fn(element)
        if self.parallel:
            ctx = self.ctx
            return BackgroundChunks(ctx, lambda s: ctx.open_dataset_chunks(ds, s), ds.element_spec,
                                    state, self.rows_ahead, ctx.stats(self.node), self.node.label,
                                    start=True)
        return self.ctx.open_dataset_chunks(ds, state)

    def _read(self):
        before = self.reader.save()
        ok, element = self.reader.next_element()
        return (before, self._open(element)) if ok else None

    def _next_dataset(self):
        """The dataset of the next input element (already reading, when parallel)."""
        if self.parallel:
            while not self.end_of_input and len(self.future) < len(self.slots):
                if self.future and isinstance(self.future[-1][1], _Failed):
                    break          # read no further than an input error not yet raised
                before = self.reader.save()
                try:
                    opened = self._read()
                except OpError as e:
                    self.future.append((before, _Failed(e)))
                    break
                if opened is None:
                    self.end_of_input = True
                    break
                self.future.append(opened)
            opened = self.future.popleft() if self.future else None
            if opened is not None and isinstance(opened[1], _Failed):
                raise opened[1].error
            return opened
        return None if self.end_of_input else self._read()

    def _advance(self) -> None:
        self.block_index = 0
        self.cycle_index = (self.cycle_index + 1) % len(self.slots)

    # ------------------------------------------------------------ slot rows
    def _available(self, i: int, want: int) -> int:
        """Rows slot ``i`` holds (pulling a chunk of about ``want`` when it holds none);
        -1 when its dataset is exhausted."""
        p = self.pending[i]
        if p is not None and p[2] < p[1].n:
            return p[1].n - p[2]
        if self.ended[i]:
            return -1
        it = self.slots[i][1]
        before = it.save()
        chunk = it.next(max(1, want))
        if chunk is None:
            self.ended[i] = True
            self.pending[i] = None
            return -1
        self.pending[i] = [before, chunk, 0, 0]
        return chunk.n

    def _take(self, i: int, k: int):
        """Up to ``k`` of slot ``i``'s rows (None: its dataset is exhausted)."""
        if self._available(i, max(k, self.rows_ahead if not self.parallel else k)) < 0:
            return None
        p = self.pending[i]
        a = p[2]
        p[2] = b = min(p[1].n, a + k)
        return p[1].slice(a, b)

    def _ready(self, i: int) -> bool:
        p = self.pending[i]
        return (p is not None and p[2] < p[1].n) or self.ended[i] or self.slots[i][1].ready()

    def _close_slot(self, i: int) -> None:
        self.slots[i][1].close()
        self.slots[i] = None
        self.pending[i] = None
        self.ended[i] = False

    def _rounds(self, want: int):
        """Whole rounds of the cycle from the slots' rows (at most ``want`` rows), as one
        chunk; None when not one round fits in ``want``, a slot is not open or holds less
        than a block."""
        n_slots, block = len(self.slots), self.block
        if want < n_slots * block or any(s is None for s in self.slots):
            return None
        per = -(-max(want, 1) // (n_slots * block)) * block   # rows per slot
        counts = []
        for k in range(n_slots):
            i = (self.cycle_index + k) % n_slots
            got = self._available(i, per)
            if got < block:
                return None
            counts.append(got)
        rounds = min(min(counts) // block, want // (n_slots * block))
        rows = rounds * block
        parts = []
        for k in range(n_slots):
            i = (self.cycle_index + k) % n_slots
            p = self.pending[i]
            parts.append(p[1].slice(p[2], p[2] + rows))
            p[2] += rows
        # Row r of the output: round r // (n * block), slot (r // block) % n, row of block.
        r = np.arange(rounds, dtype=np.int64)[:, None, None]
        j = np.arange(n_slots, dtype=np.int64)[None, :, None]
        b = np.arange(block, dtype=np.int64)[None, None, :]
        order = (j * rows + r * block + b).reshape(-1)
        return concat_chunks(parts).take(order)

    def next(self, want: int):
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        parts: list = []
        try:
            self._gather(parts, want)
        except OpError as e:
            # tf.data hands out the rows before an error, then the error; the position
            # is already past the failing element, so reading then goes on after it.
            if not parts:
                raise
            self.error = e
        return concat_chunks(parts) if parts else None

    def _gather(self, parts: list, want: int) -> None:
        have = 0
        skipped = 0
        while have < want:
            if self.end_of_input and not self.future and all(s is None for s in self.slots):
                break
            if self.block_index == 0 and (self.deterministic or not self.parallel):
                rounds = self._rounds(want - have)
                if rounds is not None:
                    parts.append(rounds)
                    have += rounds.n
                    continue
            slot = self.slots[self.cycle_index]
            if slot is None:
                if self.end_of_input and not self.future:
                    self._advance()
                    continue
                opened = self._next_dataset()
                if opened is None:
                    self.end_of_input = True
                    continue
                self.slots[self.cycle_index] = opened
                self.pending[self.cycle_index] = None
                self.ended[self.cycle_index] = False
                continue
            if (self.parallel and not self.deterministic and parts
                    and not self._ready(self.cycle_index) and skipped < len(self.slots)):
                skipped += 1
                self._advance()
                continue
            chunk = self._take(self.cycle_index, min(self.block - self.block_index, want - have))
            if chunk is None:
                self._close_slot(self.cycle_index)
                self._advance()
                continue
            if chunk.n:
                parts.append(chunk)
                have += chunk.n
                self.block_index += chunk.n
            if self.block_index >= self.block:
                self._advance()

    def _slot_state(self, i: int):
        p = self.pending[i]
        if p is not None and p[2] < p[1].n:
            return {"pending_before": p[0], "skip": p[3] + p[2]}
        return self.slots[i][1].save()

    def save(self) -> dict:
        # datasets opened ahead are not part of the state: their elements are read again
        reader = self.future[0][0] if self.future else self.reader.save()
        return {"input": reader, "cycle_index": self.cycle_index,
                "block_index": self.block_index,
                "end_of_input": self.end_of_input and not self.future,
                "slots": [None if s is None else (s[0], self._slot_state(i))
                          for i, s in enumerate(self.slots)]}

    def close(self) -> None:
        for s in list(self.slots) + list(self.future):
            if s is not None:
                s[1].close()
        self.reader.close()
